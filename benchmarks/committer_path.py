"""What the committer's Python costs per delivery, no broker: reading, taking, writing.

Makes ``--records`` in-flight records as the fire stage writes them (a 100-byte
payload, no headers, four in-flight partitions, due 8 a millisecond) as confluent-kafka
messages, and times on this thread, best of ``--runs``:

* reading: :meth:`InflightReader._read` over them, 500 a batch (decoding each in-flight
  header, the due plan's :meth:`DuePlan.add`);
* taking: :meth:`DuePlan.take` of groups of 40 (a 5 ms group at 8,000 a second);
* writing: :meth:`GroupWriter._write` of each group through a
  :class:`TransactionalFirer` whose producer queues into a librdkafka client with no
  broker (its ``produce`` calls are real; begin, flush and commit do nothing).

    .venv/bin/python benchmarks/committer_path.py [--records 20000] [--runs 7] [--json F]

What it leaves out: the consumer's fetch and decode, reading the committer's own
in-flight tombstones back, the transaction's round trips, the watch's read barrier,
librdkafka's threads, and the hand-offs between the committer's threads; `delayline
bench --scenario committer` measures all of it.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import statistics
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Message, Producer

from delayline.committer.broker_clock import BrokerOffset, BrokerTime
from delayline.committer.config import CommitterConfig
from delayline.committer.due_plan import DuePlan
from delayline.committer.inflight_reader import InflightReader
from delayline.committer.pacing import Pacer
from delayline.committer.pending import Pending
from delayline.committer.read_progress import ReadProgress
from delayline.committer.turns import Rearmed
from delayline.committer.writing import GroupWriter
from delayline.core.clock import SystemClock
from delayline.core.model import Schedule, SourceRef
from delayline.fire.inflight import render_inflight
from delayline.fire.producer import FireProducer
from delayline.fire.refusals import TopicFacts
from delayline.fire.topic_catalog import TopicCatalog
from delayline.fire.transactional import FireConfig, TransactionalFirer
from delayline.fire.write_attempt import Placed

PARTITIONS = 4
GROUP = 40
READ_BATCH = 500
PARTS = ("reading", "taking", "writing", "all")


def messages(records: int, now_ms: int) -> list[Message]:
    """``records`` in-flight records of schedules due 2 s after ``now_ms`` onwards."""
    out = []
    for i in range(records):
        source = SourceRef("bench-schedules", 0, i, now_ms)
        schedule = Schedule(
            f"r8000-{i}", now_ms + 2_000 + i // 8, "bench-target", None, b"x" * 100, (), source
        )
        r = render_inflight(schedule, "inflight", 7, partitions=PARTITIONS)
        out.append(
            Message(topic="inflight", partition=r.partition, offset=i, key=r.key,
                    value=r.value, headers=list(r.headers), timestamp=(1, now_ms))
        )  # fmt: skip
    return out


class QueueOnly:
    """A transactional producer's calls, queued into a client with no broker."""

    def __init__(self) -> None:
        self.client = Producer(
            {"bootstrap.servers": "127.0.0.1:9", "log_level": 0,
             "queue.buffering.max.messages": 10_000_000}
        )  # fmt: skip

    def produce(self, *args: Any, **kwargs: Any) -> None:
        self.client.produce(*args, **kwargs)

    def begin_transaction(self) -> None:
        pass

    def flush(self, _timeout: float = 0) -> int:
        return 0

    def commit_transaction(self, _timeout: float = 0) -> None:
        pass

    def poll(self, _timeout: float = 0) -> int:
        return 0


class NothingWithheld:
    """The writer's view of the watch: nothing withheld, nothing to wait for."""

    def withheld(self, _pending: Pending) -> bool:
        return False

    def read_to_now(self) -> None:
        pass

    def check_rearms(self, _rearms: list[Rearmed], _placed: Placed) -> None:
        pass


def reader_of(plan: DuePlan) -> InflightReader:
    """An in-flight reader with no consumer: what :meth:`InflightReader._read` uses."""
    reader = object.__new__(InflightReader)
    reader.plan, reader.clock, reader.targets, reader._dropped = plan, SystemClock(), {}, 0
    reader._progress = ReadProgress("127.0.0.1:9", "inflight", plan)
    reader.owned = reader._progress.owned
    reader.owned.update(range(PARTITIONS))
    return reader


def firer() -> TransactionalFirer:
    """A transactional writer around :class:`QueueOnly`, every topic known and open."""
    facts = TopicFacts(max_message_bytes=1_000_000, compacted=False, log_append_time=False)
    out = object.__new__(TransactionalFirer)
    out.config = FireConfig("127.0.0.1:9", "commits", "bench")
    out._topics = TopicCatalog(lambda topics, _auth: dict.fromkeys(topics, facts))
    producer = object.__new__(FireProducer)
    producer.producer = QueueOnly()  # type: ignore[assignment]
    producer.fatal, producer.timeout_s = False, out.config.timeout_ms / 1000
    out._producer, out._committed = producer, {}
    return out


def run(msgs: list[Message], far_ms: int) -> dict[str, float]:
    """Microseconds of this thread's CPU per delivery, by part."""
    clock = SystemClock()
    pacer = Pacer()
    plan = DuePlan(pacer, None)
    reader = reader_of(plan)
    config = CommitterConfig("127.0.0.1:9", "inflight", "commits", "bench", "dlq")
    broker = BrokerTime("127.0.0.1:9", "probes", clock)
    broker.offset = BrokerOffset(0, 0)
    writer = GroupWriter(config, broker, pacer, NothingWithheld())  # type: ignore[arg-type]
    out = firer()
    gc.collect()
    marks = [time.thread_time()]
    for i in range(0, len(msgs), READ_BATCH):
        reader._read(msgs[i : i + READ_BATCH])
    marks.append(time.thread_time())
    groups = []
    for partition in range(PARTITIONS):
        while (group := plan.take(far_ms, 5, GROUP, partition, None)) is not None:
            groups.append(group)
    marks.append(time.thread_time())
    for group in groups:
        writer._write(group, False, out, _nothing, _nothing, _nothing)
    marks.append(time.thread_time())
    assert sum(len(g.items) for g in groups) == len(msgs), "every record was delivered"
    spent = [b - a for a, b in itertools.pairwise(marks)]
    return {
        part: us * 1e6 / len(msgs) for part, us in zip(PARTS, [*spent, sum(spent)], strict=True)
    }


def _nothing() -> None:
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    now_ms = time.time_ns() // 1_000_000 - 86_400_000  # a day ago: everything is due
    msgs = messages(args.records, now_ms)
    runs = [run(msgs, now_ms + 10**9) for _ in range(args.runs)]
    figures: dict[str, Any] = {"records": args.records, "runs": args.runs}
    for part in PARTS:
        values = [r[part] for r in runs]
        best, median = min(values), statistics.median(values)
        figures[part] = {"best_us": round(best, 2), "median_us": round(median, 2)}
        print(f"{part:8s} best {best:6.2f}  median {median:6.2f} us a delivery")
    if args.json:
        args.json.write_text(json.dumps({"figures": figures}, indent=2) + "\n")


if __name__ == "__main__":
    main()
