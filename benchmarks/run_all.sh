#!/usr/bin/env bash
# Re-run every bench scenario at full size, one after another, into benchmarks/results/.
# Takes about 80 minutes (plus the holds and the cluster) on 2 cores; nothing else should run meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
for scenario in trickle burst steady idle restart backlog backlog-2 backlog-3; do
  echo "== $scenario" >&2
  # The backlog three times: its RSS must be the same within 10% from run to run.
  .venv/bin/delayline bench --scenario "${scenario%-[0-9]}" \
    --json "benchmarks/results/$scenario.json" --plot "benchmarks/results/$scenario.png" \
    | tee "benchmarks/results/$scenario.txt"
done
# The soak (issue #16): 20 minutes at 1,000/s with three SIGKILLs of the pipeline.
echo "== soak" >&2
.venv/bin/delayline bench --scenario soak \
  --json benchmarks/results/soak.json --plot benchmarks/results/soak.png \
  | tee benchmarks/results/soak.txt
# The precision target at 1,000/s (the steady scenario's own rate is 5,000/s).
echo "== steady-1000" >&2
.venv/bin/delayline bench --scenario steady --rate 1000 \
  --json benchmarks/results/steady-1000.json --plot benchmarks/results/steady-1000.png \
  | tee benchmarks/results/steady-1000.txt
# The burst again with its target limited to 5,000/s (pacing): the busiest second against
# the limit.
echo "== burst --target-rate 5000/s" >&2
.venv/bin/delayline bench --scenario burst --target-rate 5000/s \
  --json benchmarks/results/burst-rate-5000.json \
  | tee benchmarks/results/burst-rate-5000.txt

# A burst raised and written ahead (50,000 due in one second, written a minute ahead),
# with a lead that covers the batch that raises it (docs/pipeline.md).
echo "== burst-ahead" >&2
.venv/bin/delayline bench --scenario burst-ahead --lead 30s \
  --json benchmarks/results/burst-ahead.json \
  | tee benchmarks/results/burst-ahead.txt
# Recurring schedules: 100,000 every minute (three occurrences each).
echo "== recurring" >&2
.venv/bin/delayline bench --scenario recurring \
  --json benchmarks/results/recurring.json \
  | tee benchmarks/results/recurring.txt
# The restart target with 1,000 pending (the scenario's own size holds 1M).
echo "== restart-1k" >&2
.venv/bin/delayline bench --scenario restart --pending 1000 \
  --json benchmarks/results/restart-1k.json --plot benchmarks/results/restart-1k.png \
  | tee benchmarks/results/restart-1k.txt
# The Redis hold (issue #13), each with a private Redis beside the private broker.
for scenario in burst steady backlog; do
  echo "== redis-$scenario" >&2
  .venv/bin/delayline bench --scenario "$scenario" --hold redis \
    --json "benchmarks/results/redis-$scenario.json" --plot "benchmarks/results/redis-$scenario.png" \
    | tee "benchmarks/results/redis-$scenario.txt"
done
# The bucket hold (issue #14): burst and steady, then 10M pending due over 30 days, with
# a SIGKILL and a restart (about an hour on its own).
for scenario in burst steady; do
  echo "== buckets-$scenario" >&2
  .venv/bin/delayline bench --scenario "$scenario" --hold buckets \
    --json "benchmarks/results/buckets-$scenario.json" --plot "benchmarks/results/buckets-$scenario.png" \
    | tee "benchmarks/results/buckets-$scenario.txt"
done
echo "== buckets-restart" >&2
.venv/bin/delayline bench --scenario restart --hold buckets --pending 10000000 --pending-span 30d \
  --json benchmarks/results/buckets-restart.json --plot benchmarks/results/buckets-restart.png \
  | tee benchmarks/results/buckets-restart.txt
# The cluster (issue #15): the burst in local mode, then on a standalone master and two
# workers of one core each on this machine, same broker; once with the default lead
# (the committer delivers), once with --lead 0 (the executors deliver).
.venv/bin/delayline cluster start --data-dir .delayline/bench-cluster
trap '.venv/bin/delayline cluster stop --data-dir .delayline/bench-cluster' EXIT
for lead in default 0; do
  echo "== cluster-burst-lead-$lead" >&2
  flags=(); [ "$lead" = default ] || flags=(--lead "$lead")
  .venv/bin/delayline bench --scenario burst --master spark://127.0.0.1:7077 "${flags[@]}" \
    --json "benchmarks/results/cluster-burst-lead-$lead.json" \
    | tee "benchmarks/results/cluster-burst-lead-$lead.txt"
done
.venv/bin/python -m delayline.bench.summary
