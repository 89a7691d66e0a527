"""Precise delivery in two committers: the pipeline's own and a `delayline committer`
beside it; SIGKILL the second mid-run and count."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import ms_to_datetime
from delayline.core.identifiers import committer_group, committer_name, transactional_id
from delayline.dev.harness import DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.fire.inflight import inflight_partition
from delayline.kafka.groups import group_members
from tests.support import ARTIFACTS, eventually, make_topics, pipeline_args

TOTAL = 5_000
PARTITIONS = 4
SESSION_TIMEOUT_MS = 6_000
"""Kafka's least: the killed committer's partitions move this long after its death."""
SPREAD_MS = 40_000
TAKE_OVER_MS = SESSION_TIMEOUT_MS + 5_000
"""The session timeout, then a rebalance, a fencing and a catch-up (1-2 s here)."""
TAKEN_P50_MARGIN_MS = 20
TAKEN_MAX_MARGIN_MS = 500
"""Once the survivor owns the dead committer's partitions it delivers them as on time as
its own partitions in the same window: lateness p50 within ``TAKEN_P50_MARGIN_MS`` of
theirs, the latest within ``TAKEN_MAX_MARGIN_MS``. Compared with its own partitions, not
with a fixed figure: with Spark busy on the same two cores both move with the machine
(p50 30-60 ms on some days; on 2026-11-30, when the raw broker was a third slower, 103
against 103 ms, then 171 against 159 ms with maxima 1,571 against 1,332 ms: the first
seconds after the fence catch up); the committer's precision is the bench's to measure."""
ON_TIME_MAX_MS = 1_000
FENCE_MS = 2_000
"""After the group assigns the dead committer's partitions: the fence of its producers
and the read of the partitions to their end (0.1-0.2 s here; about a second while
librdkafka waited 500 ms for each lane's fence)."""
CATCH_UP_MS = 2_500
"""From the take-over until the dead committer's backlog (about 400 deliveries due
while nobody owned its partitions) is delivered: the fence (0.07-0.12 s a partition),
the read to the end, the watch's re-read, the backlog; measured 68-222 ms here, more
under load where an early ask for a producer id runs out unanswered (1.2-1.3
s while librdkafka waited 500 ms for each lane's fence, 3.9-4.1 s while each partition
taken over read the input again whole). Until then what falls due waits behind it (due
first), in the survivor's own partitions too, so lateness is compared only from then
on: a fixed :data:`FENCE_MS` was too short on a slow day in CI (an item due 2 s after
the take-over delivered 2.2 s late, against the survivor's own worst 1.5 s)."""
HIDDEN_BEFORE_KILL_MS = 1_000
"""Deliveries written this long before the kill (their record timestamp: the write time,
never before the due time) may be hidden until the take-over too: the killed committer's
open transaction began before they were committed. By the write, not the due time: a
survivor running late writes one due earlier inside that span too (CI, this VM: due
1,093 ms before the kill, written 1.4 s late, hidden until the fence 6.4 s on)."""


@pytest.mark.long  # a minute and a half: `make test-long` (docs/testing.md)
def test_a_committer_killed_mid_run_leaves_its_partitions_to_the_other(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("target"), partitions=3)
    query = f"grp{int(time.time() * 1000)}"
    args = pipeline_args(topics, tmp_path / "checkpoint", "--query-name", query)
    pipeline = PipelineProcess(
        kafka_bootstrap,
        [*args, "--inflight-partitions", str(PARTITIONS)],
        ARTIFACTS / f"committers-{query}.log",
    )
    flags = dict(zip(args[::2], args[1::2], strict=False))
    second = PipelineProcess(
        kafka_bootstrap,
        [
            "--schedules-topic", topics.schedules,
            "--schedules-topic", topics.schedules_b,
            "--dead-letter-topic", flags["--dead-letter-topic"],
            "--history-topic", flags["--history-topic"],
            "--commits-topic", flags["--commits-topic"],
            "--query-name", query,
            "--inflight-partitions", str(PARTITIONS),
            "--name", "worker-1",
            "--session-timeout", f"{SESSION_TIMEOUT_MS}ms",
            "--metrics-port", "0",
        ],
        ARTIFACTS / f"committers-{query}-worker-1.log",
        command="committer",
    )  # fmt: skip
    txn = transactional_id(query)

    def owned() -> dict[str, list[int]]:
        return {
            committer_name(txn, m.instance_id): [p for _, p in m.partitions]
            for m in group_members(kafka_bootstrap, committer_group(txn), 10)
        }

    with pipeline, second, DeliveryCollector(kafka_bootstrap, [target]) as seen:
        pipeline.start()
        pipeline.wait_ready()
        second.start()
        second.wait_ready(60, "committer worker-1 ready")
        ready = f"{second.metrics_url()}/readyz"
        eventually(lambda: httpx.get(ready).json() == {"status": "ready"}, 10, "/readyz ready")
        deadline = time.monotonic() + 30
        while len(owned().get("worker-1", [])) != PARTITIONS // 2:
            assert time.monotonic() < deadline, f"not split: {owned()}"
            time.sleep(0.5)
        split = owned()
        # Far enough ahead that the batches reading them have ended before the first
        # is raised (a lead before its due time).
        first_due_ms = time.time_ns() // 1_000_000 + 15_000
        due: dict[str, int] = {}
        with Scheduler(
            ClientConfig(bootstrap_servers=kafka_bootstrap, schedules_topic=topics.schedules)
        ) as client:
            for i in range(TOTAL):
                at = ms_to_datetime(first_due_ms + i * SPREAD_MS // TOTAL)
                due[client.schedule(f"c-{i}", b"x", target, at=at).id] = int(at.timestamp() * 1000)
        seen.wait_for(lambda d: len(d) >= TOTAL // 4, timeout_s=120)
        second.kill()
        killed_ms = time.time_ns() // 1_000_000
        deadline = time.monotonic() + 30
        while len(owned().get("pipeline", [])) != PARTITIONS:
            assert time.monotonic() < deadline, f"no take-over: {owned()}"
            time.sleep(0.1)
        taken_ms = time.time_ns() // 1_000_000
        seen.wait_for(lambda d: len({x.schedule_id for x in d}) >= TOTAL, timeout_s=180)
        time.sleep(3)  # a duplicate would show up by now
        deliveries = seen.snapshot()
        after = owned()
        assert pipeline.terminate() == 0
    counts = Counter(d.schedule_id for d in deliveries)
    assert set(counts) == set(due), "lost"
    assert [sid for sid, n in counts.items() if n > 1] == [], "duplicated"
    assert not [d for d in deliveries if d.timestamp_ms < due[d.schedule_id or ""]], "early"
    assert not [d for d in deliveries if d.arrival_ms < due[d.schedule_id or ""]], "seen early"
    assert sorted(after.get("pipeline", [])) == list(range(PARTITIONS)), after

    def late(partitions: list[int], since_ms: int, until_ms: int | None = None) -> list[int]:
        return sorted(
            d.arrival_ms - due[d.schedule_id or ""]
            for d in deliveries
            if inflight_partition(d.schedule_id or "", PARTITIONS) in partitions
            and since_ms <= due[d.schedule_id or ""] <= (until_ms or due[d.schedule_id or ""])
        )

    def line(lateness: list[int]) -> str:
        n = len(lateness)
        return (
            f"{n} delivered, p50 {lateness[n // 2]} ms, p99 {lateness[n * 99 // 100]} ms, "
            f"max {lateness[-1]} ms"
        )

    # The survivor has caught up once it has delivered worker-1's backlog (all due
    # before the take-over): from then on both sets of partitions are compared.
    backlog = [
        d.arrival_ms
        for d in deliveries
        if inflight_partition(d.schedule_id or "", PARTITIONS) in split["worker-1"]
        and due[d.schedule_id or ""] < taken_ms
        and d.arrival_ms >= killed_ms
    ]  # due before the take-over, seen after the kill (hidden ones included)
    caught_up_ms = max(backlog)
    since_ms = max(caught_up_ms, taken_ms + FENCE_MS)
    before = late(split["pipeline"], 0, killed_ms - HIDDEN_BEFORE_KILL_MS)
    held = late(split["pipeline"], killed_ms - HIDDEN_BEFORE_KILL_MS, taken_ms)
    own_after = late(split["pipeline"], since_ms)
    taken = late(split["worker-1"], since_ms)
    print(
        f"\nkilled worker-1 {killed_ms - first_due_ms} ms into the deliveries, its partitions "
        f"taken over {taken_ms - killed_ms} ms later, their backlog ({len(backlog)} due "
        f"meanwhile) delivered {caught_up_ms - taken_ms} ms after that. The pipeline's own partitions: due over "
        f"a second before the kill {line(before)}; due from then until the take-over "
        f"{line(held)}; after the catch-up {line(own_after)}. worker-1's partitions after "
        f"it: {line(taken)}"
    )
    assert taken_ms - killed_ms < TAKE_OVER_MS
    assert caught_up_ms - taken_ms < CATCH_UP_MS
    assert taken, "nothing of worker-1's partitions fell due after the take-over"
    assert own_after, "nothing of the survivor's own partitions fell due after the take-over"
    assert taken[len(taken) // 2] <= own_after[len(own_after) // 2] + TAKEN_P50_MARGIN_MS
    # Nothing held up: the latest no later than the survivor's own latest (or a second).
    worst_ms = max(ON_TIME_MAX_MS, own_after[-1] + TAKEN_MAX_MARGIN_MS)
    assert taken[-1] < worst_ms
    # A committer killed inside a transaction (opened up to a write-ahead, 100 ms, before
    # it commits) hides later deliveries to the target partitions it wrote to until its
    # producers are fenced: at the take-over. What falls due from then until the backlog
    # is delivered waits behind it, in every partition (the backlog is due first).
    for d in deliveries:
        due_ms = due[d.schedule_id or ""]
        held_to = due_ms
        if killed_ms - HIDDEN_BEFORE_KILL_MS <= d.timestamp_ms:
            held_to = max(held_to, taken_ms + FENCE_MS)
        if killed_ms - HIDDEN_BEFORE_KILL_MS <= due_ms:
            held_to = max(held_to, caught_up_ms)
        assert d.arrival_ms - held_to < worst_ms, f"{d.schedule_id}: held up"
