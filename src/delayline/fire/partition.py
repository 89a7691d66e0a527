"""Fire one partition of a micro-batch's events: its records in one Kafka transaction.

Runs where the events are (a Spark task on an executor), so firing scales with the
executors and the driver receives only a :class:`PartitionReport`: counts, lateness,
timers and log lines, never an event row. The transaction carries the marker of
``(run, partition)`` at this batch id: a replayed task finds it and writes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from delayline.contract import (
    OutgoingRecord,
    render_dead_letter,
    render_delivery,
    render_history,
    render_rewrite,
    render_tombstone,
)
from delayline.contract import events as r
from delayline.contract.contracts import InputParser, compacted
from delayline.core.clock import Clock
from delayline.core.identifiers import partition_marker_key
from delayline.core.model import Schedule
from delayline.fire.firing import Firing
from delayline.fire.handover import POSITION, Handover
from delayline.fire.inflight import render_inflight
from delayline.fire.record_size import batch_size
from delayline.fire.report import HANDED, REFUSED, BatchReport
from delayline.fire.transactional import FireError, TransactionalFirer
from delayline.holds.hold import RunSettings
from delayline.holds.registry import hold_kind
from delayline.kafka.topics import INFLIGHT_MAX_BYTES

MAX_NOTES = 1_000
"""Log lines (dead letters, refusals) one partition reports per batch; the rest are
counted in one more line."""


@dataclass(slots=True)
class PartitionReport:
    """What firing one partition of a batch did.

    Attributes:
        partition: The partition (Spark task) of the batch's events.
        counts: Events by kind, as in :class:`BatchReport`.
        lateness_ms: Commit time minus due time of each on-time delivery made.
        missed_lateness_ms: The same for schedules past due on arrival.
        timers: Wake slots of the timers the batch set in this partition, to how many
            each holds (filled by the task from all its events; :func:`fire_rows` sees
            only rows that write).
        notes: Log lines about dead letters and refusals: ids, sources, reasons.
        replay: The partition's records were committed before: nothing was written.
        executor: Which executor ran the task (``<host>/<executor id>``).
    """

    partition: int
    counts: Counter[str] = field(default_factory=Counter)
    lateness_ms: list[int] = field(default_factory=list)
    missed_lateness_ms: list[int] = field(default_factory=list)
    timers: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    replay: bool = False
    executor: str = ""


def merge(batch_id: int, parts: Sequence[PartitionReport]) -> BatchReport:
    """One report of a batch from those of its partitions."""
    report = BatchReport(batch_id)
    for part in parts:
        report.counts.update(part.counts)
        report.lateness_ms.extend(part.lateness_ms)
        report.missed_lateness_ms.extend(part.missed_lateness_ms)
        report.committed = report.committed and not part.replay
        if part.executor:
            done = report.executors.setdefault(part.executor, Counter())
            done["tasks"] += 1
            for kind in (r.Kind.RAISE, HANDED):
                done[kind] += part.counts.get(kind, 0)
    return report


def to_records(row: Any, config: RunSettings) -> list[OutgoingRecord]:
    """The Kafka records one event row turns into (none for bookkeeping kinds)."""
    kind = row["kind"]
    if kind == r.Kind.REWRITE and not compacted(config.topology.contract_of(row["src_topic"])):
        # It writes the header contract's record; only compaction needs it, and the
        # topics of other contracts are not compacted. (A retire is delayline's own
        # tombstone, which every contract reads: it keeps a replaced version from
        # coming back in a rebuild.)
        return []
    if kind == r.Kind.RAISE:
        schedule = r.event_schedule(row)
        out = [render_delivery(schedule), render_tombstone(schedule)]
        if config.topology.history_topic:
            out.append(render_history(schedule, config.topology.history_topic))
        return out
    if kind == r.Kind.RETIRE:
        return [render_tombstone(r.event_schedule(row))]
    if kind == r.Kind.ROUTE:
        render = hold_kind(config.hold).render
        if render is None:
            raise FireError(f"the {config.hold} hold has no ROUTE events")
        return render(row, config.hold_settings, config.lead_ms)
    if kind == r.Kind.REWRITE:
        return [render_rewrite(r.event_schedule(row))]
    if kind == r.Kind.DEAD:
        reason = r.dead_reason(row, InputParser(config.topology))
        dead = render_dead_letter(r.event_record(row), reason, config.topology.dead_letter_topic)
        if row["due_ms"] is None:
            return [dead]
        # An expired schedule is finished: forget it as after a delivery.
        return [dead, render_tombstone(r.event_schedule(row))]
    return []


def fire_rows(
    rows: Sequence[Any],
    partition: int,
    batch_id: int,
    run: str,
    config: RunSettings,
    firer: TransactionalFirer,
    clock: Clock,
    *,
    refresh: bool = False,
    handover: Handover | None = None,
    plan: str | None = None,
) -> PartitionReport:
    """Write what ``rows`` and ``handover`` (one partition's events) ask for, exactly once.

    Args:
        rows: Event rows (:data:`delayline.contract.events.EVENT_SCHEMA`), mappings by name.
        partition: Which partition they are; part of the marker.
        batch_id: Spark's batch id.
        run: The run (query name and checkpoint id); markers of other runs do not apply.
        config: The pipeline settings.
        firer: The transactional writer of this partition.
        clock: The time of the commit, for lateness; a schedule not yet due by it is
            handed to the committer (with a lead).
        refresh: Read the markers afresh: this batch may have been committed by another
            process (a replay after a restart, a retried task).
        handover: The partition's other raised schedules, rendered column-wise; their
            records are written in the order of the events' positions with those of
            ``rows`` (which then carry :data:`~delayline.fire.handover.POSITION`).
        plan: The mark of the tombstones of the schedules handed over
            (:attr:`delayline.holds.hold.Hold.tombstone_mark`); ``None``: unmarked.

    Raises:
        FireError: the transaction failed; nothing of it is visible.
    """
    report = PartitionReport(partition)
    batch = _plan(rows, handover or Handover(), report, config, (batch_id, plan), clock.now_ms())
    if batch.records:
        outcome = firer.commit_batch(
            partition_marker_key(run, partition), batch_id, batch.records, refresh=refresh, also=run
        )
        report.replay = outcome.replay
        if report.replay:
            return report
        _account(report, batch.fires, outcome.refused, clock.now_ms())
        for i, reason in sorted(outcome.refused.items()):
            item = batch.records[i]
            if isinstance(item, Firing):
                source = item.schedule.require_source().describe()
                report.notes.append(
                    f"schedule {item.schedule.id!r} (from {source}) dead-lettered: {reason}"
                )
    for row in rows:
        if row["kind"] == r.Kind.DEAD:
            report.notes.append(_dead_letter_line(row, InputParser(config.topology)))
    if len(report.notes) > MAX_NOTES:
        more = len(report.notes) - MAX_NOTES
        report.notes = [*report.notes[:MAX_NOTES], f"... and {more} more dead letter(s)"]
    return report


@dataclass(slots=True)
class _Batch:
    """What one batch writes: its records, and for each :class:`Firing` among them
    (by position) its due time and whether it arrived past due."""

    records: list[OutgoingRecord | Firing] = field(default_factory=list)
    fires: dict[int, tuple[int, bool]] = field(default_factory=dict)


def _plan(
    rows: Sequence[Any],
    handover: Handover,
    report: PartitionReport,
    config: RunSettings,
    handed_by: tuple[int, str | None],
    now_ms: int,
) -> _Batch:
    """Count ``rows`` into ``report`` and turn them into what the batch writes, with the
    records of ``handover`` in the order of the events' positions: with a lead every
    schedule that fires is handed to the committer (in-flight records of ``handed_by``:
    the batch id, and the mark of its tombstones);
    without one it is delivered in the batch."""
    batch = _Batch()
    if handover:
        report.counts[HANDED] += len(handover)
    handed = 0  # the handover's schedules written so far
    missed: set[str] = set()  # ids that arrived past due, until their RAISE or DEAD row
    for row in rows:
        if handover:
            earlier, handed = handover.before(row[POSITION], handed)
            batch.records.extend(earlier)
        kind = row["kind"]
        report.counts[_count_kind(row)] += 1
        if kind == r.Kind.MISSED:
            missed.add(row["id"])
        elif kind == r.Kind.RAISE:
            schedule = r.event_schedule(row)
            _raised(schedule, row["id"] in missed, batch, report, config, handed_by, now_ms)
            missed.discard(row["id"])
        else:
            if kind == r.Kind.DEAD:
                missed.discard(row["id"])
            batch.records.extend(to_records(row, config))
    batch.records.extend(handover.records[2 * handed :])
    return batch


def _raised(
    schedule: Schedule,
    past_due: bool,
    batch: _Batch,
    report: PartitionReport,
    config: RunSettings,
    handed_by: tuple[int, str | None],
    now_ms: int,
) -> None:
    """Add what a raised ``schedule`` writes to ``batch``: its in-flight record (of
    ``handed_by``: the batch id, and the mark of its tombstone) and tombstone when it
    goes to the committer (:func:`_handed_over`), a
    dead letter when it should but is too large for the in-flight topic (delivered in
    the batch, it would be a lead early), else its delivery in the batch (dead-lettered
    if refused). ``past_due``: it arrived past due."""
    topology = config.topology
    batch_id, plan = handed_by
    if not _handed_over(schedule, config):
        batch.fires[len(batch.records)] = (schedule.due_ms, past_due)
        batch.records.append(Firing(schedule, topology.dead_letter_topic, topology.history_topic))
        return
    report.counts[r.Kind.RAISE] -= 1
    handed = render_inflight(
        schedule,
        config.inflight_topic_name,
        batch_id,
        missed=past_due,
        partitions=config.inflight_partitions,
    )
    if batch_size(handed) > INFLIGHT_MAX_BYTES:
        report.counts[REFUSED] += 1
        reason = f"larger than the in-flight limit ({INFLIGHT_MAX_BYTES} B)"
        batch.records.extend(Firing(schedule, topology.dead_letter_topic).refused(reason))
        report.notes.append(f"schedule {schedule.id!r} dead-lettered: {reason}")
        return
    report.counts[HANDED] += 1
    if past_due:  # how late it was written; the committer delivers it now
        report.missed_lateness_ms.append(now_ms - schedule.due_ms)
    batch.records.append(handed)
    if not topology.recurs(schedule):  # the committer re-arms or forgets it
        batch.records.append(render_tombstone(schedule, plan))


def _handed_over(schedule: Schedule, config: RunSettings) -> bool:
    """Whether ``schedule``, raised, goes to the committer: with a lead, whatever it is;
    one already due too (the committer delivers it at once, after its watch had its say:
    a cancel written while a batch that hands it over is replayed after a crash wins). A
    recurring schedule whatever the lead: the committer alone re-arms it; so a paced one
    (a window, or a target with a rate): the committer alone paces."""
    return config.lead_ms > 0 or _committer_only(schedule, config)


def _committer_only(schedule: Schedule, config: RunSettings) -> bool:
    """Whether only the committer may deliver ``schedule``: it recurs, or is paced."""
    topology = config.topology
    return (
        topology.recurs(schedule)
        or topology.windowed(schedule)
        or config.target_rates.of(schedule.target_topic) is not None
    )


def _account(
    report: PartitionReport,
    fires: Mapping[int, tuple[int, bool]],
    refused: Mapping[int, str],
    committed_ms: int,
) -> None:
    """Lateness of each delivery made (on time, or past due on arrival); refused ones
    counted as :data:`REFUSED`, not as fired."""
    for i, (due_ms, past_due) in fires.items():
        if i in refused:
            continue
        late = report.missed_lateness_ms if past_due else report.lateness_ms
        late.append(committed_ms - due_ms)
    if refused:
        report.counts[r.Kind.RAISE] -= len(refused)
        report.counts[REFUSED] += len(refused)


def _dead_letter_line(row: Any, parse: InputParser) -> str:
    """One line about an invalid or expired record: id, source and reason, never the
    payload."""
    source = r.event_source(row).describe()
    sid = row["id"] or _key_text(row["key"])
    reason = r.dead_reason(row, parse)
    if sid is None:
        return f"record {source} dead-lettered: {reason}"
    return f"schedule {sid!r} (from {source}) dead-lettered: {reason}"


def _key_text(key: bytes | None) -> str | None:
    """The key of an invalid record as the schedule id it was meant to be: UTF-8 text
    of at most 200 characters, else ``None``."""
    try:
        text = bytes(key or b"").decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text[:200] or None


def _count_kind(row: Any) -> str:
    if row["kind"] == r.Kind.DEAD:
        return r.INVALID if row["due_ms"] is None else r.EXPIRED
    return str(row["kind"])
