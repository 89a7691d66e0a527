"""Translate records of the followed topics into catalog changes. Pure logic.

The catalog follows three kinds of topic:

- input topics (schedules topics, and envelope and timer-request topics, each
  parsed by its contract): a schedule version is created or updated; a producer's
  tombstone cancels; delayline's own tombstone (``delayline-fired-offset``)
  finishes the version it names and nothing newer;
- the history topic: a version fired (``delayline-source`` names it), with its
  lateness;
- the dead-letter topic: a record was rejected or expired.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from delayline.catalog.model import DeadLetter, Version
from delayline.contract import ConsumedRecord, parse_record
from delayline.contract import headers as h
from delayline.core.model import Cancel, Headers, Parsed, Schedule

MAX_OFFSET = 2**63 - 1
"""Kafka offsets are signed 64-bit; anything beyond is not a real offset."""


class Role(Enum):
    """What a followed topic is to the catalog."""

    SCHEDULES = "schedules"
    HISTORY = "history"
    DEAD_LETTER = "dead-letter"


@dataclass(frozen=True, slots=True)
class Upsert:
    """A schedule version arrived: it is now the pending one for its id."""

    schedule: Schedule
    at_ms: int


RemoveMode = Literal["exact", "superseded", "fired"]
"""Which pending version a :class:`Remove` ends:

- ``exact``: the one at ``partition``/``offset`` (history, dead letters);
- ``superseded``: any older than the record at ``partition``/``offset``/``timestamp_ms``
  in the order of :func:`delayline.core.versions.supersedes` (a producer's tombstone);
- ``fired``: one in ``partition`` at or below ``offset`` (delayline's own tombstone names
  the fired version's offset in the partition it was written to).
"""


@dataclass(frozen=True, slots=True)
class Remove:
    """A version of ``id`` on ``topic`` is over.

    Attributes:
        id: Schedule id.
        topic: Schedules topic of the id.
        partition: Partition of the version (or tombstone) it is about.
        offset: Offset of the version (or tombstone) it is about.
        timestamp_ms: Record timestamp of the tombstone (``superseded`` only).
        mode: Which pending version it ends.
        version: What to add to the id's history.
        only_if_pending: Add ``version`` only when a pending version was removed.
    """

    id: str
    topic: str
    partition: int
    offset: int
    mode: RemoveMode
    version: Version | None
    only_if_pending: bool
    timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class AddDeadLetter:
    """A record arrived on the dead-letter topic."""

    entry: DeadLetter


Change = Upsert | Remove | AddDeadLetter


def changes_for(
    record: ConsumedRecord,
    role: Role,
    *,
    history_followed: bool,
    parse: Callable[[ConsumedRecord], Parsed] = parse_record,
) -> list[Change]:
    """The catalog changes one record implies; never raises on malformed input.

    Args:
        record: A record of a followed topic.
        role: What that topic is.
        history_followed: A history topic is followed, so delayline's own
            tombstones need not be recorded as versions (history says more).
        parse: The parser of an input topic's contract
            (:class:`delayline.contract.contracts.InputParser`).
    """
    if role is Role.SCHEDULES:
        return _from_schedules(record, parse, history_followed=history_followed)
    if role is Role.HISTORY:
        return _from_history(record)
    return _from_dead_letter(record)


def _from_schedules(
    record: ConsumedRecord, parse: Callable[[ConsumedRecord], Parsed], *, history_followed: bool
) -> list[Change]:
    parsed = parse(record)
    if isinstance(parsed, Schedule):
        return [Upsert(parsed, record.timestamp_ms)]
    if not isinstance(parsed, Cancel):
        return []  # invalid: the dead-letter topic will say why
    if parsed.fired_offset is not None and not 0 <= parsed.fired_offset <= MAX_OFFSET:
        return []  # not one delayline wrote: nothing it can name is pending
    if parsed.fired_offset is None:
        version = Version(
            "cancelled", record.timestamp_ms, record.topic, record.partition, record.offset
        )
        return [
            Remove(
                parsed.id, record.topic, record.partition, record.offset, "superseded",
                version, True, record.timestamp_ms,
            )
        ]  # fmt: skip
    finished = None
    if not history_followed:
        finished = Version(
            "finished", record.timestamp_ms, record.topic, record.partition, parsed.fired_offset
        )
    return [
        Remove(parsed.id, record.topic, record.partition, parsed.fired_offset, "fired",
               finished, True)
    ]  # fmt: skip


def _from_history(record: ConsumedRecord) -> list[Change]:
    schedule_id = _text(record.key)
    source = _source(record.headers)
    if schedule_id is None or source is None:
        return []
    topic, partition, offset = source
    # delayline-due and -target-topic since the envelope and timer-request contracts;
    # older history records have only a header-contract schedule's own headers.
    due_ms = _epoch(record.headers, h.DUE)
    due_ms = _epoch(record.headers) if due_ms is None else due_ms
    target = _header_text(record.headers, h.TARGET) or _header_text(record.headers, h.TARGET_TOPIC)
    version = Version(
        "fired",
        record.timestamp_ms,
        topic,
        partition,
        offset,
        due_ms=due_ms,
        target_topic=target,
        lateness_ms=None if due_ms is None else record.timestamp_ms - due_ms,
    )
    return [Remove(schedule_id, topic, partition, offset, "exact", version, False)]


def _from_dead_letter(record: ConsumedRecord) -> list[Change]:
    reason = _header_text(record.headers, h.ERROR) or "unknown"
    source_text = _header_text(record.headers, h.SOURCE) or ""
    schedule_id = _text(record.key)
    entry = DeadLetter(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        at_ms=record.timestamp_ms,
        reason=reason,
        source=source_text,
        schedule_id=schedule_id,
        key=record.key,
        value=record.value,
        headers=record.headers,
    )
    out: list[Change] = [AddDeadLetter(entry)]
    source = _source(record.headers)
    if schedule_id is not None and source is not None:
        topic, partition, offset = source
        version = Version(
            "dead-lettered",
            record.timestamp_ms,
            topic,
            partition,
            offset,
            due_ms=_epoch(record.headers),
            reason=reason,
        )
        # Exact: an invalid newer record must not end the older version still held.
        out.append(Remove(schedule_id, topic, partition, offset, "exact", version, False))
    return out


def parse_source(text: str) -> tuple[str, int, int] | None:
    """Split ``topic/partition/offset``; ``None`` when it is not that."""
    parts = text.rsplit("/", 2)
    if len(parts) != 3 or not parts[0]:
        return None
    try:
        partition, offset = int(parts[1]), int(parts[2])
    except ValueError:
        return None
    if not (0 <= partition <= MAX_OFFSET and 0 <= offset <= MAX_OFFSET):
        return None
    return parts[0], partition, offset


def _source(headers: Headers) -> tuple[str, int, int] | None:
    text = _header_text(headers, h.SOURCE)
    return None if text is None else parse_source(text)


def _epoch(headers: Headers, name: str = h.EPOCH) -> int | None:
    text = _header_text(headers, name)
    if text is None:
        return None
    try:
        return h.parse_epoch_ms(text)
    except h.EpochError:
        return None


def _header_text(headers: Headers, name: str) -> str | None:
    """The last value of ``name`` as text (delayline appends its headers last)."""
    for key, value in reversed(headers):
        if key == name:
            return _text(value)
    return None


def _text(raw: bytes | None) -> str | None:
    if not raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
