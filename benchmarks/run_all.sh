#!/usr/bin/env bash
# Re-run every bench scenario at full size, one after another, into benchmarks/results/.
# Takes about 40 minutes on 2 cores; nothing else should run meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
for scenario in burst steady idle restart backlog; do
  echo "== $scenario" >&2
  .venv/bin/delayline bench --scenario "$scenario" \
    --json "benchmarks/results/$scenario.json" --plot "benchmarks/results/$scenario.png" \
    | tee "benchmarks/results/$scenario.txt"
done
.venv/bin/python -m delayline.bench.summary
