"""The internal model every input contract is parsed into.

A consumed record becomes exactly one of :class:`Schedule`, :class:`Cancel` or
:class:`Invalid`. All times are integer epoch milliseconds (UTC).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from delayline.core.frozen import fills_slots
from delayline.errors import InvalidScheduleError

Header = tuple[str, bytes | None]
"""A Kafka header: name and raw value (Kafka allows a null value)."""

Headers = tuple[Header, ...]

MAX_EPOCH_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: later due times are rejected."""


class SourceRef(NamedTuple):
    """Where a record was read from. Immutable; a named tuple, not a frozen dataclass:
    one is made for every record read and every delivery, three times faster.

    Attributes:
        topic: Source topic.
        partition: Source partition; tombstones go back to exactly this one.
        offset: Offset in the partition; a higher offset is a newer version.
        timestamp_ms: The record's Kafka timestamp.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int

    def describe(self) -> str:
        """Return ``topic/partition/offset``, the form used in dead-letter headers."""
        return f"{self.topic}/{self.partition}/{self.offset}"


@fills_slots
@dataclass(frozen=True, slots=True)
class Schedule:
    """A message to deliver later.

    Attributes:
        id: Schedule id (the schedules-topic record key). A newer schedule with
            the same id replaces this one.
        due_ms: When to deliver, epoch milliseconds.
        target_topic: Topic to deliver to.
        target_key: Key of the delivered record; ``None`` delivers a null key.
        payload: Value of the delivered record, byte for byte.
        headers: Every header of the schedule record, in order, control headers
            included; all of them are carried onto the delivered record.
        source: Where the schedule was read from; ``None`` before it is written.
            Not part of equality: the same schedule read twice is equal.
    """

    id: str
    due_ms: int
    target_topic: str
    target_key: bytes | None
    payload: bytes
    headers: Headers = ()
    source: SourceRef | None = field(default=None, compare=False)

    def require_source(self) -> SourceRef:
        """Where this schedule was read from.

        Raises:
            InvalidScheduleError: it was never read from Kafka (it has no source).
        """
        if self.source is None:
            raise InvalidScheduleError(f"schedule {self.id!r} has no source record")
        return self.source


@fills_slots
@dataclass(frozen=True, slots=True)
class Cancel:
    """A request to forget the pending schedule with this id (a tombstone).

    Attributes:
        id: Schedule id.
        fired_offset: Set on the tombstone delayline writes after a delivery: the
            offset of the version that fired. It cancels nothing newer than that.
        source: Where the tombstone was read from.
    """

    id: str
    fired_offset: int | None = None
    source: SourceRef | None = field(default=None, compare=False)


@fills_slots
@dataclass(frozen=True, slots=True)
class Invalid:
    """A record that is neither a schedule nor a cancel.

    Attributes:
        reason: Human-readable cause, written to the dead-letter ``delayline-error``
            header. Short, stable wording: operators grep for it.
        source: Where the record was read from.
    """

    reason: str
    source: SourceRef | None = None


Parsed = Schedule | Cancel | Invalid
