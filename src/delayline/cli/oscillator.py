"""``delayline oscillator``: tick a topic once per Unix second."""

from __future__ import annotations

import argparse
import logging

from delayline.cli._common import add_bootstrap, add_timeout, check_kafka, env_flag, stop_on_signals
from delayline.cli._serving import add_log_format, add_metrics_address
from delayline.oscillator.service import DEFAULT_TOPIC, Oscillator, OscillatorConfig

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``oscillator``."""
    p = sub.add_parser(
        "oscillator",
        help="tick a topic once per Unix second (the durable Kafka timers design)",
        description="Write one record per Unix second to --topic (key: the second as a "
        "decimal string, value: 1), catching up every missed second after a pause and "
        "never writing a second the topic already holds. Several may run for redundancy: "
        "a duplicate tick is harmless. `delayline run --waker oscillator` lets the ticks "
        "wake the pipeline (see docs/contracts.md).",
    )
    add_bootstrap(p)
    env_flag(
        p,
        "--topic",
        env="DELAYLINE_OSCILLATOR_TOPIC",
        default=DEFAULT_TOPIC,
        help="the topic ticked (created with one partition when missing)",
    )
    add_metrics_address(
        p, "DELAYLINE_OSCILLATOR_", "Prometheus /metrics (the last tick among them)"
    )
    add_timeout(p)
    add_log_format(p)
    p.set_defaults(func=_oscillator)


def _oscillator(args: argparse.Namespace) -> int:
    check_kafka(args)
    # -v (on every command) still adds to the level.
    logging.getLogger("delayline").setLevel(min(logging.INFO, logging.getLogger().level))
    oscillator = Oscillator(
        OscillatorConfig(
            bootstrap_servers=args.bootstrap_servers,
            topic=args.topic,
            metrics_port=args.metrics_port,
            metrics_host=args.metrics_host,
            timeout_ms=args.timeout_ms,
        )
    )
    stop = stop_on_signals(log, "stopping the oscillator")
    oscillator.start()
    try:
        oscillator.run_until(stop)
    finally:
        oscillator.close()
    return 0
