"""The fire stage as a ``foreachBatch`` sink: event rows to Kafka records, one transaction."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from delayline.contract import (
    OutgoingRecord,
    render_dead_letter,
    render_delivery,
    render_history,
    render_schedule,
    render_tombstone,
)
from delayline.core.clock import Clock, SystemClock
from delayline.fire.transactional import Firing, TransactionalFirer
from delayline.pipeline import rows as r
from delayline.pipeline.config import PipelineConfig
from delayline.stores.hold import Hold

log = logging.getLogger(__name__)


REFUSED = "refused"
"""How the fire stage counts a due schedule whose delivery the cluster refused (it went
to the dead-letter topic instead): not ``fire``."""


@dataclass(slots=True)
class BatchReport:
    """What one micro-batch did, for the progress line and for tests.

    Attributes:
        batch_id: Spark's batch id.
        counts: Events by kind (see :data:`delayline.pipeline.rows.KINDS`), dead letters
            split into ``invalid`` and ``expired``; ``fire`` counts deliveries made, and
            those the cluster refused count as :data:`REFUSED` instead.
        lateness_ms: Commit time minus due time of each delivery of a schedule that
            was not yet due when it arrived.
        committed: False when the batch was a replay and wrote nothing.
        finished_ms: When the batch finished (set by the sink from its clock).
        missed_lateness_ms: The same for schedules already past due when they arrived
            (``missed``, fired at once): how late they were written, not how late
            delayline was, so kept out of ``lateness_ms``.
    """

    batch_id: int
    counts: Counter[str] = field(default_factory=Counter)
    lateness_ms: list[int] = field(default_factory=list)
    committed: bool = True
    finished_ms: int = 0
    missed_lateness_ms: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Counts with the lateness lists reduced to count, p50 and max (for ``/progress``)."""
        late = sorted(self.lateness_ms)
        missed = sorted(self.missed_lateness_ms)
        return {
            "batch_id": self.batch_id,
            "finished_ms": self.finished_ms,
            "committed": self.committed,
            "counts": dict(self.counts),
            "deliveries": len(late) + len(missed),
            "lateness_p50_ms": late[len(late) // 2] if late else None,
            "lateness_max_ms": late[-1] if late else None,
            "missed_deliveries": len(missed),
            "missed_lateness_max_ms": missed[-1] if missed else None,
        }

    def to_json(self) -> str:
        """One line for ``--progress-file``: ids and counts, never payloads."""
        return json.dumps(
            {
                "batch_id": self.batch_id,
                "finished_ms": self.finished_ms,
                "committed": self.committed,
                "counts": dict(self.counts),
                "lateness_ms": self.lateness_ms,
                "missed_lateness_ms": self.missed_lateness_ms,
            }
        )


def to_records(row: Any, config: PipelineConfig) -> list[OutgoingRecord]:
    """The Kafka records one event row turns into (none for bookkeeping kinds)."""
    kind = row["kind"]
    if kind == r.FIRE:
        schedule = r.event_schedule(row)
        out = [render_delivery(schedule), render_tombstone(schedule)]
        if config.topology.history_topic:
            out.append(render_history(schedule, config.topology.history_topic))
        return out
    if kind == r.RETIRE:
        return [render_tombstone(r.event_schedule(row))]
    if kind == r.REWRITE:
        schedule = r.event_schedule(row)
        source = r.event_source(row)
        again = render_schedule(schedule, source.topic, source.partition)
        return [replace(again, timestamp_ms=source.timestamp_ms)]
    if kind == r.DEAD:
        dead = render_dead_letter(
            r.event_record(row), r.dead_reason(row), config.topology.dead_letter_topic
        )
        if row["due_ms"] is None:
            return [dead]
        # An expired schedule is finished: forget it as after a delivery.
        return [dead, render_tombstone(r.event_schedule(row))]
    return []


class FireSink:
    """Callable handed to ``foreachBatch``. Runs on the driver.

    Args:
        config: The pipeline settings.
        firer: The transactional writer.
        run_id: Returns the id of the current run (the checkpoint's query id);
            markers of an earlier run (before ``--rebuild``) do not apply.
        on_batch: Called with each batch's report.
        on_timers: Called with the due times of the timers each batch registered
            (before the batch commits; a replay reports them again).
        hold: Where the batch's events come from, told when the batch is done.
        clock: The time source of commit times and lateness.
    """

    def __init__(
        self,
        config: PipelineConfig,
        firer: TransactionalFirer,
        run_id: Callable[[], str],
        on_batch: Callable[[BatchReport], None] = lambda _report: None,
        on_timers: Callable[[list[int]], None] | None = None,
        *,
        hold: Hold,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.hold = hold
        self.clock = clock or SystemClock()
        self.firer = firer
        self.run_id = run_id
        self.on_batch = on_batch
        self.on_timers = on_timers

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = self.hold.batch_events(frame, batch_id)
        report = BatchReport(batch_id)
        batch = self._plan(rows, report)
        if batch.timers and self.on_timers is not None:
            self.on_timers(batch.timers)
        if batch.records:
            run = f"{self.config.query_name}@{self.run_id()}"
            outcome = self.firer.commit_batch(run, batch_id, batch.records)
            report.committed = not outcome.replay
            if report.committed:
                _account(report, batch.fires, outcome.refused, self.clock.now_ms())
        if report.committed:
            self.hold.after_commit(batch_id)
            _log_dead_letters(batch_id, rows)
        report.finished_ms = self.clock.now_ms()
        self.on_batch(report)

    def _plan(self, rows: Sequence[Any], report: BatchReport) -> _Batch:
        """Count ``rows`` into ``report`` and turn them into what the batch writes."""
        topology = self.config.topology
        batch = _Batch()
        missed: set[str] = set()  # ids that arrived past due, until their FIRE or DEAD row
        for row in rows:
            kind = row["kind"]
            report.counts[_count_kind(row)] += 1
            if kind == r.MISSED:
                missed.add(row["id"])
            elif kind == r.FIRE:  # a refused delivery becomes a dead letter
                batch.fires[len(batch.records)] = (int(row["due_ms"]), row["id"] in missed)
                missed.discard(row["id"])
                schedule = r.event_schedule(row)
                firing = Firing(schedule, topology.dead_letter_topic, topology.history_topic)
                batch.records.append(firing)
            else:
                if kind == r.DEAD:
                    missed.discard(row["id"])
                batch.records.extend(to_records(row, self.config))
            if kind in r.TIMER_KINDS and row["due_ms"] is not None:
                batch.timers.append(int(row["due_ms"]))
        return batch


@dataclass(slots=True)
class _Batch:
    """What one batch writes: its records, and for each :class:`Firing` among them
    (by position) its due time and whether it arrived past due; the timers it set."""

    records: list[OutgoingRecord | Firing] = field(default_factory=list)
    fires: dict[int, tuple[int, bool]] = field(default_factory=dict)
    timers: list[int] = field(default_factory=list)


def _account(
    report: BatchReport,
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
        report.counts[r.FIRE] -= len(refused)
        report.counts[REFUSED] += len(refused)


def _log_dead_letters(batch_id: int, rows: Sequence[Any]) -> None:
    """One line per invalid or expired record the batch dead-lettered: id, source
    position and reason, never the payload (refused deliveries are logged by
    :meth:`TransactionalFirer.commit_batch`)."""
    for row in rows:
        if row["kind"] != r.DEAD:
            continue
        source = r.event_source(row).describe()
        sid = row["id"] or _key_text(row["key"])
        if sid is None:
            log.info("batch %d: record %s dead-lettered: %s", batch_id, source, r.dead_reason(row))
        else:
            log.info(
                "batch %d: schedule %r (from %s) dead-lettered: %s",
                batch_id,
                sid,
                source,
                r.dead_reason(row),
            )


def _key_text(key: bytes | None) -> str | None:
    """The key of an invalid record as the schedule id it was meant to be: UTF-8 text
    of at most 200 characters, else ``None``."""
    try:
        text = bytes(key or b"").decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text[:200] or None


def _count_kind(row: Any) -> str:
    if row["kind"] == r.DEAD:
        return r.INVALID if row["due_ms"] is None else r.EXPIRED
    return str(row["kind"])


def checkpoint_query_id(checkpoint_dir: Path) -> str:
    """The query id Spark stores in the checkpoint; new after ``--rebuild``."""
    metadata = (checkpoint_dir / "metadata").read_text()
    return str(json.loads(metadata.splitlines()[0])["id"])
