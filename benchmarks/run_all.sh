#!/usr/bin/env bash
# Re-run every bench scenario at full size, one after another, into benchmarks/results/.
# Nothing else should run meanwhile. On 2 cores, by part:
#   engine   the engine's scenarios, the soak and the cancels (about 80 minutes)
#   holds    the Redis and the bucket holds (about 90 minutes: 10M pending for buckets)
#   cluster  the burst on a standalone Spark cluster of this machine (about 15 minutes)
#   committer  one committer alone, then a take-over after a SIGKILL (about 5 minutes)
#   ladder   the ladder, warm, with the full JIT (about 35 minutes)
# Usage: benchmarks/run_all.sh [engine|holds|cluster|committer|ladder]...   (no argument: all)
set -euo pipefail
cd "$(dirname "$0")/.."

bench() {  # bench NAME FLAGS...: one scenario into results/NAME.{txt,json}
  local name=$1
  shift
  echo "== $name" >&2
  .venv/bin/delayline bench "$@" --json "benchmarks/results/$name.json" \
    | tee "benchmarks/results/$name.txt"
}

engine() {
  for scenario in trickle burst steady idle restart backlog backlog-2 backlog-3; do
    # The backlog three times: its RSS must be the same within 10% from run to run.
    bench "$scenario" --scenario "${scenario%-[0-9]}" --plot "benchmarks/results/$scenario.png"
  done
  # The soak: 20 minutes at 1,000/s with three SIGKILLs of the pipeline.
  bench soak --scenario soak --plot benchmarks/results/soak.png
  # The precision target at 1,000/s (the steady scenario's own rate is 5,000/s).
  bench steady-1000 --scenario steady --rate 1000 --plot benchmarks/results/steady-1000.png
  # The burst with its target limited to 5,000/s (pacing): the busiest second against it.
  bench burst-rate-5000 --scenario burst --target-rate 5000/s
  # A burst raised ahead (50,000 due in one second, written a minute ahead), with a lead
  # that covers the batch that raises it (docs/pipeline.md): delivered from its due time
  # (the default, safe for read_uncommitted readers), then written ahead (--write-ahead).
  bench burst-ahead --scenario burst-ahead --lead 30s
  # The same burst at the default lead: no lead chosen by hand.
  bench burst-ahead-default-lead --scenario burst-ahead
  bench burst-ahead-write-ahead --scenario burst-ahead --lead 30s --write-ahead
  # Recurring schedules: 100,000 every minute (three occurrences each).
  bench recurring --scenario recurring
  # A retry storm: 10,000 consumer failures a second for 30 s, each retried after 1 s.
  bench retry-storm --scenario retry-storm
  # The restart target with 1,000 pending (the scenario's own size holds 1M).
  bench restart-1k --scenario restart --pending 1000 --plot benchmarks/results/restart-1k.png
  # How close to the due time a cancel still wins.
  bench cancels --scenario cancels
}

holds() {
  # The Redis hold, with a private Redis beside the private broker.
  for scenario in burst steady backlog; do
    bench "redis-$scenario" --scenario "$scenario" --hold redis \
      --plot "benchmarks/results/redis-$scenario.png"
  done
  # The bucket hold: burst and steady, then 10M pending due over 30 days, with a SIGKILL
  # and a restart (about an hour on its own).
  for scenario in burst steady; do
    bench "buckets-$scenario" --scenario "$scenario" --hold buckets \
      --plot "benchmarks/results/buckets-$scenario.png"
  done
  bench buckets-restart --scenario restart --hold buckets --pending 10000000 \
    --pending-span 30d --plot benchmarks/results/buckets-restart.png
}

cluster() {
  # The burst in local mode, then on a standalone master and two workers of one core
  # each on this machine, same broker; once with the default lead (the committer
  # delivers), once with --lead 0 (the executors deliver).
  .venv/bin/delayline cluster start --data-dir .delayline/bench-cluster
  trap '.venv/bin/delayline cluster stop --data-dir .delayline/bench-cluster' EXIT
  for lead in default 0; do
    local flags=()
    [ "$lead" = default ] || flags=(--lead "$lead")
    bench "cluster-burst-lead-$lead" --scenario burst --master spark://127.0.0.1:7077 \
      "${flags[@]}"
  done
}

committer() {
  # One committer fed at rising rates to its ceiling, then idle with 1,000 pending.
  bench committer --scenario committer
  # Two committers; one SIGKILLed mid-run, the other takes its partitions over.
  bench takeover --scenario takeover
}

ladder() {
  # Where a schedule's CPU goes, stage by stage: 200,000 schedules, each rung warm,
  # the last (due) with every schedule raised, handed over and delivered.
  bench ladder-full-jit --scenario ladder --jit full
}

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(engine holds cluster committer ladder)
for part in "${parts[@]}"; do
  case "$part" in
    engine | holds | cluster | committer | ladder) "$part" ;;
    *) echo "unknown part '$part': engine, holds, cluster, committer or ladder" >&2; exit 2 ;;
  esac
done
.venv/bin/python -m delayline.bench.summary
