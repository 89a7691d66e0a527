"""A small HTTP server of a pipeline's or a committer's :class:`PipelineMetrics`.

``/metrics`` is the Prometheus text format; ``/progress`` is JSON with the last batch's
counts and Spark's last progress (the API's ``/info`` reads it); ``/readyz`` answers 200
while batches finish and Kafka answers, 503 with the reasons otherwise; ``/healthz``
(liveness) answers 200 while the process's work goes on, 503 with the reasons once it
died, and never asks Kafka (as the API's ``/healthz``: ``{"status": "ok"}``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from delayline.core.cached import Cached
from delayline.core.clock import Clock, SystemClock
from delayline.core.http_server import LoggingHTTPServer
from delayline.core.units import format_duration_ms
from delayline.kafka.topics import cluster_brokers
from delayline.pipeline.metrics import PipelineMetrics

log = logging.getLogger(__name__)


Check = Callable[[], str | None]
"""Why something is wrong (not ready, not alive), or ``None``."""


def failing(checks: Sequence[Check]) -> list[str]:
    """What ``checks`` say is wrong; empty when nothing is."""
    return [reason for check in checks if (reason := check()) is not None]


class Readiness:
    """Whether a process is doing its work, for ``/readyz``: Kafka answered the last probe
    and every check passes. Probes run on demand, at most one every ``probe_every_ms``.

    Args:
        kafka_probe: Asks Kafka something small: ``None`` when it answered, else why not.
        checks: Each says why the process is not ready, or ``None`` (see
            :func:`batch_age` and :meth:`delayline.committer.service.Committer.not_ready`).
        clock: "Now".
        probe_every_ms: How long a probe's answer stands.
    """

    def __init__(
        self,
        kafka_probe: Check,
        checks: Sequence[Check] = (),
        *,
        clock: Clock | None = None,
        probe_every_ms: int = 5_000,
    ) -> None:
        self.kafka_probe = kafka_probe
        self.checks = tuple(checks)
        self._kafka = Cached(kafka_probe, probe_every_ms, clock)

    def reasons(self) -> list[str]:
        """Why the process is not ready; empty when it is."""
        reasons = failing(self.checks)
        kafka = self._kafka()
        return reasons if kafka is None else [*reasons, kafka]


def kafka_probe(bootstrap_servers: str, timeout_s: float = 2.0) -> Callable[[], str | None]:
    """A probe of :class:`Readiness`: the cluster lists its brokers within ``timeout_s``."""

    def probe() -> str | None:
        if cluster_brokers(bootstrap_servers, timeout_s):
            return None
        return f"Kafka at {bootstrap_servers} did not answer"

    return probe


def batch_age(
    metrics: PipelineMetrics,
    max_batch_age_ms: int,
    clock: Clock | None = None,
    *,
    owed_since: Callable[[], int | None] | None = None,
    max_owed_ms: int = 60_000,
) -> Callable[[], str | None]:
    """A check of :class:`Readiness`: micro-batches run when they are needed.

    Not ready before the first batch finishes, when the last one finished more than
    ``max_batch_age_ms`` ago, or, with ``owed_since`` (since when a batch is owed, or
    ``None``: :attr:`delayline.pipeline.wake.WakerStats.waiting_since_ms`), when one has
    been owed for more than ``max_owed_ms``. Without ``owed_since`` keep
    ``max_batch_age_ms`` above the heartbeat interval (an idle pipeline runs a batch
    that often); with it, an idle pipeline owes nothing and stays ready, and a stuck one
    is found within ``max_owed_ms`` of the first batch it needed."""
    now_ms = (clock or SystemClock()).now_ms

    def check() -> str | None:
        last = metrics.last_batch_ms
        if last is None:
            return "no micro-batch finished yet"
        now = now_ms()
        since = None if owed_since is None else owed_since()
        if since is not None and now - since > max_owed_ms:
            return (
                f"a micro-batch is needed since {format_duration_ms(now - since)} ago and "
                f"none ran (more than {format_duration_ms(max_owed_ms)})"
            )
        age = now - last
        if age > max_batch_age_ms:
            return (
                f"last micro-batch finished {format_duration_ms(age)} ago "
                f"(more than {format_duration_ms(max_batch_age_ms)})"
            )
        return None

    return check


class MetricsServer:
    """Serves ``/metrics``, ``/progress``, ``/readyz`` and ``/healthz`` from a daemon
    thread.

    Args:
        metrics: What ``/metrics`` and ``/progress`` show.
        host: Address to listen on.
        port: Port to listen on (0: any free one).
        readiness: What ``/readyz`` asks (and ``delayline_ready`` in ``/metrics``);
            without it, ``/readyz`` is 404.
        liveness: What ``/healthz`` asks, each saying why the process's work died (see
            :meth:`delayline.committer.service.Committer.not_alive`); none may ask Kafka.
            Without any, ``/healthz`` answers 200 while this server does.
    """

    def __init__(
        self,
        metrics: PipelineMetrics,
        host: str,
        port: int,
        readiness: Readiness | None = None,
        *,
        liveness: Sequence[Check] = (),
    ) -> None:
        self.metrics = metrics
        if readiness is not None:
            metrics.watch_readiness(readiness.reasons)
        handler = _handler(metrics, readiness, tuple(liveness))
        self._server = LoggingHTTPServer((host, port), handler)
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


def _handler(
    metrics: PipelineMetrics, readiness: Readiness | None, liveness: tuple[Check, ...]
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, status = self.path.split("?")[0], 200
            if path == "/metrics":
                body, kind = generate_latest(metrics.registry), CONTENT_TYPE_LATEST
            elif path == "/progress":
                body, kind = json.dumps(metrics.progress()).encode(), "application/json"
            elif path == "/readyz" and readiness is not None:
                status, body = _probe(readiness.reasons(), "ready", "not ready")
                kind = "application/json"
            elif path == "/healthz":
                status, body = _probe(failing(liveness), "ok", "failed")
                kind = "application/json"
            else:
                self.send_error(404, "try /metrics, /progress, /readyz or /healthz")
                return
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("metrics request: " + format, *args)

    return Handler


def _probe(reasons: list[str], good: str, bad: str) -> tuple[int, bytes]:
    """A probe's answer: 200 ``{"status": good}``, or 503 with ``bad`` and the reasons."""
    if not reasons:
        return 200, json.dumps({"status": good}).encode()
    return 503, json.dumps({"status": bad, "reasons": reasons}).encode()
