"""``delayline schedule`` and ``delayline cancel``: write to the schedules topic by hand."""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import re
import sys
import urllib.parse

from delayline.cli._common import (
    API_TIMEOUT_S,
    TOPICS_ENV,
    add_api,
    add_bootstrap,
    add_schedules_topics,
    add_timeout,
    api_get,
    check_kafka,
    duration_arg,
    env_flag,
    one_of,
    say,
    topics_from,
    warn,
)
from delayline.cli.pause import act_on_group
from delayline.cli.produce_contracts import (
    add_contract_topics,
    contract_writer,
    write_contract_record,
)
from delayline.client import AsyncScheduler, ClientConfig
from delayline.client._core import PAST_DUE
from delayline.client._core import log as client_log
from delayline.contract.contracts import CONTRACTS, HEADER
from delayline.contract.ids import parse_derived_id
from delayline.contract.pacing import MAX_WINDOW_MS, WindowError, check_window_ms
from delayline.contract.topology import DEFAULT_SCHEDULES_TOPIC
from delayline.core.clock import SystemClock, ms_to_datetime
from delayline.core.recurrence import DEFAULT_CATCH_UP, CatchUp, Recurrence
from delayline.core.units import format_duration_ms, parse_duration_ms, parse_instant_ms
from delayline.errors import ApiUnavailableError, ConfigError, InvalidScheduleError

FORMER_TOPIC_ENV = "DELAYLINE_SCHEDULES_TOPIC"
"""The variable ``schedule`` and ``cancel`` read for their schedules topic before they
took :data:`TOPICS_ENV` as the other commands do: still read, with a warning, when
that is unset (until the next release)."""

