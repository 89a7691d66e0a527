"""``delayline tail TOPIC``: print each record as it arrives on a topic.

It reads committed records only (``read_committed``, as the pipeline's deliveries
should be read), in a throwaway consumer group that commits nothing. A record
carrying ``scheduler-epoch`` (a schedule, or a delivery, which keeps its headers)
shows its lateness: the time tail received it minus the due time.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from delayline.cli._common import (
    add_bootstrap,
    check_kafka,
    duration_arg,
    env_flag,
    positive_int,
    say,
    warn,
)
from delayline.contract import ConsumedRecord
from delayline.contract.headers import EPOCH, parse_epoch_ms
from delayline.core.clock import SystemClock, ms_to_datetime
from delayline.core.units import parse_duration_ms
from delayline.errors import KafkaUnavailableError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.metadata import topic_partitions
from delayline.kafka.reader import private_consumer, stable_ends, to_consumed_record

START_TIMEOUT_S = 10.0
"""Bound on the start-up requests: the topic's partitions and their end offsets."""
POLL_S = 0.5
RECHECK_S = 2.0
"""While Kafka is unreachable, how often tail asks whether it is back."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tail``."""
    p = sub.add_parser(
        "tail",
        help="print the records arriving on a topic (committed ones)",
        description="Print each record arriving on TOPIC: time received (UTC), "
        "topic/partition@offset, key, headers, value (text if UTF-8, else base64) and, "
        "when it carries scheduler-epoch, its lateness (received minus due, in ms). "
        "Reads committed records only; keeps waiting while Kafka is away; Ctrl-C stops.",
    )
    p.add_argument("topic", metavar="TOPIC", help="topic to read")
    add_bootstrap(p)
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the oldest record (default: only records arriving from now on)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per line: topic, partition, offset, timestamp_ms, "
        "received_ms, key, headers, value, encodings, due_ms, lateness_ms",
    )
    p.add_argument("--max-messages", type=positive_int, metavar="N", help="stop after N records")
    env_flag(
        p,
        "--timeout",
        env="DELAYLINE_TAIL_TIMEOUT",
        type=duration_arg(parse_duration_ms),
        dest="idle_timeout_ms",
        metavar="DURATION",
        help="stop after this long without a record (default: never)",
    )
    p.set_defaults(func=_tail)


@dataclass(frozen=True, slots=True)
class Received:
    """A record as tail shows it.

    Attributes:
        record: The record.
        received_ms: When tail received it (epoch ms).
    """

    record: ConsumedRecord
    received_ms: int

    @property
    def due_ms(self) -> int | None:
        """The due time in the first ``scheduler-epoch`` header, if it parses."""
        for name, value in self.record.headers:
            if name == EPOCH:
                try:
                    return parse_epoch_ms((value or b"").decode())
                except ValueError:  # not UTF-8, or not an epoch: no lateness to show
                    return None
        return None

    @property
    def lateness_ms(self) -> int | None:
        """Received minus due time (negative: not due yet), when there is a due time."""
        due = self.due_ms
        return None if due is None else self.received_ms - due


def encoded(raw: bytes | None) -> tuple[str | None, str | None]:
    """``raw`` as ``(text, "utf-8")``, ``(base64, "base64")``, or ``(None, None)``."""
    if raw is None:
        return None, None
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode(), "base64"


def json_line(seen: Received) -> str:
    """One record as one JSON object (``--json``)."""
    r = seen.record
    key, key_encoding = encoded(r.key)
    value, value_encoding = encoded(r.value)
    headers = []
    for name, raw in r.headers:
        text, encoding = encoded(raw)
        headers.append({"name": name, "value": text, "encoding": encoding})
    return json.dumps(
        {
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "timestamp_ms": r.timestamp_ms,
            "received_ms": seen.received_ms,
            "key": key,
            "headers": headers,
            "value": value,
            "encodings": {"key": key_encoding, "value": value_encoding},
            "due_ms": seen.due_ms,
            "lateness_ms": seen.lateness_ms,
        }
    )


def human_line(seen: Received) -> str:
    """One record on one line, for people."""
    r = seen.record
    received = ms_to_datetime(seen.received_ms).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    parts = [received, f"{r.topic}/{r.partition}@{r.offset}", _shown("key", r.key)]
    lateness = seen.lateness_ms
    if lateness is not None:
        parts.append(f"lateness {lateness} ms")
    if r.headers:
        parts.append("headers " + ", ".join(_header(n, v) for n, v in r.headers))
    parts.append(_shown("value", r.value))
    return "  ".join(parts)


def _shown(label: str, raw: bytes | None) -> str:
    text, encoding = encoded(raw)
    if text is None:
        return f"{label} (null)"
    if encoding == "base64":
        return f"{label} (base64) {text}"
    return f"{label} {_one_line(text)}"


def _header(name: str, raw: bytes | None) -> str:
    text, encoding = encoded(raw)
    if text is None:
        return f"{name}=(null)"
    return f"{name}=base64:{text}" if encoding == "base64" else f"{name}={_one_line(text)}"


