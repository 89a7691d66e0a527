"""``delayline schedule`` and ``delayline cancel``: write to the schedules topic by hand."""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import re
import sys
import urllib.parse
from typing import Any

from delayline.cli._common import (
    API_TIMEOUT_S,
    NotFoundError,
    add_api,
    add_bootstrap,
    add_schedules_topic,
    add_timeout,
    api_get,
    check_kafka,
    duration_arg,
    say,
    warn,
)
from delayline.client import AsyncScheduler, ClientConfig
from delayline.client._core import PAST_DUE
from delayline.client._core import log as client_log
from delayline.core.clock import SystemClock, ms_to_datetime
from delayline.core.units import format_duration_ms, parse_duration_ms, parse_instant_ms
from delayline.errors import ApiUnavailableError

# "--in -5m": argparse takes a value starting with "-" for an option unless it looks
# like a negative number; durations such as -5m or -1h30m count as one here.
_NEGATIVE_VALUE = re.compile(r"^-\d")


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
        type=duration_arg(functools.partial(parse_duration_ms, allow_negative=True)),
        dest="in_ms",
        metavar="DURATION",
        help="delay from now, e.g. 90s, 5m, 1h30m; a negative one (-5m) fires at once",
    )
    schedule._negative_number_matcher = _NEGATIVE_VALUE
    schedule.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra header carried onto the delivery (repeatable)",
    )
    schedule.add_argument("payload", metavar="PAYLOAD|-", help="the payload, or - to read stdin")
    cancel = sub.add_parser(
        "cancel",
        help="cancel a pending schedule",
        description="Write a tombstone for schedule ID. delayline api (--api-url) is asked "
        "first: an id it does not know as pending is refused unless --force, and the "
        "tombstone goes to the partition holding the pending version. When the API does "
        "not answer, the cancel is written to the id's own partition with a warning.",
    )
    cancel.add_argument("id", metavar="ID", help="schedule id to cancel")
    cancel.add_argument(
        "--force",
        action="store_true",
        help="write the cancel even if the API knows no pending schedule with this id "
        "(and say nothing when the API cannot be asked)",
    )
    add_api(cancel)
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


class _SaidByTheCli(logging.Filter):
    """The command line warns about a past due time in its own words (above); the
    client's log line for it would say the same again."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg is not PAST_DUE


def _schedule(args: argparse.Namespace) -> int:
    payload = sys.stdin.buffer.read() if args.payload == "-" else args.payload.encode()
    headers = _headers(args.header)
    check_kafka(args)
    now_ms = SystemClock().now_ms()
    due_ms = args.at_ms if args.at_ms is not None else now_ms + args.in_ms
    if due_ms < now_ms:
        warn(f"due time is {format_duration_ms(now_ms - due_ms)} in the past; it fires at once")
    client_log.addFilter(_SaidByTheCli())

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
    check_kafka(args)
    partition = _pending_partition(args)

    async def write() -> None:
        async with AsyncScheduler(_client_config(args)) as client:
            written = await client.cancel(args.id, partition=partition)
        say(f"cancelled {args.id!r} ({written.topic}/{written.partition}@{written.offset})")

    asyncio.run(write())
    return 0


def _pending_partition(args: argparse.Namespace) -> int | None:
    """Ask the API where ``args.id`` is pending in the schedules topic.

    Returns:
        The partition of the pending version, or ``None`` (the id's own partition)
        when the API cannot tell or ``--force`` writes a cancel it does not know of.

    Raises:
        NotFoundError: the API knows no pending version there and ``--force`` is off.
    """
    path = "/schedules/" + urllib.parse.quote(args.id, safe="")
    timeout_s = min(API_TIMEOUT_S, args.timeout_ms / 1000)
    try:
        status, body = api_get(args, path, timeout_s=timeout_s)
        if status not in (200, 404):
            detail = body.get("detail") if isinstance(body, dict) else None
            raise ApiUnavailableError(f"delayline api answered {status}: {detail or 'no detail'}")
        current = body.get("current") if status == 200 and isinstance(body, dict) else None
        if current is not None and current["topic"] == args.schedules_topic:
            return int(current["partition"])
        if not args.force:
            _require_caught_up(args, timeout_s)
            raise NotFoundError(_not_pending(args, current))
    except ApiUnavailableError as exc:
        if not args.force:  # --force asked for no check: only the partition is lost
            warn(f"could not check that {args.id!r} is pending: {exc}; writing the cancel anyway")
    return None


def _require_caught_up(args: argparse.Namespace, timeout_s: float) -> None:
    """Before trusting "not pending": the API has read the topics to their end.

    Raises:
        ApiUnavailableError: not yet (so "not pending" may mean "not read yet").
    """
    status, _body = api_get(args, "/readyz", timeout_s=timeout_s)
    if status != 200:
        raise ApiUnavailableError("delayline api's catalog is still reading the topics")


def _not_pending(args: argparse.Namespace, current: dict[str, Any] | None) -> str:
    where = ""
    if current is not None:  # pending, but in another schedules topic than ours
        where = (
            f" in {args.schedules_topic} (it is pending in {current['topic']}: "
            f"pass --schedules-topic {current['topic']})"
        )
    return (
        f"no pending schedule with id {args.id!r}{where} "
        "(nothing cancelled; --force writes the cancel anyway)"
    )
