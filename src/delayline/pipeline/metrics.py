"""Prometheus metrics of the pipeline and of a committer, and what ``/progress`` answers
(the last batch's counts and Spark's last progress; the API's ``/info`` reads it). The
server of both, and of ``/readyz``: :mod:`delayline.pipeline.metrics_server`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.registry import Collector

from delayline.committer.config import CommitterStatus
from delayline.contract import kinds as r
from delayline.core.heap import PAUSES
from delayline.core.histogram import BatchHistogram
from delayline.fire.report import HANDED, REFUSED, WITHHELD, BatchReport, Delivered
from delayline.pipeline.collectors import (
    GcCollector,
    InflightCollector,
    PacingCollector,
    ReadyCollector,
    ReviewsCollector,
    WakerCollector,
)
from delayline.pipeline.config import batch_work_ms
from delayline.pipeline.input_lag import InputLag, batch_ends
from delayline.pipeline.wake import WakerStats

log = logging.getLogger(__name__)

LATENESS_BUCKETS_S = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    1.5,
    2,
    3,
    5,
    10,
    30,
    60,
    300,
)
MISSED_LATENESS_BUCKETS_S = (1, 10, 60, 600, 3600, 6 * 3600, 86_400, 7 * 86_400, 30 * 86_400)
"""A schedule written past due may be seconds or years late: minutes to a month."""

# Event kinds counted, by metric name suffix. ``received`` comes from Spark's input rows.
_COUNTED = {
    "planned": (r.Kind.PLANNED,),
    "updated": (r.Kind.UPDATED,),
    "cancelled": (r.Kind.CANCELLED,),
    "unknown_cancels": (r.Kind.UNKNOWN_CANCEL,),
    "invalid": (r.INVALID,),
    "missed": (r.Kind.MISSED,),
    "short_notice": (r.Kind.SHORT,),
    "raised_early": (r.Kind.EARLY,),
    "expired": (r.EXPIRED,),
    "stale": (r.Kind.STALE,),
    "retired": (r.Kind.RETIRE,),
    "refused": (REFUSED,),
    "handed": (HANDED,),
    "withheld": (WITHHELD,),
}


class PipelineMetrics:
    """Counters, the lateness histogram, the pending gauge and batch durations."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.received = Counter(
            "delayline_schedules_received",
            "Records read from the schedules topics.",
            registry=self.registry,
        )
        self.events = {
            name: Counter(
                f"delayline_schedules_{name}",
                f"Schedules {name.replace('_', ' ')} (see docs/metrics).",
                registry=self.registry,
            )
            for name in _COUNTED
        }
        self.fired = Counter(
            "delayline_schedules_fired",
            "Schedules delivered (committed transactions only).",
            registry=self.registry,
        )
        self.executor_tasks = Counter(
            "delayline_executor_tasks",
            "Fire tasks run, by executor (<host>/<executor id>): where the work happens.",
            ["executor"],
            registry=self.registry,
        )
        self.executor_written = Counter(
            "delayline_executor_schedules_written",
            "Schedules an executor's fire tasks delivered (kind=fire) or handed to the "
            "committer (kind=handed), committed batches only.",
            ["executor", "kind"],
            registry=self.registry,
        )
        self.lateness = BatchHistogram(
            "delayline_lateness_seconds",
            "Commit time of a delivery minus its due time (schedules not yet due on arrival).",
            LATENESS_BUCKETS_S,
            registry=self.registry,
        )
        self.missed_lateness = BatchHistogram(
            "delayline_missed_lateness_seconds",
            "Commit time of a delivery minus its due time, for schedules already past due "
            "when they arrived (fired at once).",
            MISSED_LATENESS_BUCKETS_S,
            registry=self.registry,
        )
        self.pending = Gauge(
            "delayline_schedules_pending",
            "Schedules held in state (Spark's state rows after the last batch).",
            registry=self.registry,
        )
        self.batch_duration = Histogram(
            "delayline_batch_duration_seconds",
            "Micro-batch duration (Spark's triggerExecution less the source's wait for "
            "work in latestOffset).",
            buckets=(0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.last_batch = Gauge(
            "delayline_last_batch_timestamp_seconds",
            "When the last micro-batch finished.",
            registry=self.registry,
        )
        self.committer_delivered = Counter(
            "delayline_committer_delivered",
            "Schedules a committer delivered (committed transactions only).",
            ["committer"],
            registry=self.registry,
        )
        self.committer_lateness = BatchHistogram(
            "delayline_committer_lateness_seconds",
            "Commit time of a committer's delivery minus its due time.",
            LATENESS_BUCKETS_S,
            ["committer"],
            registry=self.registry,
        )
        self.committer_partitions = Gauge(
            "delayline_committer_partitions",
            "In-flight partitions a committer owns, by in-flight topic.",
            ["committer", "topic"],
            registry=self.registry,
        )
        self.committer_arrived_due = Counter(
            "delayline_committer_arrived_due",
            "Schedules a committer read only once already due: handed over too late for "
            "the lead (a micro-batch took longer than it, or the schedule arrived so).",
            ["committer"],
            registry=self.registry,
        )
        self.committer_pending = Gauge(
            "delayline_committer_pending",
            "Schedules a committer read and has not delivered yet.",
            ["committer"],
            registry=self.registry,
        )
        self.committer_remembered = Gauge(
            "delayline_committer_watch_remembered",
            "Input records (cancels, versions) a committer's watch remembers.",
            ["committer"],
            registry=self.registry,
        )
        self.registry.register(GcCollector(PAUSES))
        ProcessCollector(registry=self.registry)  # memory, CPU and open files of this process
        self._lock = threading.Lock()
        self._committers: Callable[[], dict[str, Any]] | None = None
        self._waker: Callable[[], WakerStats] | None = None
        self._waker_collector: Collector | None = None
        self._last_report: dict[str, Any] | None = None
        self._last_progress: dict[str, Any] | None = None
        self._seen_batch = -1
        self._batch_ends: dict[tuple[str, int], int] = {}
        self.last_batch_ms: int | None = None
        """When the last micro-batch finished (``None`` before the first)."""

    def observe_batch(self, report: BatchReport) -> None:
        """Count one micro-batch's events (the sink calls this)."""
        self.last_batch.set(report.finished_ms / 1000)
        with self._lock:
            self._last_report = report.summary()
            self.last_batch_ms = report.finished_ms
        if not report.committed:
            return  # a replay: the run that committed the batch counted it
        for name, kinds in _COUNTED.items():
            n = sum(report.counts[k] for k in kinds)
            if n:
                self.events[name].inc(n)
        self.fired.inc(report.counts[r.Kind.RAISE])
        for executor, done in report.executors.items():
            self.executor_tasks.labels(executor).inc(done["tasks"])
            for kind in (r.Kind.RAISE, HANDED):
                if done[kind]:
                    self.executor_written.labels(executor, kind).inc(done[kind])
        self.lateness.observe_ms(report.lateness_ms)
        self.missed_lateness.observe_ms(report.missed_lateness_ms)

    def observe_committed(self, delivered: Delivered, committer: str) -> None:
        """Count one group the committer called ``committer`` delivered (it calls this)."""
        self.fired.inc(delivered.delivered)
        self.committer_delivered.labels(committer).inc(delivered.delivered)
        if delivered.arrived_due:
            self.committer_arrived_due.labels(committer).inc(delivered.arrived_due)
        if delivered.refused:
            self.events["refused"].inc(delivered.refused)
        if delivered.expired:
            self.events["expired"].inc(delivered.expired)
        if delivered.withheld:
            self.events["withheld"].inc(delivered.withheld)
        self.lateness.observe_ms(delivered.lateness_ms)
        self.committer_lateness.observe_ms(delivered.lateness_ms, committer)

    def watch_committer(
        self,
        status: Callable[[], CommitterStatus],
        group: Callable[[], dict[str, Any]],
        inflight: tuple[str, Callable[[], int | None]],
    ) -> None:
        """Show a committer's partitions and pending schedules (read at each scrape), and
        ``group()`` (its group's members) under ``committers`` in ``/progress``.
        ``inflight`` is its in-flight topic and what says how many partitions that has
        (``None``: not known now), asked at most once a minute."""
        name = status().name
        topic, partitions = inflight
        owned = self.committer_partitions.labels(name, topic)
        owned.set_function(lambda: len(status().partitions))
        self.registry.register(InflightCollector(topic, partitions))
        # At 0 from the start: an increase from nothing to its first value is no increase.
        self.committer_delivered.labels(name)
        self.committer_arrived_due.labels(name)
        self.committer_pending.labels(name).set_function(lambda: status().pending)
        self.committer_remembered.labels(name).set_function(lambda: status().remembered)
        self.registry.register(PacingCollector(status))
        self.registry.register(ReviewsCollector(status))
        with self._lock:
            self._committers = group

    def watch_waker(self, stats: Callable[[], WakerStats]) -> None:
        """Show what the waker did and waits for (read at each scrape), and under
        ``waker`` in ``/progress``."""
        collector = WakerCollector(stats)
        with self._lock:
            if self._waker_collector is not None:  # a pipeline started again: its new waker
                self.registry.unregister(self._waker_collector)
            self.registry.register(collector)
            self._waker, self._waker_collector = stats, collector

    def observe_progress(self, progresses: list[dict[str, Any]]) -> None:
        """Take Spark's progress reports not seen yet (oldest first)."""
        for progress in progresses:
            batch = int(progress.get("batchId", -1))
            if batch <= self._seen_batch:
                continue
            self._seen_batch = batch
            self.received.inc(int(progress.get("numInputRows", 0)))
            duration_ms = batch_work_ms(progress.get("durationMs") or {})
            if duration_ms is not None:
                self.batch_duration.observe(duration_ms / 1000)
            operators = progress.get("stateOperators") or []
            if operators:
                self.pending.set(sum(int(op.get("numRowsTotal", 0)) for op in operators))
            ends = batch_ends(progress)
            with self._lock:
                self._last_progress = _summary(progress)
                self._batch_ends = ends or self._batch_ends

    def watch_input_lag(
        self, ends: Callable[[list[tuple[str, int]]], dict[tuple[str, int], int]]
    ) -> None:
        """``delayline_input_lag_records{topic}``: the records past where the last
        micro-batch stopped, ``ends`` saying where each input partition ends now."""
        self.registry.register(InputLag(self._read_positions, ends))

    def _read_positions(self) -> dict[tuple[str, int], int]:
        with self._lock:
            return dict(self._batch_ends)

    def watch_readiness(self, reasons: Callable[[], list[str]]) -> None:
        """``delayline_ready``: 1 while ``reasons()`` (what ``/readyz`` answers) is empty,
        0 otherwise, asked at each scrape."""
        self.registry.register(ReadyCollector(reasons))

    def progress(self) -> dict[str, Any]:
        """What ``/progress`` answers."""
        with self._lock:
            answer = {"last_batch": self._last_report, "spark": self._last_progress}
            committers, waker = self._committers, self._waker
        if committers is not None:
            answer["committers"] = committers()
        if waker is not None:
            answer["waker"] = asdict(waker())
        return answer


def _summary(progress: dict[str, Any]) -> dict[str, Any]:
    operators = progress.get("stateOperators") or []
    return {
        "batch_id": progress.get("batchId"),
        "timestamp": progress.get("timestamp"),
        "input_rows": progress.get("numInputRows"),
        "input_rows_per_second": progress.get("inputRowsPerSecond"),
        "processed_rows_per_second": progress.get("processedRowsPerSecond"),
        "duration_ms": progress.get("durationMs"),
        "state_rows": sum(int(op.get("numRowsTotal", 0)) for op in operators),
        "state_memory_bytes": sum(int(op.get("memoryUsedBytes", 0)) for op in operators),
    }
