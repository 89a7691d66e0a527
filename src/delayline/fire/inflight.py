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
value the payload, headers the schedule's own headers then :data:`HEADER`: id, due
time, target, source, so no contract is parsed again on the way out. The header is
versioned by its first byte: ``2`` is the binary layout :data:`LAYOUT` (no JSON, no
base64 to read: the committer reads one per schedule it delivers), ``{`` the JSON of
earlier versions, which readers still take (a topic written before an upgrade is
delivered after it). Its partition
follows the schedule's id (:func:`inflight_partition`): every version of a schedule goes
to one partition, so to one committer of the group, and the committers split the topic's
partitions between them.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import NamedTuple

from delayline.contract import OutgoingRecord
from delayline.contract.formats import INFLIGHT
from delayline.core.model import Headers, Schedule, SourceRef
from delayline.errors import DelaylineError

HEADER = "delayline-inflight"
"""The last header of an in-flight record: what is needed to deliver it."""
BINARY = INFLIGHT.current
"""First byte of the binary header (:data:`LAYOUT`); an earlier version's JSON starts
with ``{``."""
LAYOUT = struct.Struct("<BBqqiqqIIIi")
"""The binary header's fixed part, little-endian: version (:data:`BINARY`), flags
(:data:`MISSED`, :data:`HAS_BATCH`), due time, Spark batch (0 when none), the source's
partition, offset and timestamp, then the byte lengths of the id, the target topic, the
source topic and the target key (-1: none); those four follow in that order (the texts
UTF-8)."""
_BINARY_BYTE = bytes((BINARY,))
_unpack = LAYOUT.unpack_from
_FIXED = LAYOUT.size
MISSED = 1
"""Flag: the schedule was past due when the hold read it."""
HAS_BATCH = 2
"""Flag: the header names the Spark batch that handed the schedule over."""
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
    sid, target = schedule.id.encode(), schedule.target_topic.encode()
    source_topic = source.topic.encode()
    key = schedule.target_key
    flags = (MISSED if missed else 0) | (0 if batch_id is None else HAS_BATCH)
    fixed = LAYOUT.pack(
        BINARY, flags, schedule.due_ms, batch_id or 0, source.partition, source.offset,
        source.timestamp_ms, len(sid), len(target), len(source_topic),
        -1 if key is None else len(key),
    )  # fmt: skip
    header = b"".join((fixed, sid, target, source_topic, key or b""))
    headers = (*schedule.headers, (HEADER, header))
    partition = inflight_partition(schedule.id, partitions)
    return OutgoingRecord(topic, inflight_key(source), schedule.payload, headers, partition)


class Handed(NamedTuple):
    """What an in-flight record carries.

    Attributes:
        schedule: The schedule to deliver.
        batch: The Spark batch that handed it over, when the record says.
        missed: The schedule was past due when the hold read it.
    """

    schedule: Schedule
    batch: int | None = None
    missed: bool = False


def decode_inflight(value: bytes, headers: Headers, offset: int) -> Handed:
    """What the in-flight record at ``offset`` with ``value`` and ``headers`` carries;
    either version of :data:`HEADER`.

    Raises:
        InflightRecordError: its last header is not a readable :data:`HEADER`.
        FormatVersionError: it was written by a newer delayline (not a record to skip).
    """
    if not headers or headers[-1][0] != HEADER:
        raise InflightRecordError(f"record at offset {offset} is no in-flight schedule")
    raw = headers[-1][1] or b""
    try:
        if raw[:1] == b"{":
            return _from_json(raw, value, headers[:-1])
        if raw[:1] != _BINARY_BYTE:  # before the layout is read: a newer release's may
            INFLIGHT.check_first_byte(raw, f"in-flight record at offset {offset}")  # differ
        (version, flags, due_ms, batch, partition, source_offset, timestamp_ms, id_len,
         target_len, topic_len, key_len) = _unpack(raw)  # fmt: skip
        if version != BINARY:
            raise _unreadable(offset, f"version {version} is no version delayline wrote")
        at = _FIXED
        id_end = at + id_len
        target_end = id_end + target_len
        topic_end = target_end + topic_len
        if topic_end + max(key_len, 0) != len(raw):
            raise _unreadable(offset, f"{len(raw)} bytes, its lengths say {topic_end + key_len}")
        schedule = Schedule(
            raw[at:id_end].decode(),
            due_ms,
            raw[id_end:target_end].decode(),
            None if key_len < 0 else raw[topic_end:],
            value,
            headers[:-1],
            SourceRef(raw[target_end:topic_end].decode(), partition, source_offset, timestamp_ms),
        )
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise _unreadable(offset, str(exc)) from exc
    return Handed(schedule, batch if flags & HAS_BATCH else None, bool(flags & MISSED))


def _unreadable(offset: int, why: str) -> InflightRecordError:
    return InflightRecordError(
        f"record at offset {offset} has an unreadable {HEADER} header: {why}"
    )


def _from_json(raw: bytes, value: bytes, headers: Headers) -> Handed:
    """An earlier version's JSON header (read during an upgrade)."""
    facts = json.loads(raw)
    topic, partition, offset, timestamp_ms = facts["source"]
    schedule = Schedule(
        id=str(facts["id"]),
        due_ms=int(facts["due_ms"]),
        target_topic=str(facts["target_topic"]),
        target_key=_unb64(facts["target_key"]),
        payload=value,
        headers=headers,
        source=SourceRef(str(topic), int(partition), int(offset), int(timestamp_ms)),
    )
    batch = facts.get("batch")
    return Handed(schedule, batch if isinstance(batch, int) else None, facts.get("missed") is True)


def render_inflight_tombstone(topic: str, key: bytes | None, partition: int) -> OutgoingRecord:
    """The tombstone that marks the in-flight record of ``key`` delivered (to its own
    ``partition`` of ``topic``)."""
    return OutgoingRecord(topic, key, None, (), partition)


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)
