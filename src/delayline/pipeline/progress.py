"""What the pipeline reports of its progress: one log line per micro-batch, and Spark's
own progress to the metrics and the Spark progress file."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from delayline.contract import events as r
from delayline.core.units import format_duration_ms
from delayline.fire.report import HANDED, REFUSED, BatchReport
from delayline.pipeline.metrics import PipelineMetrics

log = logging.getLogger(__name__)


QUEUED_REPORTS = 1000
"""Reports the JVM keeps between two drains by default (a drain a second takes them all)."""


class ProgressFeed:
    """Spark's progress reports, to the metrics and the Spark progress file.

    A Java listener in the hold jar (``dev.delayline.progress.ProgressQueue``) queues
    each report as JSON; :meth:`drain`
    takes them all with one call. A Python ``StreamingQueryListener`` would instead make
    PySpark rebuild every report field by field over py4j: a quarter of a core at a
    trickle of 10 schedules/s here.

    Args:
        spark: A classic session whose class path has the hold jar.
        metrics: Fed every report, if given.
        progress_file: A line per report is appended here, if given.
        capacity: The most reports kept between two drains; older ones are dropped.
    """

    def __init__(
        self,
        spark: SparkSession,
        metrics: PipelineMetrics | None,
        progress_file: Path | None,
        *,
        capacity: int = QUEUED_REPORTS,
    ) -> None:
        self.metrics = metrics
        self.progress_file = progress_file
        jvm = spark.sparkContext._jvm
        assert jvm is not None  # a running SparkContext always has its gateway
        self._streams = spark._jsparkSession.streams()
        self._queue = jvm.dev.delayline.progress.ProgressQueue(capacity)
        self._streams.addListener(self._queue)

    def drain(self) -> int:
        """Hand on every report queued so far; how many there were."""
        reports = [json.loads(text) for text in self._queue.drain()]
        if reports and self.metrics is not None:
            self.metrics.observe_progress(reports)
        if reports and self.progress_file is not None:
            with self.progress_file.open("a") as out:
                for progress in reports:
                    out.write(json.dumps(_file_line(progress)) + "\n")
        return len(reports)

    def close(self) -> None:
        """Stop listening, after handing on what is queued."""
        self._streams.removeListener(self._queue)
        self.drain()


def _file_line(progress: dict[str, Any]) -> dict[str, Any]:
    return {
        "batch_id": progress.get("batchId"),
        "num_input_rows": progress.get("numInputRows"),
        "duration_ms": progress.get("durationMs"),
        "state": [
            {k: op.get(k) for k in _STATE_FIGURES} for op in progress.get("stateOperators") or []
        ],
    }


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
        "batch %d: fired %d%s, handed to the committer %d, planned %d, updated %d "
        "(of both, raised early %d), cancelled %d, unknown cancels %d, missed %d%s, invalid %d, "
        "expired %d, refused %d, stale %d%s",
        report.batch_id,
        c[r.Kind.RAISE],
        lateness,
        c[HANDED],
        c[r.Kind.PLANNED],
        c[r.Kind.UPDATED],
        c[r.Kind.EARLY],
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