# "--in -5m": argparse takes a value starting with "-" for an option unless it looks
# like a negative number; durations such as -5m or -1h30m count as one here.
_NEGATIVE_VALUE = re.compile(r"^-\d")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``schedule`` and ``cancel``."""
    schedule = sub.add_parser(
        "schedule",
        help="schedule a message",
        description="Write a schedule: deliver PAYLOAD to --topic at --at or after --in. "
        "With --contract envelope or timer-request, write it as a producer of that "
        "contract does, to the topic named by --envelope-topic or --timer-request-topic "
        "(see docs/contracts.md).",
    )
    env_flag(
        schedule,
        "--contract",
        env="DELAYLINE_CONTRACT",
        default=HEADER,
        type=one_of(CONTRACTS),
        metavar="{" + ",".join(CONTRACTS) + "}",
        help="how to write it: header (the schedules topic), envelope (JSON) or "
        "timer-request (protobuf keyed by the expiry second)",
    )
    schedule.add_argument(
        "--id",
        help="schedule id; reusing one replaces it (required by the header contract; an "
        "envelope without one, and every timer request, is known by "
        "<topic>:<partition>:<offset>)",
    )
    schedule.add_argument(
        "--json-message",
        action="store_true",
        help="envelope only: PAYLOAD is JSON, sent as the message's value (delivered as "
        "compact JSON) instead of as a string",
    )
    schedule.add_argument("--topic", required=True, help="target topic of the delivery")
    schedule.add_argument("--key", help="key of the delivered record (default: null key)")
    when = schedule.add_mutually_exclusive_group()
    when.add_argument(
        "--at",
        type=duration_arg(parse_instant_ms),
        dest="at_ms",
        metavar="TIME",
        help="due time, ISO 8601 with timezone, e.g. 2026-11-22T17:00:00Z (with --cron or "
        "--every: the start; now when neither --at nor --in is given)",
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
    _add_recurrence(schedule)
    schedule.add_argument("payload", metavar="PAYLOAD|-", help="the payload, or - to read stdin")
    cancel = sub.add_parser(
        "cancel",
        help="cancel a pending schedule",
        description="Write a tombstone for schedule ID, always, and print where Kafka "
        "stored it once acknowledged. delayline api (--api-url) is asked where the id is "
        "pending: the tombstone goes to the partition holding the pending version. An id "
        "it has no pending version of (written a moment ago and not read yet, or "
        "delivered or cancelled already) is cancelled in the id's own partition, and "
        "the output says so; when the API does not answer, likewise with a warning.",
    )
    cancel.add_argument("id", metavar="ID", nargs="?", help="schedule id to cancel")
    cancel.add_argument(
        "--group", help="cancel every pending schedule of this group instead (through the API)"
    )
    cancel.add_argument(
        "--force",
        action="store_true",
        help="no longer needed (the cancel is always written); still accepted: say "
        "nothing when the API cannot be asked, and write a derived id of a topic that is "
        "not a schedules topic to the first --schedules-topic",
    )
    add_api(
        cancel,
        "the bearer token delayline api was started with (its --token): --group is a "
        "write, which always needs it; a cancel by ID only asks the API where the id is "
        "pending (a read: it needs the token when the API runs with --reads-need-token)",
    )
    add_bootstrap(schedule)
    add_schedules_topics(
        schedule,
        "schedules topic the schedule is written to: the first when several are given, "
        f"as delayline api writes new ids ({FORMER_TOPIC_ENV}, its former variable, is "
        "read until the next release)",
    )
    add_timeout(schedule)
    add_bootstrap(cancel)
    add_schedules_topics(
        cancel,
        "schedules topic a cancel goes to when the API does not say where the id is "
        f"pending: the first when several are given ({FORMER_TOPIC_ENV}, its former "
        "variable, is read until the next release)",
    )
    add_timeout(cancel)
    add_contract_topics(schedule)
    schedule.set_defaults(func=_schedule)
    cancel.set_defaults(func=_cancel)


def _add_recurrence(p: argparse.ArgumentParser) -> None:
    """The flags of a recurring schedule, --group and --window."""
    p.add_argument("--cron", metavar="EXPR", help="recur by a cron expression: 5 fields "
                   "(minute hour day month weekday) or 6 with the second first, e.g. "
                   "'0 9 * * 1-5'")  # fmt: skip
    p.add_argument("--every", metavar="DURATION", help="recur at a fixed rate, e.g. 15m")
    p.add_argument("--time-zone", metavar="ZONE", default="UTC",
                   help="IANA zone the cron expression is read in (default UTC)")  # fmt: skip
    p.add_argument("--until", metavar="TIME", type=duration_arg(parse_instant_ms),
                   help="no occurrence after this (ISO 8601 with timezone)")  # fmt: skip
    p.add_argument("--max-occurrences", metavar="N", type=int,
                   help="no occurrence numbered above N")  # fmt: skip
    p.add_argument("--catch-up", choices=[str(c) for c in CatchUp], default=str(DEFAULT_CATCH_UP),
                   help="what becomes of occurrences missed during an outage: all delivered, "
                   "only the latest, or none (default latest)")  # fmt: skip
    p.add_argument("--catch-up-window", metavar="DURATION", default="1m",
                   help="later than this an occurrence is missed (default 1m)")  # fmt: skip
    p.add_argument("--group", help="a group: listed, cancelled, paused and resumed together")
    p.add_argument("--window", metavar="DURATION", type=duration_arg(parse_duration_ms),
                   dest="window_ms", help="a flexible delivery window, e.g. 15m (at most "
                   f"{format_duration_ms(MAX_WINDOW_MS)}): delivered anywhere from the due "
                   "time to the due time plus the window, spread evenly; never early")  # fmt: skip


def recurrence_from_args(args: argparse.Namespace) -> Recurrence | None:
    """The recurrence the flags state, ``None`` without --cron and --every.

    Raises:
        ConfigError: it is refused, with the reason.
    """
    if args.cron is None and args.every is None:
        return None
    try:
        return Recurrence(
            cron=args.cron,
            every_ms=None if args.every is None else parse_duration_ms(args.every),
            time_zone=args.time_zone,
            until_ms=args.until,
            max_occurrences=args.max_occurrences,
            catch_up=CatchUp(args.catch_up),
            catch_up_window_ms=parse_duration_ms(args.catch_up_window),
        )
    except InvalidScheduleError as exc:
        raise ConfigError(str(exc)) from exc


def topics_to_write(args: argparse.Namespace) -> tuple[str, ...]:
    """The schedules topics of ``schedule`` and ``cancel`` (which write to the first):
    the flags, else :data:`TOPICS_ENV`, else :data:`FORMER_TOPIC_ENV` (with a warning),
    else the default."""
    given = topics_from(args, "--schedules-topic", TOPICS_ENV)
    if given:
        return given
    former = os.environ.get(FORMER_TOPIC_ENV, "").strip()
    if not former:
        return (DEFAULT_SCHEDULES_TOPIC,)
    warn(
        f"{FORMER_TOPIC_ENV} is deprecated and goes in the next release: set "
        f"{TOPICS_ENV}, as for delayline run, api and committer"
    )
    return (former,)


def _client_config(args: argparse.Namespace, schedules_topic: str) -> ClientConfig:
    return ClientConfig(
        bootstrap_servers=args.bootstrap_servers,
        schedules_topic=schedules_topic,
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
    if args.contract == HEADER and not args.id:
        raise ConfigError("give the schedule id with --id")
    if args.contract == HEADER and args.json_message:
        raise ConfigError("--json-message is for envelopes (--contract envelope)")
    contract_record = None if args.contract == HEADER else contract_writer(args, payload, headers)
    recurrence = recurrence_from_args(args)
    own = recurrence is not None or args.group is not None or args.window_ms is not None
    if args.contract != HEADER and own:
        raise ConfigError("--cron, --every, --group and --window are for the header contract")
    if args.window_ms is not None:
        try:
            check_window_ms(args.window_ms)
        except WindowError as exc:
            raise ConfigError(f"--window: {exc}") from exc
    if recurrence is None and args.at_ms is None and args.in_ms is None:
        raise ConfigError("give the due time with --at or --in (or a --cron or --every)")
    check_kafka(args)
    now_ms = SystemClock().now_ms()
    due_ms = args.at_ms if args.at_ms is not None else now_ms + (args.in_ms or 0)
    if due_ms < now_ms and recurrence is None:
        warn(f"due time is {format_duration_ms(now_ms - due_ms)} in the past; it fires at once")
    if contract_record is not None:
        return write_contract_record(args, contract_record(now_ms), due_ms)
    client_log.addFilter(_SaidByTheCli())

    async def write() -> None:
        async with AsyncScheduler(_client_config(args, topics_to_write(args)[0])) as client:
            written = await client.schedule(
                args.id,
                payload,
                args.topic,
                at=ms_to_datetime(due_ms),
                target_key=args.key,
                headers=headers,
                recurrence=recurrence,
                group=args.group,
                window_ms=args.window_ms,
            )
        first = "first at " if recurrence is not None else "at "
        due = ms_to_datetime(written.schedule.due_ms if written.schedule else due_ms)
        say(
            f"scheduled {args.id!r} -> {args.topic} {first}{due.isoformat()} "
            f"({written.topic}/{written.partition}@{written.offset})"
        )

    asyncio.run(write())
    return 0


def _cancel(args: argparse.Namespace) -> int:
    if (args.id is None) == (args.group is None):
        raise ConfigError("give a schedule ID or --group, not both")
    if args.group is not None:
        return act_on_group(args, "cancel")
    check_kafka(args)
    topic, partition, known = _pending_place(args)

    async def write() -> None:
        async with AsyncScheduler(_client_config(args, topic)) as client:
            written = await client.cancel(args.id, partition=partition)
        place = f"{written.topic}/{written.partition}@{written.offset}"
        note = f": {NOT_PENDING_NOTE}" if known is False else ""
        say(f"cancelled {args.id!r} ({place}){note}")

    asyncio.run(write())
    return 0


NOT_PENDING_NOTE = (
    "delayline api's catalog had no pending version of it (not read yet, or already "
    "delivered or cancelled); the cancel was written anyway"
)
"""What ``delayline cancel`` adds when the API did not know the id as pending."""


def _pending_place(args: argparse.Namespace) -> tuple[str, int | None, bool | None]:
    """Ask the API where ``args.id`` is pending: the topic and partition of its newest
    pending version, whatever contract it came in by (an envelope or a timer request is
    cancelled by a tombstone in its own topic and partition). The answer never stops
    the cancel: it only says where it goes.

    Returns:
        That place and ``True``; else (the API knows no pending version: ``False``; it
        cannot tell: ``None``) the first ``--schedules-topic`` and the id's own partition
        (``None``), or the partition a derived id (``<topic>:<partition>:<offset>``)
        names in one of the schedules topics.

    Raises:
        ConfigError: without the API's pending version, a derived id naming a topic
            that is not a schedules topic (and no ``--force``).
    """
    path = "/schedules/" + urllib.parse.quote(args.id, safe="")
    timeout_s = min(API_TIMEOUT_S, args.timeout_ms / 1000)
    known: bool | None = None
    try:
        status, body = api_get(args, path, timeout_s=timeout_s)
        if status not in (200, 404):
            detail = body.get("detail") if isinstance(body, dict) else None
            raise ApiUnavailableError(f"delayline api answered {status}: {detail or 'no detail'}")
        current = body.get("current") if status == 200 and isinstance(body, dict) else None
        if current is not None:
            return str(current["topic"]), int(current["partition"]), True
        known = False
    except ApiUnavailableError as exc:
        if not args.force:  # --force asked for no check: only the partition is lost
            warn(f"could not check that {args.id!r} is pending: {exc}; writing the cancel anyway")
    return (*_fallback_place(args), known)


def _fallback_place(args: argparse.Namespace) -> tuple[str, int | None]:
    """Where the cancel goes when the API does not say (see :func:`_pending_place`)."""
    topics = topics_to_write(args)
    own = parse_derived_id(args.id)
    if own is None:
        return topics[0], None
    if own[0] in topics:
        return own[0], own[1]
    if not args.force:
        raise ConfigError(
            f"{args.id!r} is the id of record {own[2]} of {own[0]}, partition {own[1]} (an "
            f"envelope or a timer request): pass --schedules-topic {own[0]} to cancel it "
            f"there, or --force to write the cancel to {topics[0]} anyway"
        )
    return topics[0], None
