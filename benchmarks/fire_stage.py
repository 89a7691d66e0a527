"""The fire stage's Python per schedule, outside Spark and Kafka.

One partition's events of a busy batch (schedules raised a lead before their due time,
three headers each) go through the fire task's two paths: column-wise
(``split_events`` then ``fire_rows`` with the hand-over) and row by row (every event a
dict, as before the hand-over was rendered column-wise). Each path's records are then
queued into a producer with no broker. Prints process CPU in microseconds per schedule.

    .venv/bin/python benchmarks/fire_stage.py [--schedules 50000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer

from delayline.contract import OutgoingRecord
from delayline.contract import events as r
from delayline.contract.topology import Topology
from delayline.core.clock import ManualClock
from delayline.core.model import Schedule, SourceRef
from delayline.fire.firing import Firing
from delayline.fire.partition import fire_rows
from delayline.fire.tasks import split_events
from delayline.fire.transactional import Committed, FireConfig, TransactionalFirer
from delayline.kafka.produce import produce
from delayline.pipeline.config import PipelineConfig

NOW_MS = 1_800_000_000_000
ARROW = {"StringType()": pa.string(), "IntegerType()": pa.int32(),
         "LongType()": pa.int64(), "BinaryType()": pa.binary()}  # fmt: skip


class Kept(TransactionalFirer):
    """Keeps a batch's records instead of writing them."""

    def __init__(self) -> None:  # no producer, no cluster
        self.config = FireConfig("kafka:9092", "commits", "tx")
        self.records: list[OutgoingRecord | Firing] = []

    def commit_batch(
        self,
        run: str,
        batch_id: int,
        records: Sequence[OutgoingRecord | Firing],
        *,
        refresh: bool = False,
        also: str | None = None,
    ) -> Committed:
        self.records = list(records)
        return Committed(replay=False)


def events(count: int) -> pa.Table:
    rows = []
    for i in range(count):
        due = NOW_MS + 5_000 + i
        headers = (("scheduler-epoch", f"{due // 1000}.{due % 1000:03d}".encode()),
                   ("scheduler-target-topic", b"orders"), ("trace", b"%016x" % i))  # fmt: skip
        source = SourceRef("schedules", i % 3, i, NOW_MS)
        key = b"customer-%d" % (i % 997)
        schedule = Schedule(f"order-{i}", due, "orders", key, b"x" * 100, headers, source)
        rows.append(r.schedule_event(r.Kind.RAISE, schedule, NOW_MS).asDict())
    schema = pa.schema([(f.name, ARROW[repr(f.dataType)]) for f in r.EVENT_SCHEMA.fields])
    return pa.Table.from_pylist(rows, schema=schema)


def column_wise(table: pa.Table, config: PipelineConfig) -> list[Any]:
    split = split_events(table, config, 7)
    firer = Kept()
    clock = ManualClock(NOW_MS)
    fire_rows(split.rows, 0, 7, "run", config, firer, clock, handover=split.handover)
    return firer.records


def row_by_row(table: pa.Table, config: PipelineConfig) -> list[Any]:
    firer = Kept()
    fire_rows(table.to_pylist(), 0, 7, "run", config, firer, ManualClock(NOW_MS))
    return firer.records


def queued(records: list[Any]) -> None:
    nowhere = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0, "linger.ms": 100_000}
    producer = Producer({**nowhere, "queue.buffering.max.messages": 10_000_000})
    for record in records:
        produce(producer, record, None)
    producer.purge()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    table = events(args.schedules)
    config = PipelineConfig(Topology(history_topic=None), lead_ms=5_000)
    for path in (column_wise, row_by_row):
        for run in range(args.repeat):
            start = time.process_time()
            records = path(table, config)
            rendered = time.process_time()
            queued(records)
            done = time.process_time()
            per = 1e6 / args.schedules
            print(f"{path.__name__:>11} run {run + 1}: rendering {(rendered - start) * per:5.1f} "
                  f"us a schedule, produce {(done - rendered) * per:4.1f}, "
                  f"{len(records) / args.schedules:.0f} records each", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
