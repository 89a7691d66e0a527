"""A schedule the committer read from the in-flight topic, and a group of them written in
one transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from delayline.core.model import Schedule
from delayline.fire.inflight import inflight_key

if TYPE_CHECKING:
    from delayline.committer.short_notice import Short


@dataclass(slots=True, eq=False)
class Pending:
    """A schedule the committer delivers: handed over and read from the in-flight
    topic, or a short-notice version it read from the input itself (:attr:`short`).

    Attributes:
        partition: Its in-flight record's partition (a short one's: the partition whose
            owner delivers it).
        offset: Its in-flight record's offset; a short one has none: a negative number,
            unique in the committer's session.
        key: Its in-flight record's key (its tombstone's); a short one's is made from
            its place in the input (:func:`short_key`), unlike any in-flight key.
        schedule: The schedule it carries.
        read_ms: When the committer read it (host clock).
        batch: The Spark batch that handed it over (when its record says).
        missed: Past due when the hold read it: late by its writer, not counted as
            lateness.
        handed_ms: Its in-flight record's timestamp (the hand-over, stamped on append).
        paced_ms: When pacing releases it (:mod:`delayline.committer.pacing`: its window,
            or its target's rate), if later than its due time; its rate's slot once it
            has one.
        late_ms: Held back by a rate: how late it already was when the committer read it
            (an outage's lateness, which the rate's wait must not hide from
            ``--max-lateness``).
        short: The short-notice version it is, if one: no in-flight record, and its
            delivery writes delayline's own tombstone of it to its input partition.
    """

    partition: int
    offset: int
    key: bytes
    schedule: Schedule
    read_ms: int = 0
    batch: int | None = None
    missed: bool = False
    handed_ms: int = 0
    paced_ms: int | None = None
    late_ms: int = 0
    short: Short | None = None

    @property
    def due_ms(self) -> int:
        """When it must be delivered."""
        return self.schedule.due_ms

    @property
    def release_ms(self) -> int:
        """When it may be committed: its due time, or later when paced."""
        paced = self.paced_ms
        return self.schedule.due_ms if paced is None else paced


@dataclass(frozen=True, slots=True)
class Group:
    """Schedules delivered in one transaction.

    Attributes:
        items: In release order.
        commit_ms: The latest release time among them (:attr:`Pending.release_ms`): the
            transaction commits then, never before, so no record of it is visible early.
    """

    items: tuple[Pending, ...]
    commit_ms: int


def id_of(schedule: Schedule) -> tuple[str, str]:
    """(source topic, schedule id): what a later cancel or update names."""
    return schedule.require_source().topic, schedule.id


def short_key(schedule: Schedule) -> bytes:
    """The :attr:`Pending.key` of a short-notice version (``schedule``, with its place):
    its place, as its in-flight record's key would be
    (:func:`~delayline.fire.inflight.inflight_key`), after a zero byte: a version is
    never both handed over and short, and the two stay apart even so."""
    source = schedule.require_source()
    return b"\x00" + inflight_key(source)