def _one_line(text: str) -> str:
    """Control characters escaped, so that a record stays on one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class Reachability:
    """Says once on stderr that Kafka is unreachable, and once that it is back.

    librdkafka reports "all brokers down" through the consumer's ``error_cb`` (served
    by ``poll``) and keeps reconnecting on its own; it says nothing when a broker is
    back, so while it is away :meth:`recheck` asks for metadata now and then.
    """

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.down = False
        self._next_check = 0.0

    def on_error(self, error: KafkaError) -> None:
        """librdkafka's ``error_cb``."""
        if error.code() == KafkaError._ALL_BROKERS_DOWN and not self.down:
            self.down = True
            warn(f"Kafka at {self.bootstrap_servers} is unreachable; still trying (Ctrl-C stops)")

    def recheck(self, consumer: Consumer, topic: str) -> None:
        """While down, ask for metadata every :data:`RECHECK_S`; an answer means back."""
        if not self.down or time.monotonic() < self._next_check:
            return
        self._next_check = time.monotonic() + RECHECK_S
        try:
            consumer.list_topics(topic, timeout=1)
        except KafkaException:
            return
        self.back()

    def back(self) -> None:
        """Kafka answered (metadata, or a record arrived)."""
        if self.down:
            self.down = False
            _note(f"Kafka at {self.bootstrap_servers} is reachable again")


def _tail(args: argparse.Namespace) -> int:
    check_kafka(args)
    show = json_line if args.json else human_line
    watch = Reachability(args.bootstrap_servers)
    consumer = private_consumer(
        args.bootstrap_servers, "delayline-tail", overrides={"error_cb": watch.on_error}
    )
    try:
        with _stop_on_signals() as stopping:
            count = _assign(consumer, args.bootstrap_servers, args.topic, args.from_beginning)
            where = "the beginning" if args.from_beginning else "the end"
            partitions = f"{count} partition" + ("" if count == 1 else "s")
            _note(f"tailing {args.topic} ({partitions}) from {where}; Ctrl-C stops")
            _follow(consumer, args, lambda seen: say(show(seen)), watch, stopping)
    except BrokenPipeError:  # `delayline tail ... | head`: the reader left, so do we
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        consumer.close()
    return 0


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """SIGINT (Ctrl-C) and SIGTERM set the event instead of raising mid-poll."""
    stopping = threading.Event()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stopping
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _assign(consumer: Consumer, bootstrap_servers: str, topic: str, from_beginning: bool) -> int:
    """Assign every partition of ``topic`` at its start; return how many.

    Raises:
        KafkaUnavailableError: Kafka did not answer in time.
        TopicConfigError: the topic does not exist.
    """
    partitions = topic_partitions(consumer, topic, bootstrap_servers, START_TIMEOUT_S)
    if from_beginning:
        starts = dict.fromkeys(partitions, OFFSET_BEGINNING)
    else:
        starts = _committed_ends(bootstrap_servers, topic, partitions)
    consumer.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
    return len(partitions)


def _committed_ends(bootstrap_servers: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """The end of each partition for a ``read_committed`` reader (the last stable
    offset): asked now, so that every record committed after tail said it is ready is
    shown, including those of a transaction open at that moment."""
    admin = AdminClient(kafka_client_config(bootstrap_servers))
    ends = stable_ends(admin, ((topic, p) for p in partitions), START_TIMEOUT_S)
    return {p: offset for (_, p), offset in ends.items()}


def _follow(
    consumer: Consumer,
    args: argparse.Namespace,
    emit: Callable[[Received], None],
    watch: Reachability,
    stopping: threading.Event,
) -> None:
    """Poll until stopped, ``--max-messages`` records, or ``--timeout`` without one."""
    clock = SystemClock()
    shown = 0
    last = time.monotonic()
    warned: set[int] = set()
    idle_s = None if args.idle_timeout_ms is None else args.idle_timeout_ms / 1000
    while not stopping.is_set():
        msg = consumer.poll(POLL_S)
        if msg is None:
            if idle_s is not None and time.monotonic() - last >= idle_s:
                return
            watch.recheck(consumer, args.topic)
            continue
        error = msg.error()
        if error is not None:
            _report(error, args.topic, warned)
            continue
        watch.back()
        emit(Received(to_consumed_record(msg), clock.now_ms()))
        shown, last = shown + 1, time.monotonic()
        if args.max_messages is not None and shown >= args.max_messages:
            return


def _report(error: KafkaError, topic: str, warned: set[int]) -> None:
    """A read error: fatal ones end tail, others are said once each and waited out."""
    if error.fatal():
        raise KafkaUnavailableError(f"reading {topic}: {error.str()}")
    if error.code() not in warned:
        warned.add(error.code())
        warn(f"reading {topic}: {error.str()}; still trying")


def _note(message: str) -> None:
    print(f"delayline: {message}", file=sys.stderr, flush=True)
