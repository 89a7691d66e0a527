"""One turn of a recurring schedule: what the committer writes when it falls due.

The committer alone delivers recurring schedules (the fire stage hands them over
whatever the lead, and writes no tombstone for them). For the version due, in the
transaction of its group, it writes:

* every occurrence due by now that the catch-up policy delivers
  (:meth:`~delayline.core.recurrence.Recurrence.settle`), each with ``scheduler-epoch``
  its nominal time and ``delayline-occurrence`` its number (none when it skips them);
* the schedule again, due at its next occurrence after now, into the partition the version came
  from (:func:`~delayline.contract.recurring.render_rearm`): compaction keeps it
  instead of the version, the hold plans it as a newer version;
* or, when the series has ended, delayline's tombstone of the version.

A cancel must never lose to this write: the committer commits it only once its watch
has read the input partition up to the re-arm's own offset
(:meth:`delayline.committer.service.Committer`), so a cancel or update written before the
re-arm withholds the occurrence and the re-arm alike, and one written after it ends
the re-armed version in the hold.

A recurrence that the library refuses turns the schedule into a dead letter with the
reason, and its tombstone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from delayline.contract import OutgoingRecord, render_tombstone
from delayline.contract.recurring import (
    at_occurrence,
    occurrence_number,
    recurrence_of,
    render_rearm,
)
from delayline.core.recurrence import Occurrence, RecurrenceError
from delayline.fire.firing import Firing

MAX_TURN_OCCURRENCES = 1_000
"""The most occurrences one turn delivers (after an outage, with ``catch-up all``); the
re-arm then names the next one, already due, and the next turn goes on."""


@dataclass(frozen=True, slots=True)
class Turn:
    """What one turn of a recurring schedule writes.

    Attributes:
        firings: The occurrences delivered, in order; the last carries the re-arm (or
            the tombstone when the series ends). Empty when nothing is delivered.
        records: What is written besides deliveries: the re-arm or the tombstone of a
            turn that delivers nothing, or the dead letter of a refused recurrence.
        rearm: The re-arm record, wherever it is written: its place is checked before
            the commit.
        skipped: Missed occurrences the catch-up policy did not deliver.
        reason: Why the schedule was dead-lettered instead, if it was.
    """

    firings: list[Firing] = field(default_factory=list)
    records: list[OutgoingRecord] = field(default_factory=list)
    rearm: OutgoingRecord | None = None
    skipped: int = 0
    reason: str | None = None


def take_turn(base: Firing, now_ms: int) -> Turn:
    """The turn of ``base.schedule``, a recurring version due, at ``now_ms`` (the
    broker's time of the delivery): ``base`` says where it goes and how it is stamped.

    Every occurrence due by ``now_ms`` is settled in this turn, each by the catch-up
    policy (:meth:`~delayline.core.recurrence.Recurrence.settle`): those it delivers
    go out in this transaction, in order (at most :data:`MAX_TURN_OCCURRENCES`), and
    the schedule is re-armed at the first occurrence after them. Deterministic in
    ``base`` and ``now_ms``; never raises on a bad recurrence (it is dead-lettered).
    """
    schedule = base.schedule
    try:
        recurrence = recurrence_of(schedule.headers)
        if recurrence is None:
            raise RecurrenceError("no delayline-cron or delayline-every header")
        current: Occurrence | None = Occurrence(
            schedule.due_ms, occurrence_number(schedule.headers)
        )
        delivered: list[Occurrence] = []
        skipped = 0
        while current is not None and len(delivered) < MAX_TURN_OCCURRENCES:
            settled = recurrence.settle(current, now_ms)
            delivered.extend([settled.deliver] if settled.deliver is not None else [])
            skipped += settled.skipped
            current = settled.next
            if current is None or current.nominal_ms > now_ms:
                break
    except RecurrenceError as exc:
        reason = f"recurrence refused: {exc}"
        return Turn(records=base._replace(forget=True).refused(reason), reason=reason)
    rearm = None if current is None else render_rearm(schedule, current)
    if not delivered:
        ends = [render_tombstone(schedule)] if rearm is None else [rearm]
        return Turn(records=ends, rearm=rearm, skipped=skipped)
    firings = [base._replace(schedule=at_occurrence(schedule, o)) for o in delivered]
    firings[-1] = firings[-1]._replace(forget=rearm is None, rearm=rearm)
    return Turn(firings=firings, rearm=rearm, skipped=skipped)
