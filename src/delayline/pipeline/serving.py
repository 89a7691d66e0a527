"""The metrics server of ``delayline run``: what its ``/readyz`` and ``/healthz`` judge.

Ready while Kafka answers, the committer delivers, and the micro-batches the pipeline
needs run: with its own waker, every batch it was woken for within
:data:`READY_BATCH_AGE_MS` (and, as a backstop, some batch within a heartbeat plus that);
without it (batches every trigger, or an oscillator's ticks), some batch within
:data:`READY_BATCH_AGE_MS`. Alive while the committer is.
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka.admin import AdminClient

from delayline.kafka.config import kafka_client_config
from delayline.kafka.reader import acknowledged_ends
from delayline.pipeline.config import OWN_WAKER, PipelineConfig
from delayline.pipeline.metrics import PipelineMetrics
from delayline.pipeline.metrics_server import (
    Check,
    MetricsServer,
    Readiness,
    batch_age,
    kafka_probe,
)

READY_BATCH_AGE_MS = 60_000
"""``/readyz`` on the metrics port fails when a micro-batch the waker needed did not run
for this long, or none ran for this long after a heartbeat interval (without the waker:
none for this long); the API reports such a pipeline as stalled."""


def serve_metrics(
    config: PipelineConfig,
    port: int,
    metrics: PipelineMetrics,
    *,
    owed_since: Callable[[], int | None],
    committer_not_ready: Check,
    committer_not_alive: Check,
) -> MetricsServer:
    """Start the metrics server of the pipeline ``config`` describes on ``port`` (0: any
    free port), and the watch of its input lag.

    Args:
        owed_since: Since when a micro-batch the waker asked for is owed (epoch ms),
            or ``None`` (:attr:`delayline.pipeline.wake.WakerStats.waiting_since_ms`).
        committer_not_ready: Why the committer does not deliver, if it does not.
        committer_not_alive: Why the committer is dead, if it is.
    """
    if config.wake and config.waker == OWN_WAKER:
        batches = batch_age(
            metrics,
            config.heartbeat_interval_ms + READY_BATCH_AGE_MS,
            owed_since=owed_since,
            max_owed_ms=READY_BATCH_AGE_MS,
        )
    else:  # batches every trigger, or every tick of an oscillator
        batches = batch_age(metrics, READY_BATCH_AGE_MS)
    readiness = Readiness(
        kafka_probe(config.topology.bootstrap_servers), (batches, committer_not_ready)
    )
    server = MetricsServer(
        metrics,
        config.metrics_host,
        port,
        readiness,
        liveness=(committer_not_alive,),
    )
    admin = AdminClient(kafka_client_config(config.topology.bootstrap_servers))
    metrics.watch_input_lag(lambda parts: acknowledged_ends(admin, parts, 5.0))
    server.start()
    return server
