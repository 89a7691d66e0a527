#!/usr/bin/env bash
# Re-run every bench scenario at full size, one after another, into benchmarks/results/.
# Takes about 45 minutes on 2 cores; nothing else should run meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
for scenario in burst steady idle restart backlog; do
  echo "== $scenario" >&2
  .venv/bin/delayline bench --scenario "$scenario" \
    --json "benchmarks/results/$scenario.json" --plot "benchmarks/results/$scenario.png" \
    | tee "benchmarks/results/$scenario.txt"
done
# The restart target with 1,000 pending (the scenario's own size holds 1M).
echo "== restart-1k" >&2
.venv/bin/delayline bench --scenario restart --pending 1000 \
  --json benchmarks/results/restart-1k.json --plot benchmarks/results/restart-1k.png \
  | tee benchmarks/results/restart-1k.txt
.venv/bin/python -m delayline.bench.summary
