"""Committers in the benchmark: more of them beside the pipeline (``--committers``; each
one's share is :func:`delayline.bench.shares.committer_shares`), and one committer's own
ceiling (``--scenario committer``): how many deliveries a second it commits on time, with
the broker's limit for the same writes beside it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import Producer

from delayline.bench.run import BenchEnv, progress
from delayline.bench.sampler import GroupSampler, cpu_by_thread_kind
from delayline.bench.shares import committers_owning
from delayline.contract import OutgoingRecord
from delayline.core.identifiers import inflight_topic, transactional_id
from delayline.core.model import Schedule, SourceRef
from delayline.core.stats import summary
from delayline.dev.harness import Delivery, DeliveryCollector, PipelineProcess
from delayline.fire.inflight import render_inflight
from delayline.kafka.config import kafka_client_config
from delayline.kafka.produce import produce
from delayline.kafka.topics import ensure_inflight_topic

CEILING_RATES = (1_000, 2_000, 4_000, 8_000)
"""Deliveries a second offered to one committer, a step each (``--quick``: the first two)."""
STEP_S = 10
"""How long each rate is offered."""
DUE_AFTER_MS = 2_000
"""Each in-flight record is due this long after it is written (a lead's worth)."""
ON_TIME_MS = 50
"""A rate is kept up with while the lateness p99 stays under this."""
IDLE_PENDING = 1_000
"""Schedules pending, none due, while the committer's idle CPU is read."""
IDLE_DUE_AFTER_MS = 600_000
"""They are due this long after they are written: after the bench ends."""
IDLE_FIRST_OFFSET = 10_000_000
"""Their (made-up) source offsets start here, apart from the steps' ones."""
IDLE_SETTLE_S = 5
"""Time to read them before the idle reading starts."""
IDLE_S = 20
"""How long the idle CPU is read."""


def committer_args(env: BenchEnv, name: str) -> list[str]:
    """``delayline committer`` flags of the bench's pipeline, for the committer ``name``."""
    return [
        "--schedules-topic", env.schedules_topic,
        "--dead-letter-topic", f"bench-{env.run}-dlq",
        "--history-topic", "",
        "--commits-topic", f"bench-{env.run}-commits",
        "--query-name", f"bench-{env.run}",
        "--name", name,
        "--inflight-partitions", str(env.inflight_partitions),
    ]  # fmt: skip


def start_committers(env: BenchEnv, count: int) -> None:
    """Start ``count`` more committers beside the pipeline (``c1``, ``c2``...) and wait
    until the group has given each its partitions."""
    for n in range(1, count + 1):
        name = f"c{n}"
        process = PipelineProcess(
            env.bootstrap,
            committer_args(env, name),
            env.work_dir / f"committer-{name}.log",
            command="committer",
        )
        process.start()
        process.wait_ready(60, f"committer {name} ready")
        assert process.proc is not None
        env.committers.append((process, GroupSampler(process.proc.pid).start()))
    txn = transactional_id(f"bench-{env.run}")
    deadline = time.monotonic() + 60
    while len([p for p in committers_owning(env.bootstrap, txn).values() if p]) <= count:
        if time.monotonic() > deadline:
            progress("committers: the group did not give every committer partitions in 60 s")
            return
        time.sleep(0.5)


def ceiling(env: BenchEnv, quick: bool) -> dict[str, Any]:
    """One committer (a ``delayline committer``, no pipeline) offered each of
    :data:`CEILING_RATES` for :data:`STEP_S` s, in-flight records written
    :data:`DUE_AFTER_MS` before due: its lateness and CPU at each rate; then the broker's
    limit for the same writes (deliveries and tombstones in transactions of 2,000)."""
    inflight = inflight_topic(f"bench-{env.run}")
    ensure_inflight_topic(env.bootstrap, inflight, env.inflight_partitions)
    process = PipelineProcess(
        env.bootstrap,
        committer_args(env, "ceiling"),
        env.work_dir / "committer-ceiling.log",
        command="committer",
    )
    process.start()
    steps = []
    try:
        process.wait_ready(60, "committer ceiling ready")
        assert process.proc is not None
        sampler = GroupSampler(process.proc.pid).start()
        producer = writer(env.bootstrap)
        try:
            for rate in CEILING_RATES[: 2 if quick else None]:
                steps.append(_step(env, producer, inflight, rate, sampler, process.proc.pid))
                progress(f"committer ceiling: {steps[-1]}")
            idle = _idle(env, producer, inflight, process.proc.pid)
            progress(f"committer idle: {idle}")
        finally:
            sampler.stop()
    finally:
        process.terminate()
    kept = [s["offered_per_s"] for s in steps if s["lateness_ms"]["p99"] <= ON_TIME_MS]
    return {
        "steps": steps,
        "idle": idle,
        "on_time_per_s": max(kept, default=0),
        "on_time_ms": ON_TIME_MS,
        "broker_transactional_per_s": _broker_limit(env, 20_000 if quick else 100_000),
    }


def writer(bootstrap: str) -> Producer:
    """A transactional producer of hand-overs (its transactions initialised)."""
    producer = Producer(
        kafka_client_config(
            bootstrap, **{"transactional.id": f"bench-handover-{time.time_ns()}", "linger.ms": 5}
        )
    )
    producer.init_transactions(30)
    return producer


def _step(
    env: BenchEnv, producer: Producer, inflight: str, rate: int, sampler: GroupSampler, pid: int
) -> dict[str, Any]:
    """Hand over ``rate`` schedules a second for :data:`STEP_S` s, 50 ms of them a
    transaction, each due :data:`DUE_AFTER_MS` after it is written; wait for every
    delivery. ``cpu_pct`` is the committer's over the writing; ``steady`` over its last
    ``STEP_S - DUE_AFTER_MS``, when the committer reads and delivers at the rate both
    (split by thread kind: the interpreter's, librdkafka's, any that exited), and per
    delivery over that time."""
    due: dict[str, int] = {}
    total = rate * STEP_S
    chunk = max(rate // 20, 10)
    steady_from = float("inf")
    threads_before: dict[str, float] = {}
    with DeliveryCollector(env.bootstrap, [env.target_topic]) as seen:
        began = time.time()
        for start in range(0, total, chunk):
            pace(began, start, rate)
            if not threads_before and time.time() >= began + DUE_AFTER_MS / 1000:
                steady_from, threads_before = time.time(), cpu_by_thread_kind(pid)
            ids = [f"r{rate}-{i}" for i in range(start, min(start + chunk, total))]
            due.update(hand_over(producer, env, inflight, ids, DUE_AFTER_MS, start))
        ended = time.time()
        threads = cpu_by_thread_kind(pid)
        deliveries = seen.wait_for(all_of(due), timeout_s=120 + total / 500)
        cpu = sampler.cpu_percent(began, ended)
    lateness = [d.arrival_ms - due[d.schedule_id or ""] for d in deliveries if d.schedule_id in due]
    return {
        "offered_per_s": rate,
        "written_per_s": round(total / (ended - began)),
        "delivered": len({d.schedule_id for d in deliveries if d.schedule_id in due}),
        "lateness_ms": summary(lateness),
        "cpu_pct": None if cpu is None else round(cpu, 1),
        "steady": _steady(threads_before, threads, ended - steady_from, rate),
    }


def _idle(env: BenchEnv, producer: Producer, inflight: str, pid: int) -> dict[str, Any] | None:
    """The committer's CPU with :data:`IDLE_PENDING` schedules pending and none due for
    :data:`IDLE_S` s (read once it has had :data:`IDLE_SETTLE_S` s to read them): % of a
    core in all and by thread kind. ``None`` if a reading is missing."""
    ids = [f"idle-{i}" for i in range(IDLE_PENDING)]
    hand_over(producer, env, inflight, ids, IDLE_DUE_AFTER_MS, IDLE_FIRST_OFFSET)
    time.sleep(IDLE_SETTLE_S)
    before, began = cpu_by_thread_kind(pid), time.monotonic()
    time.sleep(IDLE_S)
    split = _cpu_split(before, cpu_by_thread_kind(pid), time.monotonic() - began, digits=2)
    return None if split is None else {"pending": IDLE_PENDING, **split}


def hand_over(
    producer: Producer,
    env: BenchEnv,
    inflight: str,
    ids: Sequence[str],
    due_after_ms: int,
    first_offset: int,
) -> dict[str, int]:
    """Hand ``ids`` over in one transaction, as the pipeline's fire stage would: each a
    schedule to the bench's target topic due ``due_after_ms`` from now (100-byte payload,
    no key), read from the schedules topic's partition 0 at offsets from
    ``first_offset`` on. Returns each one's due time."""
    now_ms = time.time_ns() // 1_000_000
    due: dict[str, int] = {}
    producer.begin_transaction()
    for offset, sid in enumerate(ids, first_offset):
        due[sid] = now_ms + due_after_ms
        source = SourceRef(env.schedules_topic, 0, offset, now_ms)
        schedule = Schedule(sid, due[sid], env.target_topic, None, b"x" * 100, (), source)
        record = render_inflight(schedule, inflight, partitions=env.inflight_partitions)
        produce(producer, record, None)
    producer.commit_transaction(30)
    return due


def _steady(
    before: dict[str, float], after: dict[str, float], span_s: float, rate: int
) -> dict[str, Any] | None:
    """The committer's CPU between two :func:`cpu_by_thread_kind` readings ``span_s``
    apart while it read and delivered ``rate`` a second: % of a core in all and by
    thread kind, and microseconds per delivery. ``None`` if a reading is missing."""
    split = _cpu_split(before, after, span_s, digits=1)
    if split is None:
        return None
    cpu_s = split.pop("cpu_s")
    return {**split, "cpu_us_per_delivery": round(cpu_s * 1e6 / (span_s * rate), 1)}


def _cpu_split(
    before: dict[str, float], after: dict[str, float], span_s: float, digits: int
) -> dict[str, Any] | None:
    """The CPU used between two :func:`cpu_by_thread_kind` readings ``span_s`` apart:
    ``cpu_s``, and % of a core in all and by thread kind (rounded to ``digits``).
    ``None`` if a reading is missing."""
    if not before or not after or span_s <= 0:
        return None
    used = {kind: max(0.0, after[kind] - before[kind]) for kind in after}
    cpu_s = sum(used.values())
    return {
        "seconds": round(span_s, 1),
        "cpu_s": cpu_s,
        "cpu_pct": round(100 * cpu_s / span_s, digits),
        "cpu_pct_by_thread": {kind: round(100 * s / span_s, digits) for kind, s in used.items()},
    }


def _broker_limit(env: BenchEnv, count: int) -> int:
    """Deliveries a second the broker takes as the committer writes them (a delivery and
    an in-flight tombstone each, transactions of 2,000), one producer, no waiting."""
    producer = writer(env.bootstrap)
    inflight = inflight_topic(f"bench-{env.run}")
    began = time.perf_counter()
    for start in range(0, count, 2_000):
        producer.begin_transaction()
        for i in range(start, min(start + 2_000, count)):
            key = f"limit-{i}".encode()
            produce(producer, OutgoingRecord(env.target_topic, key, b"x" * 100), None)
            tombstone = OutgoingRecord(inflight, key, None, (), i % env.inflight_partitions)
            produce(producer, tombstone, None)
        producer.commit_transaction(60)
    return round(count / (time.perf_counter() - began))


def pace(began: float, sent: int, rate: int) -> None:
    """Sleep until ``sent`` records at ``rate`` a second from ``began`` are due out."""
    ahead = began + sent / rate - time.time()
    if ahead > 0:
        time.sleep(ahead)


def all_of(due: Mapping[str, int]) -> Callable[[list[Delivery]], bool]:
    """A :meth:`DeliveryCollector.wait_for` condition: every id of ``due`` delivered."""
    return lambda seen: len({d.schedule_id for d in seen if d.schedule_id in due}) >= len(due)


def ceiling_table(figures: dict[str, Any]) -> str:
    """The ceiling's steps as a text table."""
    lines = [
        "offered/s  written/s  delivered  p50 ms  p99 ms  max ms  committer CPU %"
        "  steady CPU % (python / librdkafka)  us a delivery"
    ]
    for step in figures["steps"]:
        late, steady = step["lateness_ms"], step.get("steady") or {}
        threads = steady.get("cpu_pct_by_thread", {})
        lines.append(
            f"{step['offered_per_s']:>9,}  {step['written_per_s']:>9,}  {step['delivered']:>9,}"
            f"  {late['p50']:>6}  {late['p99']:>6}  {late['max']:>6}  {step['cpu_pct']!s:>15}"
            f"  {steady.get('cpu_pct')!s:>12} ({threads.get('python')} / "
            f"{threads.get('librdkafka')})  {steady.get('cpu_us_per_delivery')}"
        )
    lines.append(
        f"on time (p99 <= {figures['on_time_ms']} ms) up to {figures['on_time_per_s']:,}/s; "
        f"the broker took the same writes at {figures['broker_transactional_per_s']:,}/s"
    )
    idle = figures.get("idle")
    if idle:
        threads = idle["cpu_pct_by_thread"]
        lines.append(
            f"idle, {idle['pending']:,} pending and none due: {idle['cpu_pct']}% of a core "
            f"over {idle['seconds']} s (python {threads.get('python')}, librdkafka "
            f"{threads.get('librdkafka')})"
        )
    return "\n".join(lines)
