"""What the committer's watch costs per input record it reads: CPU, no Kafka.

The watch (:class:`delayline.committer.watch.InputWatch`) reads every record of the input
topics: each schedule written, and delayline's own tombstone after each delivery, so
two records a schedule. This makes ``--records`` schedules (header contract, UUID ids,
four headers, a 100-byte payload) and as many of delayline's own tombstones (marked as
a hand-over marks them), as
confluent-kafka messages like those its consumer returns, and times
:meth:`InputWatch.take_batch` over them in the batches :meth:`InputWatch.poll` takes: the
schedules alone, the tombstones alone, then both interleaved as they arrive.

    .venv/bin/python benchmarks/watch_cpu.py [--records 50000] [--runs 5] [--json F]

What it leaves out: the consumer's own fetch and decode (librdkafka, C), the same for
every reader of the topics.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Message

from delayline.committer.watch import BATCH, InputWatch
from delayline.contract import headers as h
from delayline.contract.contracts import InputParser
from delayline.contract.topology import Topology

TOPIC = "schedules"
PARTITIONS = 12
MARK = b"0123456789abcdef"
"""The mark of the start whose hand-over wrote the tombstones: the watch looks whether
the hold must read each after all (:mod:`delayline.committer.reviews`)."""


def messages(records: int, now_ms: int) -> tuple[list[Message], list[Message]]:
    """``records`` schedules due a minute on, and delayline's tombstone of each."""
    schedules, tombstones = [], []
    for i in range(records):
        key = str(uuid.uuid4()).encode()
        partition, offset = i % PARTITIONS, 2 * (i // PARTITIONS)
        headers: list[tuple[str, str | bytes | None]] = [
            (h.EPOCH, f"{(now_ms + 60_000 + i) / 1000:.3f}".encode()),
            (h.TARGET_TOPIC, b"orders"),
            (h.TARGET_KEY, b"order-%d" % i),
            ("trace-id", b"%032x" % i),
        ]
        schedules.append(
            Message(topic=TOPIC, partition=partition, offset=offset, key=key,
                    value=b"x" * 100, headers=headers, timestamp=(1, now_ms))
        )  # fmt: skip
        tombstones.append(
            Message(topic=TOPIC, partition=partition, offset=offset + 1, key=key, value=None,
                    headers=[(h.FIRED_OFFSET, str(offset).encode()), (h.PLAN, MARK)],
                    timestamp=(1, now_ms))
        )  # fmt: skip
    return schedules, tombstones


def timed(msgs: list[Message], now_ms: int) -> float:
    """CPU microseconds per record (this thread's: not the clients' own) for a fresh
    watch to take ``msgs``."""
    watch = InputWatch("127.0.0.1:9", InputParser(Topology(bootstrap_servers="127.0.0.1:9")),
                       lambda: now_ms)  # fmt: skip
    watch.close()  # its consumer is not used: the records are handed to it
    gc.collect()  # what the runs before left is not this run's to collect
    start = time.thread_time()
    for i in range(0, len(msgs), BATCH):
        watch.take_batch(msgs[i : i + BATCH], now_ms)
    spent = time.thread_time() - start
    assert watch.read == len(msgs), "every record was read"
    return spent * 1e6 / len(msgs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000, help="schedules (and tombstones)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each case")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    now_ms = int(time.time() * 1000)
    schedules, tombstones = messages(args.records, now_ms)
    both = [m for pair in zip(schedules, tombstones, strict=True) for m in pair]
    figures: dict[str, Any] = {"records": args.records, "runs": args.runs}
    for name, msgs in (("schedule", schedules), ("own tombstone", tombstones), ("both", both)):
        runs = [timed(msgs, now_ms) for _ in range(args.runs)]
        figures[name] = {
            "best_us": round(min(runs), 2),
            "median_us": round(statistics.median(runs), 2),
        }
        print(f"{name:>13}: {min(runs):5.2f} us a record (best of {args.runs}), "
              f"median {statistics.median(runs):5.2f}")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps({"figures": figures}, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
