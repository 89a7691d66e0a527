"""The Redis hold's micro-batches through local Spark and a real Redis: which records a
task gets, and so which task record and fire marker it uses, follows the records, not
the order Spark lists the source's partitions in (a replay after a restart may list
them in another)."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from delayline.contract import ConsumedRecord
from delayline.contract import events as r
from delayline.contract import headers as h
from delayline.contract.topology import Topology
from delayline.core.clock import SystemClock
from delayline.fire.tasks import deliver_as
from delayline.holds.redis.config import RedisHoldConfig
from delayline.holds.redis.hold import RedisHold
from delayline.pipeline.config import PipelineConfig

TOPIC = "delayline-schedules"
CLAIMERS = 2


def schedules(partition: int, count: int, now_ms: int) -> list[ConsumedRecord]:
    """``count`` schedules of one source partition: every third due already (fired in
    the batch), the others a minute ahead (planned)."""
    out = []
    for offset in range(count):
        due = now_ms - 1_000 if offset % 3 == 0 else now_ms + 60_000
        headers = ((h.EPOCH, f"{due / 1000:.3f}".encode()), (h.TARGET_TOPIC, b"target"))
        key = f"p{partition}-{offset}".encode()
        out.append(ConsumedRecord(TOPIC, partition, offset, now_ms, key, b"v", headers))
    return out


def frame(spark: Any, records: list[ConsumedRecord]) -> Any:
    """``records`` as one Spark partition of an RDD: like the Kafka source's batch in
    ``foreachBatch``, nothing the optimizer can see through."""
    rdd = spark.sparkContext.parallelize([r.source_row(x) for x in records], 1)
    return spark.createDataFrame(rdd, r.SOURCE_SCHEMA)


def events_by_partition(hold: RedisHold, batch: Any, batch_id: int) -> dict[int, Counter[Any]]:
    """The events of each Spark partition of ``batch`` (one evaluation, as the fire
    stage makes), and a row per partition even when it has no events."""
    import pyarrow as pa  # noqa: PLC0415

    def tag(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext  # noqa: PLC0415

        context = TaskContext.get()
        partition = -1 if context is None else context.partitionId()
        rows = [e for b in batches for e in b.to_pylist()]
        events = [
            json.dumps([e["kind"], e["id"], e["src_partition"], e["src_offset"]]) for e in rows
        ]
        yield pa.RecordBatch.from_pylist([{"p": partition, "events": events}])

    collected = hold.batch_events(batch, batch_id).mapInArrow(tag, "p BIGINT, events ARRAY<STRING>")
    return {row["p"]: Counter(row["events"]) for row in collected.collect()}


@pytest.fixture
def config(redis_url: str, tmp_path: Path) -> PipelineConfig:
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    # The run id is the query id Spark keeps in the checkpoint's metadata.
    (checkpoint / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
    return PipelineConfig(
        topology=Topology(schedules_topics=(TOPIC,)),
        checkpoint_dir=checkpoint,
        hold="redis",
        shuffle_partitions=CLAIMERS,
        query_name=f"batches-{uuid.uuid4().hex[:6]}",
        hold_settings=RedisHoldConfig(url=redis_url, prefix=f"batches-{uuid.uuid4().hex[:6]}"),
    )


def test_a_replay_with_the_source_partitions_in_another_order_gets_the_same_events(
    spark: Any, config: PipelineConfig
) -> None:
    """Batch 3 of a run, then the same batch after a restart with the source's two
    partitions listed the other way round: no mismatch with the task records, and each
    partition has exactly the events it had (so its fire marker covers them)."""
    now = SystemClock().now_ms()
    a, b = frame(spark, schedules(0, 30, now)), frame(spark, schedules(1, 30, now))
    first = RedisHold(config, deliver_as)
    try:
        decided = events_by_partition(first, a.union(b), 3)
    finally:
        first.close()
    again = RedisHold(config, deliver_as)  # the restarted pipeline: same checkpoint, same run
    try:
        replayed = events_by_partition(again, b.union(a), 3)
    finally:
        again.close()
    assert replayed == decided
    assert sorted(decided) == list(range(CLAIMERS))  # one task per claimer, no more
    assert all(decided.values()), "each task got some of the records"
    kinds = Counter(json.loads(e)[0] for events in decided.values() for e in events.elements())
    assert kinds == {"missed": 20, "fire": 20, "planned": 40}  # missed: due on arrival


def test_a_batch_without_records_still_claims_in_every_task(
    spark: Any, config: PipelineConfig
) -> None:
    """A batch woken only by the waker has no records: it still runs one task per
    claimer, and they hand over what fell due."""
    config = dataclasses.replace(config, lead_ms=0)
    now = SystemClock().now_ms()
    due = [
        ConsumedRecord(
            TOPIC,
            0,
            offset,
            now,
            f"soon-{offset}".encode(),
            b"v",
            ((h.EPOCH, f"{(now + 3_000) / 1000:.3f}".encode()), (h.TARGET_TOPIC, b"target")),
        )
        for offset in range(10)
    ]
    hold = RedisHold(config, deliver_as)
    try:
        planned = events_by_partition(hold, frame(spark, due), 1)
        kinds = [json.loads(e)[:2] for e in sum(planned.values(), Counter()).elements()]
        assert sorted(kinds) == sorted(["planned", x.key.decode()] for x in due if x.key)
        time.sleep(max(0.0, (now + 3_100 - SystemClock().now_ms()) / 1000))  # due now
        empty = spark.createDataFrame(spark.sparkContext.emptyRDD(), r.SOURCE_SCHEMA)
        claimed = events_by_partition(hold, empty, 2)
    finally:
        hold.close()
    assert sorted(claimed) == list(range(CLAIMERS))
    fired = [json.loads(e)[:2] for e in sum(claimed.values(), Counter()).elements()]
    assert sorted(fired) == sorted(["fire", x.key.decode()] for x in due if x.key)
