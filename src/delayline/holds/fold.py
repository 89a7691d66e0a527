"""The hold's rules: one pure function of (what is held, the records of one id, now).

Every hold (in memory, Spark state, and the next ones) keeps, per schedules topic and
schedule id, at most one pending version, and applies :func:`fold` to the records of
that id in each micro-batch and :func:`timer_event` when its timer is due. The rules:

* **Newer wins.** A version replaces the held one only if it supersedes it
  (:func:`delayline.core.versions.supersedes`: offset order within a partition, record
  timestamp across partitions). An older or equal version is ``stale``: replays are
  harmless.
* **A tombstone cancels** the held version if the tombstone is newer than it; an
  older tombstone (from another partition) is ``stale``.
* **delayline's own tombstones never cancel a newer version.** The tombstone written
  after a delivery names the partition and offset that fired; it ends only that
  version (or an older one in the same partition).
* **Nothing the hold still delivers may vanish from the compacted topic.** When a
  record that compaction keeps instead of the held version lands after it in the same
  partition (delayline's tombstone of an older version, or an invalid record with the
  same key), the held version is written again after it (``rewrite``), so a rebuild or
  a rebuilt catalog still finds it. The copy names the version it copies
  (``delayline-copy-of``) and *is* that version, ordered at its original's offset: a
  newer version written before the copy landed stays newer, and the copy read back
  (or read first, by a rebuild) is the version it copies.
* **Nothing the hold dropped may come back from the compacted topic.** A version
  replaced or cancelled by a record of another partition, or one that arrives stale
  from another partition, would stay last of its key in its own partition forever, and
  a rebuild could read it without what replaced it. It is ``retired``: delayline writes
  its own tombstone for exactly that version into its partition (unless a later record
  of the key in that partition is in the same batch).
* **Raised a lead ahead.** A version is handed to the fire stage ``lead_ms`` before its
  due time (its timer is set then); the fire stage delivers it at the due time itself
  (:mod:`delayline.committer.service`). With a lead of 0 it is handed over when due.
* **A burst is raised earlier (the JVM hold).** Handing many schedules over takes
  longer than the lead: a version planned in a batch where more than
  :data:`BURST_DENSE` others of its task (its Spark partition of the hold) were planned
  with the same due second is raised :data:`BURST_LEAD_MS` before the start of that
  second, or in that batch when that time has come (an ``early`` event follows its ``planned`` or
  ``updated`` one; :func:`burst_raise_ms`). It is still delivered at its due time.
  The other holds, whose batches are read in Python, raise every version at the lead.
* **Due on arrival fires.** A version already within its lead when its batch runs fires
  in that batch (counted as ``missed`` too when already past due); the same holds for
  timers that fell due while the pipeline was down.
* **Max lateness expires.** A version more than ``max_lateness_ms`` late when it would
  fire goes to the dead-letter topic with reason ``expired`` instead.
* **Short notice is not held.** Under notice rules (:mod:`delayline.contract.notice`),
  a version due less than the notice after its record's timestamp is folded like any
  other (it ends what it supersedes, and what is older than it is stale) but not held:
  ``direct``, no timer, nothing raised; the committer owning its in-flight partition
  hands it over. A copy is never short: it is the version it copies, held or not.
* **Deterministic.** The result depends only on the held version, the records and
  ``now_ms`` (and, for a burst in the JVM hold, on the versions its task planned
  before in the batch, in Spark's key order), so a replayed micro-batch (same records,
  same batch time) emits the same events: what makes the fire stage's exactly-once
  check sound.

All records of an id in one batch are folded before anything fires, so a schedule
followed by its cancel in the same batch never fires. Across batches the hold knows only
what it holds: a version read in a later batch than a newer cancel from another
partition (possible when ``max_offsets_per_trigger`` splits a backlog) is planned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from delayline.contract import ConsumedRecord, parse_record
from delayline.contract.kinds import EXPIRED, HoldEvent, Kind
from delayline.contract.notice import NoticeRules
from delayline.core.model import Cancel, Invalid, Parsed, Schedule, SourceRef
from delayline.core.versions import supersedes


@dataclass(frozen=True, slots=True)
class Folded:
    """The outcome of :func:`fold`.

    Attributes:
        held: The version held afterwards (``None``: nothing pending).
        events: What happened, in order.
        timer_from: The timer that must go (the replaced version's raise time), if any.
        timer_to: The timer to set (the new held version's raise time), if any.
    """

    held: Schedule | None
    events: list[HoldEvent] = field(default_factory=list)
    timer_from: int | None = None
    timer_to: int | None = None


def fold(  # noqa: C901 - one branch per kind of record, as Fold.java has them
    held: Schedule | None,
    records: Iterable[ConsumedRecord],
    now_ms: int,
    max_lateness_ms: int | None = None,
    lead_ms: int = 0,
    parse: Callable[[ConsumedRecord], Parsed] = parse_record,
    notice: NoticeRules | None = None,
) -> Folded:
    """Apply one batch's records of one id (one input topic) to the held version.

    Args:
        held: The version held before the batch, with its source.
        records: Every record of this id in the batch, in any order.
        now_ms: The batch time.
        max_lateness_ms: Later than this, a due version expires; ``None``: never.
        lead_ms: How long before its due time a version is handed over; timers (in
            :class:`Folded`) are set at :func:`raise_ms`.
        parse: The parser of the topic's contract
            (:class:`delayline.contract.contracts.InputParser`); the header contract's
            by default.
        notice: The notice rules: a version of short notice under them is not held
            (``direct``); ``None``: every version is held.
    """
    events: list[HoldEvent] = []
    current = held
    # The newest version seen, held or cancelled: a record must supersede it to count,
    # so a cancel read before an older version from another partition still wins.
    newest: SourceRef | None = None if held is None else held.source
    hidden = False  # a record compaction keeps instead of ``current`` follows it
    ordered = sorted(records, key=lambda x: (x.partition, x.offset))
    last_in = {x.partition: x.offset for x in ordered}  # per partition, in this batch
    retired: list[SourceRef] = []
    # Where ``current`` was read in its partition: a copy sits after the version it is.
    current_at = None if held is None else held.require_source().offset

    def retire(dropped: Schedule | None, read_at: int | None, by: SourceRef) -> None:
        """Retire ``dropped`` (read at offset ``read_at``) if ``by``, another
        partition's record, strands it."""
        at = None if dropped is None else dropped.source
        if dropped is None or at is None or read_at is None or at.partition == by.partition:
            return  # compaction of its own partition removes it
        if last_in.get(at.partition, -1) > read_at or at in retired:
            return
        retired.append(at)
        events.append(HoldEvent(Kind.RETIRE, now_ms, dropped.id, schedule=dropped))

    for record in ordered:
        parsed = parse(record)
        # A copy's place in the order of versions is its original's.
        source = parsed.source if isinstance(parsed, Schedule) and parsed.source else record.source
        if isinstance(parsed, Invalid):
            events.append(HoldEvent(Kind.DEAD, now_ms, record=record, reason=parsed.reason))
            hidden = hidden or _hides(source, current)
        elif isinstance(parsed, Cancel) and parsed.fired_offset is not None:
            # Names the version it ends, so it is not ordered against the newest one.
            kind, hides = _own_tombstone(parsed.fired_offset, source, current)
            current = current if kind == Kind.STALE else None
            hidden = hidden or hides
            events.append(HoldEvent(kind, now_ms, parsed.id))
        elif newest is not None and not supersedes(source, newest):
            events.append(HoldEvent(Kind.STALE, now_ms, parsed.id))
            if isinstance(parsed, Schedule) and _same_place(source, current):
                # A copy of the held version, read back: it now sits after what hid it.
                current_at, hidden = record.offset, False
            elif isinstance(parsed, Schedule):
                # A copy of an older version lands after the held one: it hides it.
                hidden = hidden or _hides(record.source, current)
                retire(parsed, record.offset, newest)
        elif isinstance(parsed, Cancel):
            kind = Kind.UNKNOWN_CANCEL if current is None else Kind.CANCELLED
            events.append(HoldEvent(kind, now_ms, parsed.id))
            retire(current, current_at, source)
            current, current_at, newest, hidden = None, None, source, False
        elif notice is not None and _short(notice, parsed, source, record):
            events.append(HoldEvent(Kind.DIRECT, now_ms, parsed.id))
            retire(current, current_at, source)
            current, current_at, newest, hidden = None, None, source, False
        else:
            retire(current, current_at, source)
            current, current_at, newest, hidden = parsed, record.offset, source, False
    return _settle(held, current, hidden, events, now_ms, max_lateness_ms, lead_ms)


def raise_ms(due_ms: int, lead_ms: int) -> int:
    """When a version due at ``due_ms`` is handed to the fire stage: its timer."""
    return due_ms - lead_ms


BURST_LEAD_MS = 30_000
"""How long before its due time the JVM hold raises a version of a burst (one of many
due in the same second): the batch that raises 50,000 and the committers that write them
took several seconds here, more than the default lead."""
BURST_DENSE = 500
"""A version is one of a burst when more than this many planned in the same batch and
task of the hold share its due second (a task holds a share of the keys): 50,000 due in
one second, written at 6,000/s, put 2,500-3,000 a batch in each of two tasks; 5,000/s
due over 10-30 s, 100-400."""


def burst_raise_ms(due_ms: int, lead_ms: int) -> int:
    """When the JVM hold raises a version of a burst due at ``due_ms`` (its timer, unless
    that time has come), under a lead of ``lead_ms``: the start of its due second less
    the longer of the two leads, so one timer time serves the second (the waker wakes
    once for it and one batch raises it); never later than at the lead."""
    return due_ms // 1000 * 1000 - max(lead_ms, BURST_LEAD_MS)


def timer_event(schedule: Schedule, now_ms: int, max_lateness_ms: int | None = None) -> HoldEvent:
    """The event of a held version whose timer is due: RAISE, or DEAD when expired."""
    if max_lateness_ms is not None and now_ms - schedule.due_ms > max_lateness_ms:
        return HoldEvent(Kind.DEAD, now_ms, schedule.id, schedule=schedule, reason=EXPIRED)
    return HoldEvent(Kind.RAISE, now_ms, schedule.id, schedule=schedule)


def _short(
    notice: NoticeRules, schedule: Parsed, source: SourceRef, record: ConsumedRecord
) -> bool:
    """Whether ``schedule`` (its place ``source``), read as ``record``, is of short
    notice; a copy (read after the place it names) never is."""
    if not isinstance(schedule, Schedule) or source.offset != record.offset:
        return False
    short = notice.short(
        record.topic, record.partition, record.offset, record.timestamp_ms, schedule.due_ms
    )
    return short is not None


def _own_tombstone(fired_offset: int, source: SourceRef, held: Schedule | None) -> tuple[str, bool]:
    """(event kind, whether the tombstone hides the held version from compaction)."""
    if held is None:
        return Kind.OWN_TOMBSTONE, False
    held_at = held.require_source()
    if held_at.partition == source.partition and held_at.offset <= fired_offset:
        return Kind.CANCELLED, False
    # Our tombstone of an older, fired version: the held one is newer and stays.
    return Kind.STALE, _hides(source, held)


def _same_place(source: SourceRef, held: Schedule | None) -> bool:
    """Whether ``source`` is the place of ``held`` (a copy of it names that place)."""
    at = None if held is None else held.source
    return at is not None and (at.partition, at.offset) == (source.partition, source.offset)


def _hides(source: SourceRef, held: Schedule | None) -> bool:
    """Whether compaction would keep the record at ``source`` instead of ``held``."""
    if held is None:
        return False
    held_at = held.require_source()
    return held_at.partition == source.partition and source.offset > held_at.offset


def _settle(
    before: Schedule | None,
    held: Schedule | None,
    hidden: bool,
    events: list[HoldEvent],
    now_ms: int,
    max_lateness_ms: int | None,
    lead_ms: int,
) -> Folded:
    """Act on the folded result: rewrite, fire at once, or (re)set the timer."""
    if hidden and held is not None and raise_ms(held.due_ms, lead_ms) > now_ms:
        events.append(HoldEvent(Kind.REWRITE, now_ms, held.id, schedule=held))
    if held is before:
        return Folded(held, events)
    timer_from = None if before is None else raise_ms(before.due_ms, lead_ms)
    if held is None:
        return Folded(None, events, timer_from)
    if raise_ms(held.due_ms, lead_ms) <= now_ms:
        kind = Kind.MISSED if held.due_ms <= now_ms else Kind.SHORT
        events.append(HoldEvent(kind, now_ms, held.id))
        events.append(timer_event(held, now_ms, max_lateness_ms))
        return Folded(None, events, timer_from)
    kind = Kind.PLANNED if before is None else Kind.UPDATED
    events.append(HoldEvent(kind, now_ms, held.id, due_ms=held.due_ms))
    return Folded(held, events, timer_from, raise_ms(held.due_ms, lead_ms))
