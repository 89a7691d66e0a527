"""``delayline schedule`` and ``delayline cancel``: write to the schedules topic by hand."""

from __future__ import annotations

import argparse
import asyncio
import sys

from delayline.cli._common import (
    add_bootstrap,
    add_schedules_topic,
    add_timeout,
    duration_arg,
    say,
    warn,
)
from delayline.client import AsyncScheduler, ClientConfig
from delayline.core.clock import SystemClock, ms_to_datetime
from delayline.core.units import format_duration_ms, parse_duration_ms, parse_instant_ms


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``schedule`` and ``cancel``."""
    schedule = sub.add_parser(
        "schedule",
        help="schedule a message",
        description="Write a schedule: deliver PAYLOAD to --topic at --at or after --in.",
    )
    schedule.add_argument("--id", required=True, help="schedule id; reusing one replaces it")
    schedule.add_argument("--topic", required=True, help="target topic of the delivery")
    schedule.add_argument("--key", help="key of the delivered record (default: null key)")
    when = schedule.add_mutually_exclusive_group(required=True)
    when.add_argument(
        "--at",
        type=duration_arg(parse_instant_ms),
        dest="at_ms",
        metavar="TIME",
        help="due time, ISO 8601 with timezone, e.g. 2026-11-22T17:00:00Z",
    )
    when.add_argument(
        "--in",
        type=duration_arg(parse_duration_ms),
        dest="in_ms",
        metavar="DURATION",
        help="delay from now, e.g. 90s, 5m, 1h30m",
    )
    schedule.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra header carried onto the delivery (repeatable)",
    )
    schedule.add_argument("payload", metavar="PAYLOAD|-", help="the payload, or - to read stdin")
    cancel = sub.add_parser(
        "cancel", help="cancel a pending schedule", description="Write a tombstone for schedule ID."
    )
    cancel.add_argument("id", metavar="ID", help="schedule id to cancel")
    for p in (schedule, cancel):
        add_bootstrap(p)
        add_schedules_topic(p)
        add_timeout(p)
    schedule.set_defaults(func=_schedule)
    cancel.set_defaults(func=_cancel)


def _client_config(args: argparse.Namespace) -> ClientConfig:
    return ClientConfig(
        bootstrap_servers=args.bootstrap_servers,
        schedules_topic=args.schedules_topic,
        metadata_timeout_ms=args.timeout_ms,
        delivery_timeout_ms=max(args.timeout_ms, 1000),
    )


def _headers(pairs: list[str]) -> list[tuple[str, str]]:
    out = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"delayline schedule: error: --header {pair!r} is not NAME=VALUE")
        out.append((name, value))
    return out


def _schedule(args: argparse.Namespace) -> int:
    payload = sys.stdin.buffer.read() if args.payload == "-" else args.payload.encode()
    headers = _headers(args.header)
    now_ms = SystemClock().now_ms()
    due_ms = args.at_ms if args.at_ms is not None else now_ms + args.in_ms
    if due_ms < now_ms:
        warn(f"due time is {format_duration_ms(now_ms - due_ms)} in the past; it fires at once")

    async def write() -> None:
        async with AsyncScheduler(_client_config(args)) as client:
            written = await client.schedule(
                args.id,
                payload,
                args.topic,
                at=ms_to_datetime(due_ms),
                target_key=args.key,
                headers=headers,
            )
        say(
            f"scheduled {args.id!r} -> {args.topic} at {ms_to_datetime(due_ms).isoformat()} "
            f"({written.topic}/{written.partition}@{written.offset})"
        )

    asyncio.run(write())
    return 0


def _cancel(args: argparse.Namespace) -> int:
    async def write() -> None:
        async with AsyncScheduler(_client_config(args)) as client:
            written = await client.cancel(args.id)
        say(f"cancelled {args.id!r} ({written.topic}/{written.partition}@{written.offset})")

    asyncio.run(write())
    return 0
