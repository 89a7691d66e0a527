"""The hold's event kinds and :class:`HoldEvent`: what every layer says about the hold's
decisions (no Spark here; the Spark rows of these events are :mod:`.events`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from delayline.contract.records import ConsumedRecord
from delayline.core.model import Schedule


class Kind(StrEnum):
    """What the hold decided about a record or a schedule: the ``kind`` of a
    :class:`HoldEvent` and of an event row. Only RAISE, DEAD, REWRITE, RETIRE and ROUTE
    make the fire stage write; every kind is counted. The values are the wire format
    (event rows of the JVM hold, the Redis hold's task records, metric labels)."""

    RAISE = "fire"
    """The schedule's raise time came (its due time less the lead): it is handed to the
    fire stage, which delivers it at its due time (at once with no lead). Its value is
    the one it had when raising and delivering were one step."""
    DEAD = "dead"
    """To the dead-letter topic: an invalid record, or a schedule past its max lateness."""
    PLANNED = "planned"
    """A new schedule is held; its timer is set."""
    UPDATED = "updated"
    """A newer version replaced the held one; its timer moved."""
    CANCELLED = "cancelled"
    """A tombstone ended the held version."""
    UNKNOWN_CANCEL = "unknown_cancel"
    """A tombstone of an id nothing is held for."""
    OWN_TOMBSTONE = "own_tombstone"
    """delayline's tombstone after a delivery, read back: the schedule is already gone."""
    STALE = "stale"
    """A version or tombstone older than what is held: ignored (replays are harmless)."""
    MISSED = "missed"
    """A schedule already due when it arrived (it is raised, or expires, in the same
    batch)."""
    EARLY = "early"
    """Follows the PLANNED or UPDATED event of a version of a burst (many due in the
    same second): its timer is set earlier than the lead (the JVM hold's
    :data:`~delayline.holds.fold.BURST_LEAD_MS`), or it is raised in the same batch
    when that time has come. ``due_ms`` is its due time."""
    DIRECT = "direct"
    """A version of short notice (:mod:`delayline.contract.notice`): the hold ends what
    it replaces but does not hold it; the committer owning its in-flight partition hands
    it over. No timer is set for it."""
    SHORT = "short"
    """A schedule that arrived with less than the lead to go, not yet due: raised in the
    same batch, so no timer is set for it."""
    REWRITE = "rewrite"
    """Append the held version to the schedules topic again: a record compaction would
    keep instead of it now sits after it in its partition."""
    RETIRE = "retire"
    """Write delayline's tombstone for a version dropped in favour of another partition's
    record, into the version's own partition, so compaction removes it."""
    ROUTE = "route"
    """The bucket hold's: write the version as a copy into the bucket of its remaining
    wait (:mod:`delayline.holds.buckets`)."""
    SUPERSEDED = "superseded"
    """The bucket hold's: a copy that is not its schedule's live one came back and was
    dropped (its version was replaced, cancelled or fired)."""


TIMER_KINDS = (Kind.PLANNED, Kind.UPDATED)
"""Events that carry the due time of a newly set timer."""
EXPIRED = "expired"
"""The dead-letter reason of a schedule later than the maximum lateness."""


@dataclass(frozen=True, slots=True)
class HoldEvent:
    """Something the hold decided about one record or one schedule.

    Attributes:
        kind: A :class:`Kind`.
        at_ms: The batch time it was decided at.
        id: The schedule id, when the record had a valid one.
        schedule: For RAISE, REWRITE, RETIRE and an expired DEAD: the version concerned.
        record: For an invalid DEAD: the record as read.
        due_ms: For PLANNED and UPDATED: the timer now set.
        reason: For DEAD: the dead-letter reason.
    """

    kind: str
    at_ms: int
    id: str | None = None
    schedule: Schedule | None = None
    record: ConsumedRecord | None = None
    due_ms: int | None = None
    reason: str | None = None


INVALID = "invalid"
"""The count of an invalid record's dead letter (beside :data:`EXPIRED`)."""
