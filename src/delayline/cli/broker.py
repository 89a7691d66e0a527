"""``delayline broker start|stop|status``: the local development broker."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from delayline.cli._common import duration_arg, env_flag, say
from delayline.core.units import parse_duration_ms
from delayline.infra.broker import BrokerConfig, LocalBroker


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``broker`` command group."""
    parser = sub.add_parser(
        "broker",
        help="run a local single-node KRaft Kafka broker",
        description="Run a single-node KRaft Apache Kafka broker on 127.0.0.1 for development.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("start", help="start the broker and wait until it is ready")
    stop = actions.add_parser("stop", help="stop the broker (SIGTERM, then SIGKILL)")
    status = actions.add_parser("status", help="say whether the broker runs (exit 3 if not)")
    for p in (start, stop, status):
        env_flag(
            p,
            "--port",
            env="DELAYLINE_BROKER_PORT",
            default=9092,
            type=int,
            help="client port on 127.0.0.1 (the controller uses port+1)",
        )
        env_flag(
            p,
            "--data-dir",
            env="DELAYLINE_BROKER_DATA_DIR",
            default=".delayline/broker",
            type=Path,
            help="directory holding the broker's data, config, log and PID file",
        )
    env_flag(
        start,
        "--heap-mb",
        env="DELAYLINE_BROKER_HEAP_MB",
        default=512,
        type=int,
        help="JVM heap of the broker",
    )
    env_flag(
        start,
        "--start-timeout",
        env="DELAYLINE_BROKER_START_TIMEOUT",
        default="90s",
        type=duration_arg(parse_duration_ms),
        dest="start_timeout_ms",
        metavar="DURATION",
        help="how long to wait for the broker to accept requests",
    )
    env_flag(
        stop,
        "--stop-timeout",
        env="DELAYLINE_BROKER_STOP_TIMEOUT",
        default="30s",
        type=duration_arg(parse_duration_ms),
        dest="stop_timeout_ms",
        metavar="DURATION",
        help="grace period after SIGTERM before SIGKILL",
    )
    start.set_defaults(func=_start)
    stop.set_defaults(func=_stop)
    status.set_defaults(func=_status)


def _broker(args: argparse.Namespace) -> LocalBroker:
    return LocalBroker(
        BrokerConfig(
            data_dir=args.data_dir,
            port=args.port,
            heap_mb=getattr(args, "heap_mb", 512),
            start_timeout_ms=getattr(args, "start_timeout_ms", 90_000),
            stop_timeout_ms=getattr(args, "stop_timeout_ms", 30_000),
        )
    )


def _start(args: argparse.Namespace) -> int:
    broker = _broker(args)
    began = time.monotonic()
    status = broker.start(progress=lambda msg: print(f"delayline: {msg}", file=sys.stderr))
    say(
        f"broker ready at {status.bootstrap_servers} (pid {status.pid}, "
        f"{time.monotonic() - began:.1f} s, log {status.log_file})"
    )
    return 0


def _stop(args: argparse.Namespace) -> int:
    pid = _broker(args).stop()
    say(f"broker stopped (pid {pid})")
    return 0


def _status(args: argparse.Namespace) -> int:
    status = _broker(args).status()
    if not status.running:
        say(f"broker not running (data dir {args.data_dir})")
        return 3
    say(f"broker running at {status.bootstrap_servers} (pid {status.pid}, log {status.log_file})")
    return 0
