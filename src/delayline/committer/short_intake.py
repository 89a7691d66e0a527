"""Short-notice versions into a committer's plan: the rules asked off its thread, what
they give this committer planned like a hand-over, what is done told back.

The watch tells :class:`~delayline.committer.short_notice.ShortVersions` what it reads;
each step of the committer takes the answer of the rules asked at an earlier step (a
:class:`~delayline.kafka.notice_store.NoticeFollower` call: two requests to Kafka, on a
worker thread, so a broker that does not answer never holds the committer's loop),
judges by it what was read before it was asked, and plans each version given as a
:class:`~delayline.committer.pending.Pending` of its own (:attr:`Pending.short`): no
in-flight record, a key made from its place (:func:`~delayline.committer.pending.short_key`).
Rules are asked only while something read waits to be judged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import Executor, Future
from typing import Protocol

from confluent_kafka import Message

from delayline.committer.due_plan import DuePlan
from delayline.committer.pending import Pending, short_key
from delayline.committer.rereads import Place
from delayline.committer.short_notice import (
    Mark,
    Short,
    ShortVersions,
    Told,
    short_candidate,
)
from delayline.contract.contracts import InputParser
from delayline.contract.formats import SHORT_POSITIONS
from delayline.contract.notice import NoticeRules
from delayline.contract.records import handed_over, own_tombstone_of
from delayline.core.clock import Clock
from delayline.errors import KafkaUnavailableError, RecordFormatError
from delayline.kafka.reader import message_headers, to_consumed_record

log = logging.getLogger(__name__)

RETRY_MS = 1_000
"""How long after Kafka did not answer a request for the rules, or answered that they
are pending, the next is made."""


class NoticeSource(Protocol):
    """Where the rules are asked (:class:`~delayline.kafka.notice_store.NoticeFollower`):
    each answer holds the rules of a moment after the call began."""

    def rules(self, timeout_s: float = 10.0) -> NoticeRules:
        """The rules now (raises :class:`KafkaUnavailableError` when Kafka did not
        answer in time)."""
        ...

    def close(self) -> None:
        """Release its clients."""
        ...


class ShortIntake:
    """Plans the short-notice versions a committer's watch reads that are its own.

    Guarantees (with :class:`ShortVersions`'): a version is planned only when judged
    by rules asked after it was read, and planned again only after a re-read, with the
    record that settled it (withheld then); a version shown delivered after it was
    planned is returned by :meth:`delivered` to withhold. Not thread-safe (the
    committer's thread); the rules are asked on ``worker``.

    Args:
        source: Where the rules are asked.
        plan: The session's plan.
        clock: The host's time.
        worker: Runs the requests for the rules.
    """

    def __init__(self, source: NoticeSource, plan: DuePlan, clock: Clock, worker: Executor) -> None:
        self.versions = ShortVersions()
        self._source = source
        self._plan = plan
        self._clock = clock
        self._worker = worker
        self._asked: tuple[Mark, Future[NoticeRules]] | None = None
        self._retry_at_ms = 0
        self._serial = 0
        self._closed = False
        self.planned = 0
        """Short versions planned since the start of the session."""

    @property
    def asking(self) -> bool:
        """Whether rules were asked and not answered yet (the committer then looks
        again soon)."""
        return self._asked is not None

    def step(self, owned: Collection[int]) -> list[Pending]:
        """Take the rules' answer, if it came, and plan what they give of the in-flight
        partitions ``owned`` (delivered from now on); then ask again if something read
        waits. Never blocks.

        Returns:
            The versions planned now.

        Raises:
            DelaylineError: the rules cannot be read (not authorised, a format this
                release does not read): the committer cannot tell its versions.
        """
        versions = self.versions
        gone = versions.owned - set(owned)
        if gone:
            versions.release(gone)  # their next owner reads them again
        versions.owned |= set(owned)
        planned: list[Pending] = []
        asked = self._asked
        if asked is not None and asked[1].done():
            self._asked = None
            planned = self._judge(*asked)
        if self._asked is None and versions.waiting:
            now = self._clock.now_ms()
            if now >= self._retry_at_ms:
                mark = versions.mark()
                self._asked = (mark, self._worker.submit(self._source.rules))
        return planned

    def delivered(self) -> list[Short]:
        """Versions planned whose delivery a later read showed (to withhold), each once."""
        return self.versions.take_delivered()

    def done(self, pending: Pending) -> None:
        """``pending``'s group ended (delivered, withheld or refused)."""
        if pending.short is not None:
            self.versions.done(pending.short)

    def metadata(self, partition: int) -> str:
        """What goes with in-flight ``partition``'s committed offset: where its next
        owner reads the input again from (:meth:`ShortVersions.positions`)."""
        return encode_positions(self.versions.positions(partition))

    def starts(self, metadata: Mapping[int, str], partitions: Iterable[int]) -> dict[Place, int]:
        """Where the watch reads the input from so that it misses no short version of
        the in-flight ``partitions`` that is not delivered: per input partition, the
        earliest of their positions in ``metadata`` (committed with their offsets). A
        partition without them (never committed by a committer that took short
        versions) is read from the first epoch with a notice, the rules asked now
        (blocking: at a start).

        Raises:
            KafkaUnavailableError: the rules could not be read.
            RecordFormatError, FormatVersionError: metadata this release does not read.
        """
        out: dict[Place, int] = {}
        first: dict[Place, int] | None = None
        for partition in partitions:
            text = metadata.get(partition, "")
            found = decode_positions(text, f"in-flight partition {partition}'s metadata")
            if found is None:
                first = self._first_starts() if first is None else first
                found = first
            for place, offset in found.items():
                out[place] = min(out.get(place, offset), offset)
        return out

    def reread(
        self,
        metadata: Mapping[int, str],
        partitions: Iterable[int],
        read_to: Mapping[Place, int],
        parse: InputParser,
    ) -> ShortReread:
        """What to read again for the in-flight ``partitions`` just taken over (their
        last owner's positions in ``metadata``, up to ``read_to``: where the watch has
        read), and what takes each record read again (see :class:`ShortReread`;
        ``parse``: the input topics' parser).

        Raises:
            As :meth:`starts`.
        """
        starts = self.starts(metadata, partitions)
        ranges = {place: (low, read_to.get(place, -1)) for place, low in starts.items()}
        return ShortReread(ranges, self.versions, parse)

    def _first_starts(self) -> dict[Place, int]:
        """Where the first epoch with a notice starts (none: no version was ever short),
        asked on the worker (never beside a request in flight there); a pending epoch
        starts later than anything read by now."""
        rules = self._worker.submit(self._source.rules).result()
        for epoch in rules.epochs:
            if epoch.notice_ms > 0:
                return {(t, p): o for t, parts in epoch.starts.items() for p, o in parts.items()}
        return {}

    def close(self) -> None:
        """Close the source once the request in flight, if any, has ended (on the
        worker, after it; at once if the worker is shut down)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._worker.submit(self._source.close)
        except RuntimeError:  # the worker was shut down: nothing runs on it any more
            self._source.close()

    def _judge(self, mark: Mark, answer: Future[NoticeRules]) -> list[Pending]:
        try:
            rules = answer.result()
        except KafkaUnavailableError as exc:
            log.warning("committer: notice rules not read (%s); asking again", exc)
            self._retry_at_ms = self._clock.now_ms() + RETRY_MS
            return []
        if rules.pending:  # a pipeline is settling them (or stopped while it did)
            self._retry_at_ms = self._clock.now_ms() + RETRY_MS
            return []
        now = self._clock.now_ms()
        planned = [self._pending(short, now) for short in self.versions.judge(rules, mark)]
        for pending in planned:
            self._plan.add(pending)
        self.planned += len(planned)
        return planned

    def _pending(self, short: Short, now_ms: int) -> Pending:
        """``short`` as a pending schedule of its in-flight partition."""
        self._serial += 1
        schedule = short.schedule
        written_ms = schedule.require_source().timestamp_ms
        return Pending(
            short.inflight_partition,
            -self._serial,
            short_key(schedule),
            schedule,
            read_ms=now_ms,
            missed=schedule.due_ms < written_ms,
            handed_ms=written_ms,
            short=short,
        )


class ShortReread:
    """Short versions and own tombstones read again for in-flight partitions taken
    over, given to :class:`ShortVersions` as if read where the watch was when the
    re-read began (:meth:`ShortVersions.read_again`).

    Args:
        ranges: By input partition, the offsets read again (from, to).
        versions: Where they go.
        parse: The input topics' parser.
    """

    def __init__(
        self,
        ranges: Mapping[Place, tuple[int, int]],
        versions: ShortVersions,
        parse: InputParser,
    ) -> None:
        self.ranges = dict(ranges)
        self._versions = versions
        self._parse = parse
        self._at = versions.reading_again()
        self._items: list[tuple[Told, int]] = []

    def record(self, msg: Message, now_ms: int) -> None:
        """Take ``msg``, read again at ``now_ms`` (outside the ranges: ignored)."""
        place = (msg.topic() or "", msg.partition() or 0)
        span, offset = self.ranges.get(place), msg.offset() or 0
        if span is None or not span[0] <= offset < span[1]:
            return
        if msg.value() is None:
            headers = message_headers(msg)
            own = own_tombstone_of(msg.key(), headers)
            if own is not None and not handed_over(headers):
                self._items.append(((place, *own), now_ms))
            return
        record = to_consumed_record(msg)
        version = short_candidate(record, self._parse.classify(record), self._parse)
        if version is not None:
            self._items.append((version, now_ms))

    def done(self) -> None:
        """The re-read ran to its end: give what it read."""
        self._versions.read_again(self._at, self._items)
        self._items = []


def encode_positions(positions: Mapping[Place, int]) -> str:
    """``positions`` (:meth:`ShortVersions.positions`) as the metadata of an in-flight
    partition's committed offset (JSON, in the current
    :data:`~delayline.contract.formats.SHORT_POSITIONS` format). A broker keeps 4,096
    bytes of it by default (``offset.metadata.max.bytes``): about 150 input partitions."""
    read: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(positions.items()):
        read.setdefault(topic, {})[str(partition)] = offset
    return json.dumps({"format": SHORT_POSITIONS.current, "read": read}, separators=(",", ":"))


def decode_positions(text: str, where: str) -> dict[Place, int] | None:
    """What :func:`encode_positions` wrote; ``None`` for no metadata (an offset committed
    by a release or a committer that took no short versions).

    Raises:
        FormatVersionError: written in a newer format than this release reads.
        RecordFormatError: other metadata.
    """
    if not text:
        return None
    try:
        value = json.loads(text)
        SHORT_POSITIONS.check(int(value["format"]), where)
        return {
            (str(topic), int(p)): int(offset)
            for topic, parts in value["read"].items()
            for p, offset in parts.items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RecordFormatError(f"{where}: not short-notice read positions ({exc})") from exc
