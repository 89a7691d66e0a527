"""The fire stage as a ``foreachBatch`` sink: event rows to Kafka records, one transaction."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable
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


@dataclass(slots=True)
class BatchReport:
    """What one micro-batch did, for the progress line and for tests.

    Attributes:
        batch_id: Spark's batch id.
        counts: Events by kind (see :data:`delayline.pipeline.rows.KINDS`), dead letters
            split into ``invalid`` and ``expired``.
        lateness_ms: Commit time minus due time of each delivery.
        committed: False when the batch was a replay and wrote nothing.
    """

    batch_id: int
    counts: Counter[str] = field(default_factory=Counter)
    lateness_ms: list[int] = field(default_factory=list)
    committed: bool = True
    finished_ms: int = 0
    """When the batch finished (set by the sink from its clock)."""

    def summary(self) -> dict[str, Any]:
        """Counts with the lateness list reduced to count, p50 and max (for ``/progress``)."""
        late = sorted(self.lateness_ms)
        return {
            "batch_id": self.batch_id,
            "finished_ms": self.finished_ms,
            "committed": self.committed,
            "counts": dict(self.counts),
            "deliveries": len(late),
            "lateness_p50_ms": late[len(late) // 2] if late else None,
            "lateness_max_ms": late[-1] if late else None,
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
            r.event_record(row), row["reason"], config.topology.dead_letter_topic
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
        records: list[OutgoingRecord | Firing] = []
        timers: list[int] = []
        for row in rows:
            report.counts[_count_kind(row)] += 1
            if row["kind"] == r.FIRE:  # a refused delivery becomes a dead letter
                topology = self.config.topology
                schedule = r.event_schedule(row)
                records.append(Firing(schedule, topology.dead_letter_topic, topology.history_topic))
            else:
                records.extend(to_records(row, self.config))
            if row["kind"] in r.TIMER_KINDS and row["due_ms"] is not None:
                timers.append(int(row["due_ms"]))
        if timers and self.on_timers is not None:
            self.on_timers(timers)
        if records:
            run = f"{self.config.query_name}@{self.run_id()}"
            report.committed = self.firer.commit_batch(run, batch_id, records)
            committed_ms = self.clock.now_ms()
            if report.committed:
                report.lateness_ms = [
                    committed_ms - int(row["due_ms"]) for row in rows if row["kind"] == r.FIRE
                ]
        if report.committed:
            self.hold.after_commit(batch_id)
        report.finished_ms = self.clock.now_ms()
        self.on_batch(report)


def _count_kind(row: Any) -> str:
    if row["kind"] == r.DEAD:
        return r.INVALID if row["due_ms"] is None else r.EXPIRED
    return str(row["kind"])


def checkpoint_query_id(checkpoint_dir: Path) -> str:
    """The query id Spark stores in the checkpoint; new after ``--rebuild``."""
    metadata = (checkpoint_dir / "metadata").read_text()
    return str(json.loads(metadata.splitlines()[0])["id"])
