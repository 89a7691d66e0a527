"""Every package of delayline sits in one layer of the import contract that `make lint`
checks (``[tool.importlinter]`` in pyproject.toml), so a new package cannot escape it."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "delayline"
NO_CODE = {"admin"}
"""Packages of static files only."""


def test_every_package_is_in_a_layer() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")} - NO_CODE
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert packages | modules == layered


def test_the_layers_run_from_the_command_line_down_to_the_core() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    order = [layer.split("|")[0].strip() for layer in contract["layers"]]
    expected = [
        "cli",
        "api",
        "catalog",
        "pipeline",
        "committer",
        "fire",
        "holds",
        "kafka",
        "contract",
        "core",
    ]
    assert [name for name in order if name in expected] == expected


HTTP_CLIENTS = ("urllib.request", "http.client", "httpx", "requests", "aiohttp")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, and ``package.name`` of each ``from package import
    name`` (a submodule imported that way)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_one_http_client() -> None:
    """delayline's own HTTP calls go through :mod:`delayline.core.http`; the demo calls
    the API with httpx, as a user would."""
    allowed = {"core/http.py", "dev/demo_api.py"}
    users = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(m.startswith(HTTP_CLIENTS) for m in imported_modules(path))
    }
    assert users <= allowed, users - allowed
    assert "urllib.request" in imported_modules(PACKAGE / "core" / "http.py")


SHARED_HOLD_MODULES = ("delayline.holds.registry", "delayline.holds.kinds", "delayline.holds.hold",
                       "delayline.holds.fold")  # fmt: skip
"""What the rest of delayline may know of the holds: the registry, the interface and the
rules every hold applies."""


def names_a_concrete_hold(module: str) -> bool:
    """``module`` is (or is inside) a module of ``holds/`` other than the shared ones."""
    return module.startswith("delayline.holds.") and not any(
        module == shared or module.startswith(f"{shared}.") for shared in SHARED_HOLD_MODULES
    )


def test_no_package_outside_holds_imports_a_concrete_hold() -> None:
    """Outside ``holds/`` a hold is known only through the registry and the interface:
    adding a hold touches no other package."""
    assert names_a_concrete_hold("delayline.holds.redis.config")
    assert names_a_concrete_hold("delayline.holds.buckets")
    assert not names_a_concrete_hold("delayline.holds.registry.HOLD_KINDS")
    concrete = {
        str(path.relative_to(PACKAGE)): sorted(
            filter(names_a_concrete_hold, imported_modules(path))
        )
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "holds"
    }
    assert {path: found for path, found in concrete.items() if found} == {}


def test_the_architecture_doc_names_every_package() -> None:
    text = (REPO / "docs" / "architecture.md").read_text()
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("_")}
    missing = sorted(name for name in packages if f"`{name}/`" not in text)
    assert missing == [], f"docs/architecture.md does not name {missing}"


OPTIONAL = ("pyspark", "pyarrow", "numpy", "pandas", "redis", "fastapi", "uvicorn", "starlette",
            "pydantic", "matplotlib", "prometheus_client", "httpx")  # fmt: skip
"""The extras' packages: imported where used, so the base install starts without them."""


def test_an_import_inside_a_function_is_an_optional_one_or_says_why() -> None:
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    module = inner.module or ""
                elif isinstance(inner, ast.Import):
                    module = inner.names[0].name
                else:
                    continue
                line = lines[inner.lineno - 1]
                if not module.startswith(OPTIONAL) and " - " not in line:
                    unexplained.append(f"{path.relative_to(PACKAGE)}:{inner.lineno}")
    assert unexplained == []
