"""The in-flight topic: schedules handed from the fire stage to the committer.

With a lead (:attr:`delayline.pipeline.config.PipelineConfig.lead_ms`) the fire stage
does not deliver a schedule raised before its due time. It writes the schedule here
and its tombstone to the schedules topic, in the batch's transaction with the batch's
marker, so the hand-off is exactly once like any other write of a batch. The
committer (:mod:`delayline.committer.service`) reads this topic and delivers each
schedule at its due time, in a transaction that also writes the in-flight record's
tombstone: so a delivery happens exactly once across crashes (a restart skips what a
tombstone shows delivered), and compaction forgets what was delivered.

A record here: key ``<source topic>/<partition>/<offset>`` (one per schedule version),
value the payload, headers the schedule's own headers then :data:`HEADER` (JSON: id,
due time, target, source), so no contract is parsed again on the way out. Its partition
follows the schedule's id (:func:`inflight_partition`): every version of a schedule goes
to one partition, so to one committer of the group, and the committers split the topic's
partitions between them.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass
from typing import Any

from delayline.contract import ConsumedRecord, OutgoingRecord
from delayline.core.model import Schedule, SourceRef
from delayline.errors import DelaylineError

HEADER = "delayline-inflight"
"""The last header of an in-flight record: what is needed to deliver it."""
CLOCK_PROBE_KEY = b"delayline-clock-probe"
"""Key of the tombstones :func:`delayline.committer.broker_clock.measure` times (the committer
finds no schedule of that key and ignores them)."""


class InflightRecordError(DelaylineError):
    """The in-flight topic cannot be read: a record delayline did not write (skipped
    with a warning), the topic missing, or a fatal consumer error (the committer starts
    afresh)."""


def inflight_key(source: SourceRef) -> bytes:
    """The key of a version's in-flight record (unique per version)."""
    return source.describe().encode()


def inflight_partition(schedule_id: str, partitions: int) -> int:
    """The in-flight partition of every version of ``schedule_id`` when the topic has
    ``partitions`` partitions (the same in every process: CRC-32, not Python's salted
    ``hash``)."""
    return zlib.crc32(schedule_id.encode()) % max(partitions, 1)


def render_inflight(
    schedule: Schedule,
    topic: str,
    batch_id: int | None = None,
    *,
    missed: bool = False,
    partitions: int = 1,
) -> OutgoingRecord:
    """The in-flight record of ``schedule`` (which must have been read from Kafka),
    handed over by Spark's batch ``batch_id`` (what the committer's watch reads the input
    topics from after a restart:
    :func:`delayline.committer.checkpoint_log.checkpoint_positions`), to its partition of
    a topic of ``partitions`` partitions."""
    source = schedule.require_source()
    facts: dict[str, Any] = {
        "id": schedule.id,
        "due_ms": schedule.due_ms,
        "target_topic": schedule.target_topic,
        "target_key": _b64(schedule.target_key),
        "source": [source.topic, source.partition, source.offset, source.timestamp_ms],
    }
    if batch_id is not None:
        facts["batch"] = batch_id
    if missed:
        facts["missed"] = True  # past due when it arrived: its lateness is the writer's
    headers = (*schedule.headers, (HEADER, json.dumps(facts, separators=(",", ":")).encode()))
    partition = inflight_partition(schedule.id, partitions)
    return OutgoingRecord(topic, inflight_key(source), schedule.payload, headers, partition)


@dataclass(frozen=True, slots=True)
class Handed:
    """What an in-flight record carries.

    Attributes:
        schedule: The schedule to deliver.
        batch: The Spark batch that handed it over, when the record says.
        missed: The schedule was past due when the hold read it.
    """

    schedule: Schedule
    batch: int | None = None
    missed: bool = False


def read_inflight(record: ConsumedRecord) -> Handed:
    """The schedule an in-flight record carries, with what its header says beside it.

    Raises:
        InflightRecordError: the record is a tombstone or lacks a readable
            :data:`HEADER`.
    """
    if record.value is None or not record.headers or record.headers[-1][0] != HEADER:
        raise InflightRecordError(f"record at offset {record.offset} is no in-flight schedule")
    raw = record.headers[-1][1]
    try:
        facts = json.loads(raw or b"")
        topic, partition, offset, timestamp_ms = facts["source"]
        schedule = Schedule(
            id=str(facts["id"]),
            due_ms=int(facts["due_ms"]),
            target_topic=str(facts["target_topic"]),
            target_key=_unb64(facts["target_key"]),
            payload=record.value,
            headers=record.headers[:-1],
            source=SourceRef(str(topic), int(partition), int(offset), int(timestamp_ms)),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise InflightRecordError(
            f"record at offset {record.offset} has an unreadable {HEADER} header: {exc}"
        ) from exc
    batch = facts.get("batch")
    return Handed(schedule, batch if isinstance(batch, int) else None, facts.get("missed") is True)


def render_inflight_tombstone(record: ConsumedRecord) -> OutgoingRecord:
    """The tombstone that marks ``record`` delivered (to its own partition)."""
    return OutgoingRecord(record.topic, record.key, None, (), record.partition)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)
