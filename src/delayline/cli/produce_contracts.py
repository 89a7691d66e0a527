"""``delayline schedule --contract envelope|timer-request``: write a schedule as the
producers of those contracts do (docs/contracts.md)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from delayline.cli._common import (
    ENVELOPE_TOPICS_ENV,
    TIMER_REQUEST_TOPICS_ENV,
    add_topics_flag,
    say,
    topics_from,
)
from delayline.contract import OutgoingRecord
from delayline.contract.contracts import ENVELOPE, TIMER_REQUEST
from delayline.contract.envelope import render_envelope
from delayline.contract.ids import derived_id
from delayline.contract.timer_request import render_timer_request
from delayline.core.clock import SystemClock, ms_to_datetime
from delayline.errors import ConfigError, InvalidScheduleError
from delayline.kafka.produce import produce_one

FLAGS = {ENVELOPE: "--envelope-topic", TIMER_REQUEST: "--timer-request-topic"}
ENVS = {ENVELOPE: ENVELOPE_TOPICS_ENV, TIMER_REQUEST: TIMER_REQUEST_TOPICS_ENV}
WHAT = {ENVELOPE: "an envelope", TIMER_REQUEST: "a timer request"}


def add_contract_topics(parser: argparse.ArgumentParser) -> None:
    """``--envelope-topic`` and ``--timer-request-topic``: where ``schedule`` writes an
    envelope or a timer request (the same flags and variables as ``delayline run``)."""
    for contract, flag in FLAGS.items():
        add_topics_flag(parser, flag, ENVS[contract], f"topic {WHAT[contract]} is written to", None)


def contract_writer(
    args: argparse.Namespace, payload: bytes, headers: list[tuple[str, str]]
) -> Callable[[int], OutgoingRecord]:
    """The envelope or timer request to write, given the time of writing (checked now,
    before Kafka is asked anything).

    Raises:
        ConfigError: a flag that the contract cannot carry, or no topic named for it.
        InvalidScheduleError: the record would be dead-lettered.
    """
    topic = _topic(args)
    raw = tuple((name, value.encode()) for name, value in headers)
    if args.contract == TIMER_REQUEST:
        if args.id or args.json_message:
            raise ConfigError("a timer request has no --id (nor --json-message): its id is "
                              "<topic>:<partition>:<offset>")  # fmt: skip

        def request(now_ms: int) -> OutgoingRecord:
            due_ms = args.at_ms if args.at_ms is not None else now_ms + args.in_ms
            second = -(-max(due_ms, 0) // 1000)  # never before the due time
            out = render_timer_request(topic, second, args.topic, args.key or "",
                                       payload)  # fmt: skip
            return out._replace(headers=raw)

        request(0)  # refuses a bad target topic before Kafka is asked
        return request
    try:
        text = payload.decode("utf-8")
        # Numbers keep their digits (as the pipeline reads them).
        message = json.loads(text, parse_float=Decimal) if args.json_message else text
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidScheduleError(
            f"an envelope's message must be UTF-8 text or JSON: {exc}"
        ) from exc

    def envelope(now_ms: int) -> OutgoingRecord:
        # A countdown runs from the record's timestamp; a past due time is written as
        # such (an envelope's countdown cannot be negative).
        when: dict[str, Any] = (
            {"countdown_s": _seconds(args.in_ms)}
            if args.in_ms is not None and args.in_ms >= 0
            else {"at": _seconds(args.at_ms if args.at_ms is not None else now_ms + args.in_ms)}
        )
        return render_envelope(topic, args.topic, message, key=args.key,
                               schedule_id=args.id, headers=raw, **when)  # fmt: skip

    envelope(SystemClock().now_ms())
    return envelope


def _seconds(ms: int) -> int | float:
    """Milliseconds as JSON seconds: a whole number when it is one."""
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def write_contract_record(args: argparse.Namespace, record: OutgoingRecord, due_ms: int) -> int:
    if args.contract == TIMER_REQUEST:
        due_ms = int(record.key or b"0") * 1000  # the second it fires at
    partition, offset, _ = produce_one(args.bootstrap_servers, record, args.timeout_ms)
    sid = args.id or derived_id(record.topic, partition, offset)
    say(
        f"scheduled {args.contract} {sid!r} -> {args.topic} at "
        f"{ms_to_datetime(due_ms).isoformat()} ({record.topic}/{partition}@{offset})"
    )
    return 0


def _topic(args: argparse.Namespace) -> str:
    """The one topic of the contract's flag."""
    flag = FLAGS[args.contract]
    topics = topics_from(args, flag, ENVS[args.contract])
    if len(topics) != 1:
        given = "none" if not topics else ", ".join(topics)
        raise ConfigError(f"name the one {args.contract} topic to write to with {flag} "
                          f"(or {ENVS[args.contract]}); given: {given}")  # fmt: skip
    return topics[0]
