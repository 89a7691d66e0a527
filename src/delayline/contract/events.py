"""The Spark row shapes between the pipeline stages and their model conversions, with
the event kinds of :mod:`.kinds` (re-exported here, for the fire stage and the holds).

Three shapes: the input row (a Kafka record), the held state (one pending
schedule) and the event row the hold emits for the fire stage. Headers travel
as one encoded ``bytes`` column (:mod:`delayline.contract.codec`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from delayline.contract import ConsumedRecord, parse_record
from delayline.contract.codec import decode_headers, encode_headers
from delayline.contract.kinds import EXPIRED, INVALID, TIMER_KINDS, HoldEvent, Kind
from delayline.core.model import Invalid, Parsed, Schedule, SourceRef

log = logging.getLogger(__name__)


__all__ = [
    "EVENT_SCHEMA",
    "EXPIRED",
    "INVALID",
    "SOURCE_SCHEMA",
    "STATE_SCHEMA",
    "TIMER_KINDS",
    "HoldEvent",
    "Kind",
    "count_event",
    "dead_reason",
    "event_record",
    "event_row",
    "event_schedule",
    "event_source",
    "input_to_record",
    "record_event",
    "schedule_event",
    "schedule_to_state",
    "source_row",
    "state_to_schedule",
]

SOURCE_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("gkey", BinaryType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp_ms", LongType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)
"""The schedules topics as the pipeline reads them (``source.read_schedules``)."""

STATE_SCHEMA = StructType(
    [
        StructField("id", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp_ms", LongType()),
        StructField("due_ms", LongType()),
        StructField("target_topic", StringType()),
        StructField("target_key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", BinaryType()),
    ]
)

EVENT_SCHEMA = StructType(
    [
        StructField("kind", StringType()),
        StructField("id", StringType()),
        StructField("src_topic", StringType()),
        StructField("src_partition", IntegerType()),
        StructField("src_offset", LongType()),
        StructField("src_timestamp_ms", LongType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", BinaryType()),
        StructField("target_topic", StringType()),
        StructField("target_key", BinaryType()),
        StructField("due_ms", LongType()),
        StructField("reason", StringType()),
        StructField("at_ms", LongType()),
    ]
)

# How the fire stage counts DEAD rows: a record that is not a schedule, or one too late.


def input_to_record(row: Any) -> ConsumedRecord:
    """A Kafka-source row (headers as an array of key/value structs) as a record."""
    headers = tuple((h["key"], h["value"]) for h in (row["headers"] or ()))
    return ConsumedRecord(
        topic=row["topic"],
        partition=int(row["partition"]),
        offset=int(row["offset"]),
        timestamp_ms=int(row["timestamp_ms"]),
        key=_bytes(row["key"]),
        value=_bytes(row["value"]),
        headers=tuple((name, _bytes(value)) for name, value in headers),
    )


def source_row(record: ConsumedRecord) -> tuple[Any, ...]:
    """``record`` in the shape of :data:`SOURCE_SCHEMA` (for tests and tools)."""
    headers = [(name, value) for name, value in record.headers]
    return (record.topic, record.key or b"", record.key, record.value, record.partition,
            record.offset, record.timestamp_ms, headers)  # fmt: skip


def dead_reason(row: Any, parse: Callable[[ConsumedRecord], Parsed] = parse_record) -> str:
    """The dead-letter reason of a DEAD event row.

    Python holds set it; the JVM hold leaves it to this (the Python parser's reason for
    the record, so each reason has one definition).

    Args:
        row: The event row.
        parse: The parser of the record's contract
            (:class:`delayline.contract.contracts.InputParser`).
    """
    if row["reason"] is not None:
        return str(row["reason"])
    parsed = parse(event_record(row))
    if isinstance(parsed, Invalid):
        return parsed.reason
    # The SQL validation refused what the parser accepts: a delayline bug. The record
    # is still kept (in the dead-letter topic), with a reason that says so.
    log.error("validation disagrees with the parser on %s (a bug)", event_source(row).describe())
    return "refused by the pipeline's validation although the parser accepts it (a bug)"


def schedule_to_state(schedule: Schedule) -> tuple[Any, ...]:
    """The state tuple of a pending schedule (its source topic is the grouping key)."""
    source = schedule.require_source()
    return (
        schedule.id,
        source.partition,
        source.offset,
        source.timestamp_ms,
        schedule.due_ms,
        schedule.target_topic,
        schedule.target_key,
        schedule.payload,
        encode_headers(schedule.headers),
    )


def state_to_schedule(topic: str, state: Any) -> Schedule:
    """Rebuild the schedule held in ``state`` for source ``topic``."""
    (sid, partition, offset, ts, due_ms, target_topic, target_key, value, headers) = state
    return Schedule(
        id=sid,
        due_ms=int(due_ms),
        target_topic=target_topic,
        target_key=_bytes(target_key),
        payload=_bytes(value) or b"",
        headers=decode_headers(_bytes(headers) or b""),
        source=SourceRef(topic, int(partition), int(offset), int(ts)),
    )


def event_row(event: HoldEvent) -> Row:
    """The event row of a hold event (the shape the fire stage reads)."""
    if event.schedule is not None:
        return schedule_event(event.kind, event.schedule, event.at_ms, event.reason)
    if event.record is not None:
        return record_event(event.kind, event.record, event.at_ms, event.reason, event.id)
    return count_event(event.kind, event.id, event.at_ms, event.due_ms)


def schedule_event(kind: str, schedule: Schedule, at_ms: int, reason: str | None = None) -> Row:
    """An event row about a schedule (fired, planned, expired...)."""
    source = schedule.require_source()
    return Row(
        kind=str(kind),
        id=schedule.id,
        src_topic=source.topic,
        src_partition=source.partition,
        src_offset=source.offset,
        src_timestamp_ms=source.timestamp_ms,
        key=schedule.id.encode(),
        value=schedule.payload,
        headers=encode_headers(schedule.headers),
        target_topic=schedule.target_topic,
        target_key=schedule.target_key,
        due_ms=schedule.due_ms,
        reason=reason,
        at_ms=at_ms,
    )


def count_event(kind: str, sid: str | None, at_ms: int, due_ms: int | None = None) -> Row:
    """A bookkeeping event (planned, updated, cancelled...): counted, never written,
    so it carries no payload to the driver. ``due_ms`` is the timer a planned or
    updated schedule now has (the waker plans a micro-batch for it)."""
    return Row(
        kind=str(kind), id=sid, src_topic=None, src_partition=None, src_offset=None,
        src_timestamp_ms=None, key=None, value=None, headers=None, target_topic=None,
        target_key=None, due_ms=due_ms, reason=None, at_ms=at_ms,
    )  # fmt: skip


def record_event(
    kind: str, record: ConsumedRecord, at_ms: int, reason: str | None = None, sid: str | None = None
) -> Row:
    """An event row about a record that holds no schedule (dead letter, cancel)."""
    return Row(
        kind=str(kind),
        id=sid,
        src_topic=record.topic,
        src_partition=record.partition,
        src_offset=record.offset,
        src_timestamp_ms=record.timestamp_ms,
        key=record.key,
        value=record.value,
        headers=encode_headers(record.headers),
        target_topic=None,
        target_key=None,
        due_ms=None,
        reason=reason,
        at_ms=at_ms,
    )


def event_schedule(row: Any) -> Schedule:
    """The schedule an event row of kind RAISE (or expired DEAD) is about."""
    return Schedule(
        id=row["id"],
        due_ms=int(row["due_ms"]),
        target_topic=row["target_topic"],
        target_key=_bytes(row["target_key"]),
        payload=_bytes(row["value"]) or b"",
        # None: a version the bucket hold keeps without them (enough for a tombstone).
        headers=() if row["headers"] is None else decode_headers(_bytes(row["headers"]) or b""),
        source=event_source(row),
    )


def event_record(row: Any) -> ConsumedRecord:
    """The input record an event row of kind DEAD is about."""
    source = event_source(row)
    return ConsumedRecord(
        topic=source.topic,
        partition=source.partition,
        offset=source.offset,
        timestamp_ms=source.timestamp_ms,
        key=_bytes(row["key"]),
        value=_bytes(row["value"]),
        headers=decode_headers(_bytes(row["headers"]) or b""),
    )


def event_source(row: Any) -> SourceRef:
    """Where the record an event row is about came from."""
    return SourceRef(
        row["src_topic"],
        int(row["src_partition"]),
        int(row["src_offset"]),
        int(row["src_timestamp_ms"]),
    )


def _bytes(value: Any) -> bytes | None:
    # Spark hands binary columns back as bytearray.
    return None if value is None else bytes(value)
