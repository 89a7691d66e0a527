"""Prometheus metrics of the pipeline, and a small HTTP server for them.

``/metrics`` is the Prometheus text format; ``/progress`` is JSON with the last
batch's counts and Spark's last progress (the API's ``/info`` reads it).
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from delayline.fire.sink import BatchReport
from delayline.pipeline import rows as r

log = logging.getLogger(__name__)

LATENESS_BUCKETS_S = (0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 300)

# Event kinds counted, by metric name suffix. ``received`` comes from Spark's input rows.
_COUNTED = {
    "planned": (r.PLANNED,),
    "updated": (r.UPDATED,),
    "cancelled": (r.CANCELLED,),
    "unknown_cancels": (r.UNKNOWN_CANCEL,),
    "invalid": (r.INVALID,),
    "missed": (r.MISSED,),
    "expired": (r.EXPIRED,),
    "stale": (r.STALE,),
    "retired": (r.RETIRE,),
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
        self.lateness = Histogram(
            "delayline_lateness_seconds",
            "Commit time of a delivery minus its due time.",
            buckets=LATENESS_BUCKETS_S,
            registry=self.registry,
        )
        self.pending = Gauge(
            "delayline_schedules_pending",
            "Schedules held in state (Spark's state rows after the last batch).",
            registry=self.registry,
        )
        self.batch_duration = Histogram(
            "delayline_batch_duration_seconds",
            "Micro-batch duration (Spark's triggerExecution).",
            buckets=(0.25, 0.5, 1, 2, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.last_batch = Gauge(
            "delayline_last_batch_timestamp_seconds",
            "When the last micro-batch finished.",
            registry=self.registry,
        )
        self._lock = threading.Lock()
        self._last_report: dict[str, Any] | None = None
        self._last_progress: dict[str, Any] | None = None
        self._seen_batch = -1

    def observe_batch(self, report: BatchReport) -> None:
        """Count one micro-batch's events (the sink calls this)."""
        self.last_batch.set(report.finished_ms / 1000)
        with self._lock:
            self._last_report = report.summary()
        if not report.committed:
            return  # a replay: the run that committed the batch counted it
        for name, kinds in _COUNTED.items():
            n = sum(report.counts[k] for k in kinds)
            if n:
                self.events[name].inc(n)
        self.fired.inc(report.counts[r.FIRE])
        for late_ms in report.lateness_ms:
            self.lateness.observe(max(0, late_ms) / 1000)

    def observe_progress(self, progresses: list[dict[str, Any]]) -> None:
        """Take Spark's progress reports not seen yet (oldest first)."""
        for progress in progresses:
            batch = int(progress.get("batchId", -1))
            if batch <= self._seen_batch:
                continue
            self._seen_batch = batch
            self.received.inc(int(progress.get("numInputRows", 0)))
            duration_ms = (progress.get("durationMs") or {}).get("triggerExecution")
            if duration_ms is not None:
                self.batch_duration.observe(duration_ms / 1000)
            operators = progress.get("stateOperators") or []
            if operators:
                self.pending.set(sum(int(op.get("numRowsTotal", 0)) for op in operators))
            with self._lock:
                self._last_progress = _summary(progress)

    def progress(self) -> dict[str, Any]:
        """What ``/progress`` answers."""
        with self._lock:
            return {"last_batch": self._last_report, "spark": self._last_progress}


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


class MetricsServer:
    """Serves ``/metrics`` and ``/progress`` from a daemon thread."""

    def __init__(self, metrics: PipelineMetrics, host: str, port: int) -> None:
        self.metrics = metrics
        handler = _handler(metrics)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="delayline-metrics", daemon=True
        )

    @property
    def port(self) -> int:
        """The port listened on."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Start serving."""
        self._thread.start()
        log.info("metrics on http://%s:%d/metrics", *self._server.server_address[:2])

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


def _handler(metrics: PipelineMetrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/metrics":
                body, kind = generate_latest(metrics.registry), CONTENT_TYPE_LATEST
            elif self.path.split("?")[0] == "/progress":
                body, kind = json.dumps(metrics.progress()).encode(), "application/json"
            else:
                self.send_error(404, "try /metrics or /progress")
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("metrics request: " + format, *args)

    return Handler
