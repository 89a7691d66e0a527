"""``delayline committer``: one more committer of a pipeline, on any host."""

from __future__ import annotations

import argparse
import logging
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from delayline.cli._common import (
    add_topology,
    check_kafka,
    duration_arg,
    env_flag,
    stop_on_signals,
    topology_from,
)
from delayline.cli._serving import add_log_format, add_metrics_address
from delayline.cli.extras import require_extras
from delayline.cli.run import add_delivery_flags, target_rates_from
from delayline.core.heap import PAUSES
from delayline.core.heap import settle as settle_heap
from delayline.core.units import parse_duration_ms
from delayline.errors import DelaylineError
from delayline.pipeline.config import PipelineConfig

if TYPE_CHECKING:  # the committer extra
    from delayline.committer.service import Committer
    from delayline.pipeline.metrics import PipelineMetrics
    from delayline.pipeline.metrics_server import MetricsServer

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``committer``."""
    p = sub.add_parser(
        "committer",
        help="run one more committer of a pipeline (precise delivery on this host)",
        description="Join the committers' group of the pipeline --query-name names and "
        "deliver, at their due times, the schedules handed over in the in-flight "
        "partitions the group assigns here. `delayline run` keeps one committer in its "
        "own process; each `delayline committer` (on any host, one per Spark worker host "
        "is the natural size) takes a share of the partitions. Give each a name of its "
        "own: restarted under it, a committer takes its partitions back at once. Takes "
        "the same topic and Kafka flags as `delayline run`. Stops on SIGTERM/SIGINT "
        "after delivering what falls due within --drain-timeout.",
    )
    add_topology(p, "schedules topic the pipeline reads; repeat for several")
    add_delivery_flags(p)
    env_flag(
        p,
        "--name",
        env="DELAYLINE_COMMITTER_NAME",
        default=socket.gethostname(),
        help="this committer's name in the group, unique among the pipeline's committers "
        "(default: the host name; the pipeline's own is 'pipeline')",
    )
    env_flag(
        p,
        "--session-timeout",
        env="DELAYLINE_COMMITTER_SESSION_TIMEOUT",
        default="10s",
        type=duration_arg(parse_duration_ms),
        dest="session_timeout_ms",
        metavar="DURATION",
        help="how long a committer that died keeps its partitions before the others take "
        "them (Kafka allows 6s-30m by default)",
    )
    env_flag(
        p,
        "--checkpoint-dir",
        env="DELAYLINE_COMMITTER_CHECKPOINT_DIR",
        default=None,
        type=Path,
        help="the pipeline's checkpoint, when this host can read it: after a pipeline "
        "restart the watch then reads the input from where the replayed batch did "
        "(default: from 30 s before what is pending)",
    )
    env_flag(
        p,
        "--drain-timeout",
        env="DELAYLINE_COMMITTER_DRAIN_TIMEOUT",
        default="7s",
        type=duration_arg(parse_duration_ms),
        dest="drain_timeout_ms",
        metavar="DURATION",
        help="at a stop, keep delivering what falls due for this long (nobody else "
        "delivers this committer's partitions until its session times out)",
    )
    add_metrics_address(
        p,
        "DELAYLINE_COMMITTER_",
        "Prometheus /metrics, JSON /progress (the group's members), /readyz (200 once it "
        "has read its partitions to their ends and Kafka answers, else 503 with the "
        "reasons) and /healthz (200 while its thread runs, else 503 with the reason; never "
        "asks Kafka)",
    )
    add_log_format(p)
    p.set_defaults(func=_committer)


def _committer(args: argparse.Namespace) -> int:
    require_extras("committer", "committer")
    from delayline.pipeline.committers import (  # noqa: PLC0415 - the committer extra
        committer_config,
        start_committer,
    )
    from delayline.pipeline.metrics import PipelineMetrics  # noqa: PLC0415 - same

    check_kafka(args)
    # -v (on every command) still adds to the level.
    logging.getLogger("delayline").setLevel(min(logging.INFO, logging.getLogger().level))
    checkpoint = args.checkpoint_dir
    config = PipelineConfig(
        topology=topology_from(args),
        query_name=args.query_name,
        max_lateness_ms=args.max_lateness_ms,
        inflight_partitions=args.inflight_partitions,
        target_rates=target_rates_from(args),
        write_ahead_topics=args.write_ahead_topics or None,
        checkpoint_dir=checkpoint or Path(".delayline/checkpoint"),
    )
    settings = committer_config(
        config,
        args.name,
        session_timeout_ms=args.session_timeout_ms,
        with_checkpoint=checkpoint is not None,
    )
    metrics = PipelineMetrics()
    started: list[Committer] = []
    server = _serve_metrics(args, config.topology.bootstrap_servers, metrics, started)
    stop = stop_on_signals(log, "stopping the committer")
    try:
        committer, _ = start_committer(config, settings, metrics)
        started.append(committer)
        settle_heap()  # what start-up made, out of the collector's walk
        PAUSES.install()
        _deliver_until(committer, stop)
        committer.stop(drain_timeout_s=args.drain_timeout_ms / 1000)
    finally:
        if server is not None:
            server.stop()
    return 0


def _serve_metrics(
    args: argparse.Namespace,
    bootstrap_servers: str,
    metrics: PipelineMetrics,
    started: list[Committer],
) -> MetricsServer | None:
    """The metrics server of ``--metrics-port``, started (``None`` without one); its
    probes ask the committer in ``started`` once there is one (starting, it is alive but
    not ready)."""
    from delayline.pipeline.metrics_server import (  # noqa: PLC0415 - the committer extra
        MetricsServer,
        Readiness,
        kafka_probe,
    )

    if args.metrics_port is None:
        return None

    def not_ready() -> str | None:
        return started[0].not_ready() if started else "the committer is starting"

    def not_alive() -> str | None:
        return started[0].not_alive() if started else None

    readiness = Readiness(kafka_probe(bootstrap_servers), (not_ready,))
    server = MetricsServer(
        metrics, args.metrics_host, args.metrics_port, readiness, liveness=(not_alive,)
    )
    server.start()
    return server


def _deliver_until(committer: Committer, stop: threading.Event) -> None:
    """Wait for ``stop``.

    Raises:
        DelaylineError: the committer stopped by itself (its :attr:`failure`, if any).
    """
    while not stop.wait(1.0):
        if committer.wait(0):
            raise committer.failure or DelaylineError(
                f"{committer.not_alive() or 'the committer stopped'}; exiting"
            )
