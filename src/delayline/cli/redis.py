"""``delayline redis start|stop|status``: a local Redis server for the Redis hold."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from delayline.cli._common import add_start_timeout, env_flag, one_of, say
from delayline.infra.redis_server import FSYNC_POLICIES, LocalRedis, RedisServerConfig

DEFAULT_DATA_DIR = Path(".delayline/redis")
DEFAULT_PORT = 6379


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``redis`` command group."""
    parser = sub.add_parser(
        "redis",
        help="run a local Redis server (for --hold redis)",
        description="Run Debian's redis-server on 127.0.0.1 with its append-only file on, "
        "for development and tests of the Redis hold.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("start", help="start Redis and wait until it answers")
    stop = actions.add_parser("stop", help="stop Redis (SIGTERM, then SIGKILL)")
    status = actions.add_parser("status", help="say whether Redis runs (exit 3 if not)")
    for p in (start, stop, status):
        env_flag(
            p,
            "--data-dir",
            env="DELAYLINE_REDIS_DATA_DIR",
            default=str(DEFAULT_DATA_DIR),
            type=Path,
            help="directory holding Redis's config, append-only files, log and PID file",
        )
        env_flag(
            p,
            "--port",
            env="DELAYLINE_REDIS_PORT",
            default=DEFAULT_PORT,
            type=int,
            help="TCP port on 127.0.0.1"
            if p is start
            else "the port, when --data-dir holds no config (else the one it was started with)",
        )
    env_flag(
        start,
        "--appendfsync",
        env="DELAYLINE_REDIS_APPENDFSYNC",
        default="always",
        type=one_of(FSYNC_POLICIES),
        help="always: every write is on disk before Redis answers (nothing acknowledged is "
        "lost on a crash); everysec: up to a second of writes may be lost (see docs/holds.md)",
    )
    add_start_timeout(start, "DELAYLINE_REDIS_START_TIMEOUT", "30s", "Redis to answer PING")
    start.set_defaults(func=_start)
    stop.set_defaults(func=_stop)
    status.set_defaults(func=_status)


def _server(args: argparse.Namespace) -> LocalRedis:
    return LocalRedis(
        RedisServerConfig(
            data_dir=args.data_dir,
            port=args.port,
            appendfsync=getattr(args, "appendfsync", "always"),
            start_timeout_ms=getattr(args, "start_timeout_ms", 30_000),
        )
    )


def _start(args: argparse.Namespace) -> int:
    began = time.monotonic()
    status = _server(args).start(progress=lambda m: print(f"delayline: {m}", file=sys.stderr))
    say(
        f"redis ready at {status.url} (pid {status.pid}, {time.monotonic() - began:.1f} s, "
        f"appendfsync {args.appendfsync}, log {status.log_file})"
    )
    return 0


def _stop(args: argparse.Namespace) -> int:
    server = _server(args)
    if not server.status().running:
        say(f"redis not running (data dir {args.data_dir}); nothing to stop")
        return 0
    pid = server.stop()
    say(f"redis stopped (pid {pid})")
    return 0


def _status(args: argparse.Namespace) -> int:
    status = _server(args).status()
    if not status.running:
        say(f"redis not running (data dir {args.data_dir}); start it with `delayline redis start`")
        return 3
    say(f"redis running at {status.url} (pid {status.pid}, log {status.log_file})")
    return 0
