# delayline: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup system jars js lint test test-long test-unit test-integration test-browser api demo broker-start broker-stop clean

# Create the venv and install delayline with its dev tools; redone when pyproject changes.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "delayline needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[all,dev]'
	@touch $@

setup: system $(STAMP) jars

# Java, Maven, python3-venv and Chromium from Debian, when missing (needs root or sudo).
system:
	@bash infra/system-packages.sh

# Resolve the Kafka broker and Spark connector jars into the local cache (once).
jars: $(STAMP)
	$(BIN)/delayline jars

# ESLint for the admin page's JavaScript, from package-lock.json; redone when it changes.
JS_STAMP := node_modules/.installed
$(JS_STAMP): package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

js: $(JS_STAMP)

lint: system $(STAMP) js
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy  # src, tests and benchmarks: [tool.mypy] files in pyproject.toml
	$(BIN)/lint-imports --no-cache  # imports go down the layers: [tool.importlinter]
	npx eslint src/delayline/admin/static
	node --test tests/js/
	promtool check rules ops/prometheus/rules.yml
	cd ops/prometheus && promtool test rules rules.test.yml
	promtool check config --syntax-only ops/prometheus/prometheus.yml

test: setup lint
	$(BIN)/pytest tests -m 'not long'

# The fault scenarios that take minutes each (tests marked long); not in `make test`.
test-long: setup
	$(BIN)/pytest tests -m long

test-unit: $(STAMP)
	$(BIN)/pytest tests/unit

test-integration: setup
	$(BIN)/pytest tests/integration

test-browser: setup
	$(BIN)/pytest tests/browser

api: setup
	$(BIN)/delayline api

demo: setup
	$(BIN)/delayline demo

broker-start: setup
	$(BIN)/delayline broker start

broker-stop: $(STAMP)
	$(BIN)/delayline broker stop

clean:
	-$(BIN)/delayline broker stop 2>/dev/null
	rm -rf $(VENV) .delayline .pytest_cache .mypy_cache .ruff_cache .hypothesis
