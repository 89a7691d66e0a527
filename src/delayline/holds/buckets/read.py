"""Reading ready copies on the executors, as the gate's input rows (Arrow batches).

One Spark task reads several bucket partitions with one consumer: a batch often has a
few copies in each of many buckets, and a task per bucket partition paid a consumer
and a Python worker round each. A range usually ends with a transaction marker, which
is never delivered: the consumer's position tells when it is passed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import TopicPartition
from pyspark.sql.datasource import InputPartition

from delayline.errors import KafkaUnavailableError
from delayline.holds.buckets.copy import decode_copy
from delayline.kafka.reader import private_consumer

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

COPY = "copy"
"""The ``kind`` of a copy read back (the gate's ``BucketGate.COPY``)."""
COLUMNS = (
    ("kind", "STRING"),
    ("topic", "STRING"),
    ("gkey", "BINARY"),
    ("key", "BINARY"),
    ("value", "BINARY"),
    ("partition", "INT"),
    ("offset", "BIGINT"),
    ("timestamp_ms", "BIGINT"),
    ("headers", "ARRAY<STRUCT<key: STRING, value: BINARY>>"),
    ("id", "STRING"),
    ("due_ms", "BIGINT"),
    ("target_topic", "STRING"),
    ("target_key", "BINARY"),
    ("fired_offset", "BIGINT"),
    ("routed_at", "BIGINT"),
    ("enc_headers", "BINARY"),
    ("read_offset", "BIGINT"),
)
"""The gate's input columns, in order (a copy's ``partition``, ``offset`` and
``timestamp_ms`` are its schedule's source, not where the copy sits; a schedules-topic
record's ``read_offset`` is where it was read, after ``offset`` for a rewrite copy)."""
SCHEMA_DDL = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
ROWS_PER_ARROW_BATCH = 10_000
READ_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Span:
    """One bucket partition's ready copies: offsets ``[start, end)``."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class BucketRead(InputPartition):
    """What one Spark task reads."""

    spans: tuple[Span, ...]
    bootstrap: str


def plan_reads(spans: Sequence[Span], bootstrap: str, tasks: int) -> list[BucketRead]:
    """``spans`` shared out among at most ``tasks`` tasks, largest first to the least
    loaded, so the tasks of a batch take about as long."""
    loads: list[tuple[int, list[Span]]] = [(0, []) for _ in range(max(tasks, 1))]
    for span in sorted(spans, key=lambda s: s.end - s.start, reverse=True):
        size, group = min(loads, key=lambda item: item[0])
        loads.remove((size, group))
        loads.append((size + span.end - span.start, [*group, span]))
    return [BucketRead(tuple(group), bootstrap) for _, group in loads if group]


def read_spans(read: BucketRead) -> Iterator[pa.RecordBatch]:
    """The copies of ``read``'s spans.

    Raises:
        KafkaUnavailableError: the spans could not be read within :data:`READ_TIMEOUT_S`.
    """

    consumer = private_consumer(
        read.bootstrap, "delayline-buckets", overrides={"fetch.wait.max.ms": 10}
    )
    spans = _Spans(consumer, read.spans)
    rows = CopyRows()
    try:
        deadline = time.monotonic() + READ_TIMEOUT_S
        while spans.waiting:
            messages = consumer.consume(1000, 0.05)
            for msg in messages:
                spans.take(msg, rows)
            if rows.size >= ROWS_PER_ARROW_BATCH:
                yield rows.flush()
            if not messages:
                spans.passed()
            if spans.waiting and time.monotonic() > deadline:
                left = ", ".join(f"{s.topic}[{s.partition}] {s.start}..{s.end}"
                                 for s in spans.waiting.values())  # fmt: skip
                raise KafkaUnavailableError(f"reading {left} took over {READ_TIMEOUT_S:.0f}s")
        if rows.size:
            yield rows.flush()
    finally:
        consumer.close()


class _Spans:
    """The spans one consumer still reads."""

    def __init__(self, consumer: Any, spans: Sequence[Span]) -> None:

        self.consumer = consumer
        self.waiting = {(s.topic, s.partition): s for s in spans}
        consumer.assign([TopicPartition(s.topic, s.partition, s.start) for s in spans])

    def take(self, msg: Any, rows: CopyRows) -> None:
        """Add ``msg`` to ``rows`` if it is in its span."""

        if msg.error() is not None:
            raise KafkaUnavailableError(f"reading {msg.topic()}: {msg.error()}")
        topic, partition = str(msg.topic()), int(msg.partition() or 0)
        span = self.waiting.get((topic, partition))
        if span is None:
            return
        offset = int(msg.offset() or 0)
        if offset < span.end:
            rows.add(msg.value(), span, offset)
        if offset >= span.end - 1:
            self._done(topic, partition)

    def passed(self) -> None:
        """Close the spans the consumer is past: one that ends with a transaction marker
        never delivers its last offset."""

        if not self.waiting:
            return
        for tp in self.consumer.position([TopicPartition(t, p) for t, p in self.waiting]):
            if tp.offset >= self.waiting[(tp.topic, tp.partition)].end:
                self._done(tp.topic, tp.partition)

    def _done(self, topic: str, partition: int) -> None:

        self.waiting.pop((topic, partition), None)
        self.consumer.pause([TopicPartition(topic, partition)])


class CopyRows:
    """Copies decoded into the gate's columns, flushed as Arrow batches."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name, _ in COLUMNS}
        self.size = 0
        self.skipped = 0

    def add(self, value: bytes | None, span: Span, offset: int) -> None:
        try:
            copy = decode_copy(value or b"")
        except ValueError as exc:
            # Not written by delayline: nothing in it can be delivered.
            log.error("%s[%d]@%d is not a bucket copy (%s): skipped", span.topic, span.partition,
                      offset, exc)  # fmt: skip
            self.skipped += 1
            return
        gkey = copy.id.encode("utf-8")
        c = self.columns
        for name, item in (
            ("kind", COPY),
            ("topic", copy.src_topic),
            ("gkey", gkey),
            ("key", gkey),
            ("value", copy.value),
            ("partition", copy.src_partition),
            ("offset", copy.src_offset),
            ("timestamp_ms", copy.src_timestamp_ms),
            ("headers", None),
            ("id", copy.id),
            ("due_ms", copy.due_ms),
            ("target_topic", copy.target_topic),
            ("target_key", copy.target_key),
            ("fired_offset", None),
            ("routed_at", copy.routed_at_ms),
            ("enc_headers", copy.headers),
            ("read_offset", copy.src_offset),
        ):
            c[name].append(item)
        self.size += 1

    def flush(self) -> pa.RecordBatch:
        batch = to_arrow(self.columns)
        self.columns = {name: [] for name, _ in COLUMNS}
        self.size = 0
        return batch


def to_arrow(columns: dict[str, list[Any]]) -> pa.RecordBatch:
    """The columns as an Arrow batch of :data:`COLUMNS`' types."""
    import pyarrow as pa  # noqa: PLC0415

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    types = {"STRING": pa.string(), "BINARY": pa.binary(), "INT": pa.int32(), "BIGINT": pa.int64()}
    fields = [
        pa.field(name, pa.list_(header) if kind.startswith("ARRAY") else types[kind])
        for name, kind in COLUMNS
    ]
    return pa.RecordBatch.from_arrays(
        [pa.array(columns[f.name], type=f.type) for f in fields], schema=pa.schema(fields)
    )
