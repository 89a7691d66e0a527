"""How fast can PySpark's transformWithState take schedules in, by state layout?

Measures ingest alone (no fire stage, schedules due an hour later) for three
layouts of the hold, each reading the same N schedules from a fresh topic of a
private broker with a fresh checkpoint:

* ``per-id`` : delayline's hold as the pipeline builds it (``hold_for(config).stage``),
  one grouping key per schedule id: value state plus one timer.
* ``shard-map``: one key per (topic, hash(id) mod S); a map state id -> schedule
  (one read and one write per schedule, what an id index for cancels and updates
  costs) and a map state slot -> ids with one timer per due second.
* ``slot-list``: one key per (topic, due second, hash(id) mod S); the schedules of
  a key appended to a list state in one call per micro-batch. No id index, so
  cancels and updates could not find what they replace: an upper bound, not a
  design.

Run: ``.venv/bin/python benchmarks/state_layouts.py [--schedules 200000]``. Prints
schedules/s per micro-batch and overall for each layout. Results measured on the
project's 2-core machine are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from delayline.contract import OutgoingRecord, parse_record
from delayline.contract import events as r
from delayline.contract import headers as h
from delayline.contract.topology import Topology
from delayline.core.model import Schedule
from delayline.holds.hold import hold_for
from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.infra.ports import free_port
from delayline.kafka.config import kafka_client_config
from delayline.kafka.produce import produce
from delayline.kafka.topics import create_topic
from delayline.pipeline.config import PipelineConfig
from delayline.pipeline.session import build_session
from delayline.pipeline.source import read_schedules

SLOT_MS = 1_000
SHARDS = 8
BATCH = 50_000
OUT = StructType([StructField("kind", StringType()), StructField("n", LongType())])
ID_KEY = StructType([StructField("id", StringType())])
SLOT_KEY = StructType([StructField("slot", LongType())])
SLOT_IDS = StructType([StructField("ids", ArrayType(StringType()))])


def schedules_in(rows: Iterator[Any]) -> Iterator[Schedule]:
    for row in rows:
        parsed = parse_record(r.input_to_record(row))
        if isinstance(parsed, Schedule):
            yield parsed


class ShardMap(StatefulProcessor):
    """Key (topic, shard): map id -> schedule, map slot -> ids, a timer per slot."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.pending = handle.getMapState("pending", ID_KEY, r.STATE_SCHEMA)
        self.slots = handle.getMapState("slots", SLOT_KEY, SLOT_IDS)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Row]:
        added: dict[int, list[str]] = {}
        for schedule in schedules_in(rows):
            self.pending.getValue((schedule.id,))  # what an update or cancel must look up
            self.pending.updateValue((schedule.id,), r.schedule_to_state(schedule))
            slot = -(-schedule.due_ms // SLOT_MS) * SLOT_MS
            added.setdefault(slot, []).append(schedule.id)
        for slot, ids in added.items():
            held = self.slots.getValue((slot,))
            self.slots.updateValue((slot,), ([*(held[0] if held else ()), *ids],))
            if held is None:
                self.handle.registerTimer(slot)
        yield Row(kind="in", n=sum(len(ids) for ids in added.values()))

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        return iter(())

    def close(self) -> None:
        pass


class SlotList(StatefulProcessor):
    """Key (topic, slot, shard): the schedules appended to one list, one timer."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.held = handle.getListState("held", r.STATE_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Row]:
        states = [r.schedule_to_state(s) for s in schedules_in(rows)]
        self.held.appendList(states)
        self.handle.registerTimer(int(key[1]) + SLOT_MS)
        yield Row(kind="in", n=len(states))

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        return iter(())

    def close(self) -> None:
        pass


def layout(name: str, schedules: DataFrame, config: PipelineConfig) -> DataFrame:
    shard = F.abs(F.xxhash64("gkey")) % SHARDS
    if name == "per-id":
        return hold_for(config).stage(schedules)
    if name == "shard-map":
        return (
            schedules.withColumn("shard", shard)
            .groupBy("topic", "shard")
            .transformWithState(ShardMap(), OUT, "Append", "ProcessingTime")
        )
    epoch = F.expr(
        "cast(cast(decode(filter(headers, h -> h.key = 'scheduler-epoch')[0].value, 'UTF-8')"
        " as double) * 1000 as bigint)"
    )
    return (
        schedules.withColumn("slot", F.floor(epoch / SLOT_MS) * SLOT_MS)
        .withColumn("shard", shard)
        .groupBy("topic", "slot", "shard")
        .transformWithState(SlotList(), OUT, "Append", "ProcessingTime")
    )


def fill(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer(kafka_client_config(bootstrap, **{"linger.ms": 20}))
    due_ms = int(time.time() * 1000) + 3_600_000
    for i in range(count):
        headers = (
            (h.EPOCH, h.format_epoch(due_ms + i % 20_000).encode()),
            (h.TARGET_TOPIC, b"target"),
            (h.TARGET_KEY, b"k"),
        )
        record = OutgoingRecord(topic, f"id-{i:09d}".encode(), b"x" * 100, headers)
        produce(producer, record, on_delivery=None)
    producer.flush()


def measure(spark: SparkSession, name: str, config: PipelineConfig, count: int) -> float:
    events = layout(name, read_schedules(spark, config), config)
    started = time.monotonic()
    query = (
        events.writeStream.format("noop")
        .option("checkpointLocation", str(config.checkpoint_dir))
        .trigger(processingTime="0 seconds")
        .start()
    )
    topic = config.topology.schedules_topics[0]
    while True:
        time.sleep(0.5)
        if not query.isActive:
            raise RuntimeError(f"{name}: the query stopped: {query.exception()}")
        progress = query.lastProgress
        if progress and progress["numInputRows"] == 0:
            end = json.loads(progress["sources"][0]["endOffset"])[topic]
            if sum(int(v) for v in end.values()) >= count:
                break
    elapsed = time.monotonic() - started
    for p in query.recentProgress:
        if p["numInputRows"]:
            print(f"  {name}: batch {p['batchId']}: {p['numInputRows']} schedules, "
                  f"{p['processedRowsPerSecond']:,.0f}/s")  # fmt: skip
    query.stop()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=200_000)
    parser.add_argument("--layouts", default="per-id,shard-map,slot-list")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="delayline-layouts-"))
    broker = LocalBroker(BrokerConfig(data_dir=root / "broker", port=free_port(),
                                      controller_port=free_port(), heap_mb=1024))  # fmt: skip
    broker.start()
    try:
        bootstrap = broker.config.bootstrap_servers
        topic = create_topic(bootstrap, "layouts", partitions=4,
                             config={"cleanup.policy": "compact"})  # fmt: skip
        fill(bootstrap, topic, args.schedules)
        results = {}
        for name in args.layouts.split(","):
            config = PipelineConfig(
                topology=Topology(bootstrap, (topic,)), wake=False,
                max_offsets_per_trigger=BATCH, checkpoint_dir=root / f"checkpoint-{name}",
            )  # fmt: skip
            spark = build_session(config)
            try:
                results[name] = measure(spark, name, config, args.schedules)
            finally:
                spark.stop()
        print(f"\n{args.schedules:,} schedules, {SHARDS} shards, batches of {BATCH:,}:")
        for name, elapsed in results.items():
            print(f"  {name:10} {args.schedules / elapsed:8,.0f} schedules/s ({elapsed:.1f} s)")
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
