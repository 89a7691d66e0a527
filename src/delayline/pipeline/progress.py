"""What the pipeline reports of its progress: one log line per micro-batch, and Spark's
own progress to the metrics and the Spark progress file."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from delayline.contract import events as r
from delayline.core.units import format_duration_ms
from delayline.fire.report import HANDED, REFUSED, BatchReport
from delayline.pipeline.metrics import PipelineMetrics

log = logging.getLogger(__name__)


class ProgressListener(StreamingQueryListener):
    """Feeds Spark's progress reports to the metrics and the Spark progress file (runs on
    a py4j callback thread)."""

    def __init__(self, metrics: PipelineMetrics | None, progress_file: Path | None) -> None:
        self.metrics = metrics
        self.progress_file = progress_file

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        if self.metrics is not None:
            self.metrics.observe_progress([event.progress])
        if self.progress_file is not None:
            progress = json.loads(event.progress.json)
            line = {
                "batch_id": progress.get("batchId"),
                "num_input_rows": progress.get("numInputRows"),
                "duration_ms": progress.get("durationMs"),
                "state": [
                    {k: op.get(k) for k in _STATE_FIGURES}
                    for op in progress.get("stateOperators") or []
                ],
            }
            with self.progress_file.open("a") as out:
                out.write(json.dumps(line) + "\n")

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


_STATE_FIGURES = ("numRowsTotal", "numRowsUpdated", "allUpdatesTimeMs", "allRemovalsTimeMs",
                  "commitTimeMs", "memoryUsedBytes", "customMetrics")  # fmt: skip


def log_batch(report: BatchReport) -> None:
    """The batch's INFO line (none for a batch that only read delayline's own tombstones)."""
    c = report.counts
    if not c or set(c) == {r.Kind.OWN_TOMBSTONE}:
        return
    lateness = ""
    if late := sorted(report.lateness_ms):
        p50, worst = format_duration_ms(late[len(late) // 2]), format_duration_ms(late[-1])
        lateness = f" (lateness p50 {p50}, max {worst})"
    past_due = ""
    if report.missed_lateness_ms:
        past_due = f" (up to {format_duration_ms(max(report.missed_lateness_ms))} past due)"
    replay = "" if report.committed else " (replay, skipped)"
    log.info(
        "batch %d: fired %d%s, handed to the committer %d, planned %d, updated %d, "
        "cancelled %d, unknown cancels %d, missed %d%s, invalid %d, expired %d, refused %d, "
        "stale %d%s",
        report.batch_id,
        c[r.Kind.RAISE],
        lateness,
        c[HANDED],
        c[r.Kind.PLANNED],
        c[r.Kind.UPDATED],
        c[r.Kind.CANCELLED],
        c[r.Kind.UNKNOWN_CANCEL],
        c[r.Kind.MISSED],
        past_due,
        c[r.INVALID],
        c[r.EXPIRED],
        c[REFUSED],
        c[r.Kind.STALE],
        replay,
    )
