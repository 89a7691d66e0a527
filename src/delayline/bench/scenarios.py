"""The benchmark scenarios. Each returns a dict of figures (see benchmarks/README.md)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from delayline.bench.cancels import cancels
from delayline.bench.recurring import recurring
from delayline.bench.retry_storm import retry_storm
from delayline.bench.run import (
    BenchEnv,
    accept_lags_ms,
    accepted_timeline,
    handed_over,
    progress,
    scenario_figures,
    spark_batches,
    start_pipeline,
    wait_accepted,
    wait_delivered,
    write_schedules,
)
from delayline.bench.sampler import jvm_cpu_by_thread_kind, jvm_kinds_between
from delayline.core.stats import summary
from delayline.dev.harness import DeliveryCollector
from delayline.errors import WaitTimeoutError
from delayline.kafka.topics import create_topic
from delayline.pipeline.config import batch_work_ms

DAY_MS = 86_400_000
WARM_UP_SCENARIOS = ("steady", "trickle", "burst", "burst-ahead", "cancels", "recurring",
                     "retry-storm", "idle")  # fmt: skip
"""Scenarios ``--warm-up`` applies to: those that measure one running pipeline. Not the
ones that restart it (a cold JVM again), nor those whose figure is a peak over the
whole run (memory); ``idle``'s figure is its CPU over a window (its peak RSS, beside it,
then includes the warm-up)."""
WARM_UP_RATE_PER_S = 500
"""Schedules per second of ``--warm-up``'s load: one the pipeline keeps up with here, so
the warm-up ends with nothing queued."""


@dataclass(frozen=True, slots=True)
class Size:
    """Load of a scenario; ``quick`` variants finish in about a minute."""

    rate_per_s: int = 0
    duration_s: int = 0
    count: int = 0
    pending: int = 0
    pending_span_ms: int = 0
    """The far-future schedules are due from a day out over this long (0: a second)."""


SIZES: dict[str, tuple[Size, Size]] = {  # (full, quick)
    "steady": (Size(rate_per_s=5000, duration_s=60), Size(rate_per_s=300, duration_s=15)),
    "trickle": (Size(rate_per_s=10, duration_s=60), Size(rate_per_s=10, duration_s=20)),
    "burst": (Size(count=100_000), Size(count=5_000)),
    "burst-ahead": (Size(count=50_000), Size(count=5_000)),
    "backlog": (
        Size(pending=1_000_000, rate_per_s=200, duration_s=30),
        Size(pending=20_000, rate_per_s=100, duration_s=10),
    ),
    "restart": (Size(pending=1_000_000, count=3_000), Size(pending=10_000, count=600)),
    "idle": (Size(pending=1_000, duration_s=60), Size(pending=100, duration_s=20)),
    "soak": (Size(rate_per_s=1000, duration_s=1200), Size(rate_per_s=100, duration_s=90)),
    "cancels": (Size(count=20), Size(count=5)),
    "recurring": (Size(count=100_000), Size(count=2_000)),
    "retry-storm": (Size(rate_per_s=10_000, duration_s=30), Size(rate_per_s=1_000, duration_s=10)),
}  # fmt: skip


def steady(env: BenchEnv, size: Size) -> dict[str, Any]:
    """A constant rate, each due 10-30 s after it is written."""
    rng = random.Random(1)
    total = size.rate_per_s * size.duration_s
    idle = _idle_window(env, 10)
    sent: list[int] = []
    with DeliveryCollector(env.bootstrap, [env.target_topic]) as seen:
        load_from = time.time()
        due = write_schedules(env, total, lambda i, now: now + rng.randint(10_000, 30_000),
                              rate_per_s=size.rate_per_s, on_progress=_sent(total),
                              sent_ms=sent)  # fmt: skip
        accepted_ms = wait_accepted(env, total, 600 + total / 200, "steady")
        deliveries = wait_delivered(seen, set(due), 120 + total / 200, "steady")
        load_to = time.time()
    figures = scenario_figures(env, deliveries, due, load_from, load_to, accepted_ms, idle)
    figures["accept_lag_ms"] = summary(accept_lags_ms(accepted_timeline(env), sent, 0))
    return figures


def trickle(env: BenchEnv, size: Size) -> dict[str, Any]:
    """A few schedules a second (as ``make demo`` writes), each due 5-15 s after it is
    written: how punctual each delivery is when nothing queues."""
    rng = random.Random(3)
    total = size.rate_per_s * size.duration_s
    with DeliveryCollector(env.bootstrap, [env.target_topic]) as seen:
        load_from = time.time()
        due = write_schedules(env, total, lambda i, now: now + rng.randint(5_000, 15_000),
                              rate_per_s=size.rate_per_s, on_progress=_sent(total))  # fmt: skip
        accepted_ms = wait_accepted(env, total, 600, "trickle")
        deliveries = wait_delivered(seen, set(due), 120, "trickle")
        load_to = time.time()
    return scenario_figures(env, deliveries, due, load_from, load_to, accepted_ms, None)


def burst(env: BenchEnv, size: Size) -> dict[str, Any]:
    """``count`` schedules all due in the same second, once all are accepted."""
    idle = _idle_window(env, 10)
    # Far enough ahead that ingest finishes first; then the whole burst falls due.
    return _burst(env, size.count, 30_000 + size.count * 2, 0, idle, "burst")


BURST_AHEAD_MS = 60_000
"""``burst-ahead``: the first schedule is due this long after the writing starts."""
BURST_SPREAD_MS = 1_000
"""``burst-ahead``: the schedules are due evenly over this long."""


def burst_ahead(env: BenchEnv, size: Size) -> dict[str, Any]:
    """``count`` schedules due evenly over one second, written a minute ahead: whether a
    burst raised and handed over ahead reaches a ``read_committed`` reader on time."""
    return _burst(env, size.count, BURST_AHEAD_MS, BURST_SPREAD_MS, None, "burst-ahead")


def _burst(
    env: BenchEnv, count: int, ahead_ms: int, spread_ms: int, idle: float | None, name: str
) -> dict[str, Any]:
    """Write ``count`` schedules due from ``ahead_ms`` after the writing starts, evenly
    over ``spread_ms``; wait for every delivery. A second reader, ``read_uncommitted``
    (Kafka's Java default), counts what it sees before its due time."""
    with (
        DeliveryCollector(env.bootstrap, [env.target_topic]) as seen,
        DeliveryCollector(env.bootstrap, [env.target_topic], read_committed=False) as unseen,
    ):
        load_from = time.time()
        base = time.time_ns() // 1_000_000 + ahead_ms
        step = spread_ms / count
        due = write_schedules(env, count, lambda i, now: base + int(i * step),
                              on_progress=_sent(count))  # fmt: skip
        accepted_ms = wait_accepted(env, count, ahead_ms / 1000 + 600, name)
        if accepted_ms > base:
            progress(f"{name}: ingest finished {accepted_ms - base} ms after the first due time")
        deliveries = wait_delivered(seen, set(due), ahead_ms / 1000 + 600, name)
        load_to = time.time()
        uncommitted = unseen.snapshot()  # it sees at least what the other one does
    figures = scenario_figures(env, deliveries, due, load_from, load_to, accepted_ms, idle)
    figures["ingest_finished_before_due_ms"] = base - accepted_ms
    early, handed_ms = handed_over(env)
    figures["raised_early"] = early
    if handed_ms is not None:
        figures["handed_over_before_due_ms"] = base - handed_ms
    figures["early_seen_uncommitted"] = sum(
        1 for d in uncommitted if d.schedule_id in due and d.arrival_ms < due[d.schedule_id]
    )
    return figures


def backlog(env: BenchEnv, size: Size) -> dict[str, Any]:
    """``pending`` schedules due in a day, then a steady stream due 10-20 s later."""
    rng = random.Random(2)
    far = time.time_ns() // 1_000_000 + DAY_MS
    progress(f"backlog: writing {size.pending:,} far-future schedules")
    write_schedules(
        env, size.pending, _far(far, size), prefix="far", on_progress=_sent(size.pending)
    )
    wait_accepted(env, size.pending, 7200, "backlog")
    idle = _idle_window(env, 10)
    total = size.rate_per_s * size.duration_s
    with DeliveryCollector(env.bootstrap, [env.target_topic]) as seen:
        load_from = time.time()
        due = write_schedules(env, total, lambda i, now: now + rng.randint(10_000, 20_000),
                              rate_per_s=size.rate_per_s, on_progress=_sent(total))  # fmt: skip
        accepted_ms = wait_accepted(env, size.pending + total, 600, "backlog stream")
        deliveries = wait_delivered(seen, set(due), 300, "backlog stream")
        load_to = time.time()
    figures = scenario_figures(env, deliveries, due, load_from, load_to, accepted_ms, idle)
    figures["pending_held"] = size.pending
    figures["small_batch_ms"] = _small_batches(env, size.pending + total)
    return figures


def _far(far: int, size: Size) -> Any:
    """Due times of the far-future schedules: from ``far`` on, a millisecond apart, or
    evenly over ``size.pending_span_ms``."""
    if not size.pending_span_ms:
        return lambda i, now: far + i
    return lambda i, now: far + i * size.pending_span_ms // max(size.pending, 1)


def _batch_after(env: BenchEnv, seen: int, timeout_s: float = 60) -> dict[str, Any]:
    """Spark's progress of the first batch after ``seen`` (Spark reports it a moment
    after the batch ends)."""
    deadline = time.monotonic() + timeout_s
    while (batches := spark_batches(env)[seen:]) == [] and time.monotonic() < deadline:
        time.sleep(0.2)
    if not batches:
        raise WaitTimeoutError(f"no Spark progress after batch {seen} within {timeout_s} s")
    return batches[0]


def _small_batches(env: BenchEnv, accepted: int, rounds: int = 10, rows: int = 100) -> Any:
    """What batches of ``rows`` new schedules took (:func:`batch_work_ms`: Spark's
    ``triggerExecution`` less the gated source's wait), written ``rounds`` times with the
    pipeline otherwise idle: the fixed cost of a batch."""
    progress(f"small batches: {rounds} x {rows} schedules")
    seen = len(spark_batches(env))
    far = time.time_ns() // 1_000_000 + DAY_MS
    for r in range(rounds):
        write_schedules(env, rows, lambda i, now: far + i, prefix=f"small{r}")
        accepted += rows
        wait_accepted(env, accepted, 300, "small batches")
        time.sleep(2)  # the next round starts a batch of its own
    durations = [
        work
        for b in spark_batches(env)[seen:]
        if b["num_input_rows"] >= rows // 2
        and (work := batch_work_ms(b.get("duration_ms") or {})) is not None
    ]
    return summary(durations)


DRAIN_AFTER_KILL_S = 2.0
"""How long after the SIGKILL the restart waits, so that every delivery the killed
pipeline committed has reached the bench's reader: a delivery counted after the restart
must come from the restarted pipeline. The reader polls all the time and the raw
broker's consume latency measured beside each run is milliseconds (p99 12-13 ms in the
10M runs), so 2 s leaves a wide margin; the restart is counted from after it."""


def restart(env: BenchEnv, size: Size) -> dict[str, Any]:
    """``pending`` far-future schedules plus ``count`` due over 60 s; SIGKILL mid-run."""
    assert env.pipeline is not None
    far = time.time_ns() // 1_000_000 + DAY_MS
    progress(f"restart: writing {size.pending:,} far-future schedules")
    write_schedules(
        env, size.pending, _far(far, size), prefix="far", on_progress=_sent(size.pending)
    )
    wait_accepted(env, size.pending, 7200, "restart")
    with DeliveryCollector(env.bootstrap, [env.target_topic]) as seen:
        load_from = time.time()
        start_ms = time.time_ns() // 1_000_000 + 5_000
        due = write_schedules(env, size.count, lambda i, now: start_ms + i * 60_000 // size.count)
        seen.wait_for(lambda d: len(d) >= size.count // 3, timeout_s=300)
        progress("restart: SIGKILL of the pipeline")
        env.pipeline.kill()
        # What the killed pipeline committed reaches the reader first; then the restart.
        # Counted from the start, not from ready: what the restarted pipeline delivers
        # while it starts (the committer's hand-overs) counts too.
        time.sleep(DRAIN_AFTER_KILL_S)
        before = len(seen.snapshot())
        batches_before = len(spark_batches(env))
        restarted = time.time()
        ready_s = start_pipeline(env)
        first_batch_ms = batch_work_ms(_batch_after(env, batches_before)["duration_ms"])
        first = seen.wait_for(lambda d: len(d) > before, timeout_s=600)
        first_after_s = (min(d.arrival_ms for d in first[before:]) / 1000) - restarted
        deliveries = wait_delivered(seen, set(due), 600, "restart")
        load_to = time.time()
    figures = scenario_figures(env, deliveries, due, load_from, load_to, None, None)
    figures.update(pending_held=size.pending, restart_ready_s=round(ready_s, 1),
                   first_delivery_after_restart_s=round(first_after_s, 1),
                   first_batch_after_restart_ms=first_batch_ms)  # fmt: skip
    return figures


def idle(env: BenchEnv, size: Size) -> dict[str, Any]:
    """Nothing due: the pipeline's CPU and memory while it waits."""
    far = time.time_ns() // 1_000_000 + DAY_MS
    write_schedules(env, size.pending, _far(far, size), prefix="far")
    wait_accepted(env, size.pending, 600, "idle")
    began = time.time()
    window = _idle_window(env, size.duration_s)
    ended = time.time()
    assert env.sampler is not None
    by_role = env.sampler.cpu_percent_by_role(began, ended)
    figures: dict[str, Any] = {
        "pending_held": size.pending,
        "cpu_idle_pct": window,
        # Where it goes: each process's share, % of one core.
        "cpu_idle_pct_by_role": {role: round(pct, 2) for role, pct in by_role.items()},
        "cpu_idle_pct_by_jvm_thread": env.idle_by_jvm_thread,
        "peak_rss_mb": round(env.sampler.peak_rss_bytes() / 2**20),
        "rss_at_peak_mb": env.sampler.rss_at_peak_mb(),
    }
    if env.broker_sampler is not None:  # what the pipeline's idle readers cost the broker
        figures["broker_cpu_idle_pct"] = _round(env.broker_sampler.cpu_percent(began, ended))
        figures["broker_peak_rss_mb"] = round(env.broker_sampler.peak_rss_bytes() / 2**20)
    return figures


def soak(env: BenchEnv, size: Size) -> dict[str, Any]:
    """Minutes of a steady rate with SIGKILLs of the pipeline (:mod:`delayline.bench.soak`)."""
    from delayline.bench.soak import soak as run  # noqa: PLC0415 - it builds on this module

    return run(env, size)


SCENARIOS: dict[str, Callable[[BenchEnv, Size], dict[str, Any]]] = {
    "steady": steady, "trickle": trickle, "burst": burst, "burst-ahead": burst_ahead,
    "backlog": backlog,
    "restart": restart, "idle": idle, "soak": soak, "cancels": cancels,
    "recurring": recurring, "retry-storm": retry_storm,
}  # fmt: skip


def warm_up(env: BenchEnv, seconds: float) -> dict[str, Any]:
    """Warm the pipeline's JVM with the work of a running service before a scenario.

    Writes :data:`WARM_UP_RATE_PER_S` schedules a second for ``seconds`` (ids
    ``warm-<n>``, due 5-15 s after they are written: planned, raised, handed over and
    delivered as in the trickle) and waits until all are delivered. They go to a target
    topic of their own: the scenario's reader, which reads its topic from the beginning,
    would otherwise turn them into objects while it stamps the scenario's arrivals, and
    the bench process's garbage collection of those stamped half-second stalls on
    deliveries that a reader of its own process saw on time. What the pipeline accepted
    meanwhile is left out of the scenario's accepted figures
    (:attr:`BenchEnv.accepted_after_ms`); its CPU windows start after it anyway.

    Raises:
        WaitTimeoutError: the warm-up was not delivered within two minutes of its end.
    """
    rng = random.Random(7)
    total = int(WARM_UP_RATE_PER_S * seconds)
    progress(f"warming up: {total:,} schedules over {seconds:g} s")
    began = time.time()
    topic = env.warm_up_topic
    create_topic(env.bootstrap, topic, partitions=4)
    with DeliveryCollector(env.bootstrap, [topic]) as seen:
        due = write_schedules(env, total, lambda i, now: now + rng.randint(5_000, 15_000),
                              rate_per_s=WARM_UP_RATE_PER_S, prefix="warm",
                              on_progress=_sent(total), target_topic=topic)  # fmt: skip
        delivered = {d.schedule_id for d in wait_delivered(seen, set(due), 120, "warm-up")}
    missing = len(set(due) - delivered)
    if missing:
        raise WaitTimeoutError(f"warm-up: {missing:,} of {total:,} not delivered in 120 s")
    env.accepted_after_ms = int(time.time() * 1000)
    return {"seconds": seconds, "schedules": total, "wall_s": round(time.time() - began, 1)}


def _idle_window(env: BenchEnv, seconds: int) -> float | None:
    """Let the pipeline sit with nothing due; return its CPU % of one core (and keep the
    JVM's share by thread kind in :attr:`BenchEnv.idle_by_jvm_thread`)."""
    assert env.sampler is not None
    progress(f"measuring idle CPU for {seconds} s")
    proc = None if env.pipeline is None else env.pipeline.proc
    threads_before = {} if proc is None else jvm_cpu_by_thread_kind(proc.pid)
    began = time.time()
    time.sleep(seconds)
    ended = time.time()
    if proc is not None:
        threads = jvm_cpu_by_thread_kind(proc.pid)
        env.idle_by_jvm_thread = jvm_kinds_between(threads_before, threads, ended - began)
    return _round(env.sampler.cpu_percent(began, ended))


def _sent(total: int) -> Callable[[int], None]:
    return lambda i: progress(f"sent {i:,}/{total:,}", end="\r")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
