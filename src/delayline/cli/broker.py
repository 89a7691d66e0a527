"""``delayline broker start|stop|status``: the local development broker."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from delayline.cli._common import add_start_timeout, duration_arg, env_flag, one_of, say
from delayline.core.units import parse_duration_ms
from delayline.errors import BrokerAlreadyRunningError, BrokerNotRunningError
from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.infra.broker_security import PLAINTEXT, SECURITY_MODES

DEFAULT_DATA_DIR = Path(".delayline/broker")
DEFAULT_PORT = 9092


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
            default=DEFAULT_PORT,
            type=int,
            help="client port on 127.0.0.1 (the controller uses port+1)"
            if p is start
            else "client port, used only when --data-dir holds no broker config "
            "(else the port the broker was started with is read from there)",
        )
        env_flag(
            p,
            "--data-dir",
            env="DELAYLINE_BROKER_DATA_DIR",
            default=str(DEFAULT_DATA_DIR),
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
    add_start_timeout(
        start, "DELAYLINE_BROKER_START_TIMEOUT", "90s", "the broker to accept requests"
    )
    env_flag(
        start,
        "--security",
        env="DELAYLINE_BROKER_SECURITY",
        default=PLAINTEXT,
        type=one_of(SECURITY_MODES),
        help="plaintext, or sasl-ssl: a TLS listener (a certificate for localhost and "
        "127.0.0.1 made at the first start), SCRAM users admin and delayline, ACLs that "
        "deny what none allows, and client properties files for --kafka-config written "
        "next to the data (on a data dir first started that way)",
    )
    env_flag(
        start,
        "--oauth-jwks-url",
        env="DELAYLINE_BROKER_OAUTH_JWKS_URL",
        default=None,
        metavar="URL",
        help="with --security sasl-ssl, also accept OAUTHBEARER tokens verified by this "
        "OpenID provider's key set (https://, http:// or file://); the principal is "
        "User: and the token's sub",
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
            security=getattr(args, "security", PLAINTEXT),
            oauth_jwks_url=getattr(args, "oauth_jwks_url", None),
        )
    )


def _same_broker(args: argparse.Namespace, port: int | None = None) -> str:
    """The flags that point another ``delayline broker`` command at this broker: the
    data dir and port, each when not the default."""
    flags = ""
    if Path(args.data_dir) != DEFAULT_DATA_DIR:
        flags += f" --data-dir {args.data_dir}"
    if port is not None and port != DEFAULT_PORT:
        flags += f" --port {port}"
    return flags


def _port_of(bootstrap_servers: str) -> int:
    return int(bootstrap_servers.rsplit(":", 1)[1])


def _start(args: argparse.Namespace) -> int:
    broker = _broker(args)
    began = time.monotonic()
    try:
        status = broker.start(progress=lambda msg: print(f"delayline: {msg}", file=sys.stderr))
    except BrokerAlreadyRunningError:
        running = broker.status()
        raise BrokerAlreadyRunningError(
            f"a broker already runs on {broker.data_dir} (pid {running.pid}) at "
            f"{running.bootstrap_servers}; stop it with "
            f"`delayline broker stop{_same_broker(args)}`"
        ) from None
    say(
        f"broker ready at {status.bootstrap_servers} (pid {status.pid}, "
        f"{time.monotonic() - began:.1f} s, log {status.log_file})"
    )
    _say_client_files(broker)
    return 0


def _stop(args: argparse.Namespace) -> int:
    broker = _broker(args)
    address = broker.status().bootstrap_servers
    try:
        pid = broker.stop()
    except BrokerNotRunningError:
        say(f"broker not running (data dir {args.data_dir}); nothing to stop")
        return 0
    say(f"broker stopped (pid {pid}, was at {address})")
    return 0


def _status(args: argparse.Namespace) -> int:
    status = _broker(args).status()
    if not status.running:
        flags = _same_broker(args, _port_of(status.bootstrap_servers))
        say(
            f"broker not running (data dir {args.data_dir}); "
            f"start it with `delayline broker start{flags}`"
        )
        return 3
    say(f"broker running at {status.bootstrap_servers} (pid {status.pid}, log {status.log_file})")
    _say_client_files(_broker(args))
    return 0


def _say_client_files(broker: LocalBroker) -> None:
    """Name a secured broker's client properties files (never their contents)."""
    files = broker.secure_files
    if files.delayline_properties.is_file():
        say(f"client properties: {files.delayline_properties} (user delayline, for "
            f"--kafka-config), {files.admin_properties} (user admin)")  # fmt: skip
