"""Cancels and updates that arrive after a schedule was handed over: the committer's watch.

The hold hands a schedule to the committer a lead before its due time
(:mod:`delayline.fire.inflight`). A cancel, or a newer version, written after the batch
that handed it over reaches the hold a batch later (one to a few seconds), often after
the due time, when the hold no longer has the schedule: it counts the cancel
``unknown_cancel`` and plans the newer version as a new schedule. So the committer reads
the input topics itself, beside the hold, and *withholds* a handed-over version that a
later record of its id ends, by the hold's own rules:

* a cancel (not delayline's own tombstone) that supersedes the version
  (:func:`delayline.core.versions.supersedes`) ends it;
* a valid newer version ends it too; the hold plans the newer one as it would any;
* an invalid record, an older version, delayline's own tombstones and copies of the
  version itself end nothing (of the tombstones, those the hold drops unread are looked
  at once more: :mod:`delayline.committer.reviews`).

Each record is parsed as it is read, and only what ends a version is remembered: its
kind and its place among its id's versions (:class:`Later`), not the record.

A withheld version is not delivered: its group's transaction writes only its in-flight
tombstone. The guarantee: a cancel or update acknowledged by Kafka at least
:data:`READ_AHEAD_MS` before the due time wins. That long before it writes a group
(one written ahead: before it commits it) the committer asks the input partitions'
high watermarks, open transactions included, and waits until the watch has read up to
them (:meth:`InputWatch.acknowledged_ends`,
:func:`~delayline.committer.read_barrier.has_read`): a cancel written while a
transaction is open in its partition (delayline's own hand-over writes its tombstones
to the schedules topic) is read once that transaction ends, which delayline's own do
within milliseconds (their records to input topics go last:
:attr:`delayline.fire.transactional.FireConfig.last_topics`). One written later wins
when the watch has read it by then (it polls at least every :data:`POLL_MS` while a
group waits in a lane, from its write time on).
``delayline bench --scenario cancels`` measures how close to the due time that is.

The watch remembers what a record ends (:mod:`delayline.committer.later`) for at
least :data:`~delayline.committer.later.MEMORY_MS` and, in a committer that can read
the pipeline's checkpoint, until the pipeline has read that record and the committer
has checked every version handed over before (:meth:`LaterRecords.expire`): a
pipeline however far behind its input hands over nothing whose cancel the watch has
forgotten. A restarted committer reads the input topics from that long before the
oldest hand-over it finds pending, and from where the
batch that handed it over stopped reading, so a withheld version stays withheld; one
that takes an in-flight partition over mid-run reads the input again likewise for the
versions pending there (:meth:`InputWatch.reread`) before it delivers any of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from confluent_kafka import KafkaError, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from delayline.committer.arrivals import Arrivals
from delayline.committer.later import HOT_RECORDS, MEMORY_MS, Later, LaterRecords, later_from
from delayline.committer.rereads import Place, Rereads, widened
from delayline.committer.reviews import KafkaReviewWriter, ReviewCounts, Reviews
from delayline.committer.short_notice import ShortVersions, short_candidate
from delayline.contract.checks import ScheduleFields
from delayline.contract.contracts import InputParser
from delayline.contract.records import handed_over, own_tombstone_of, skippable_tombstone
from delayline.core.model import Cancel, Headers, Schedule
from delayline.kafka.config import kafka_client_config
from delayline.kafka.reader import (
    acknowledged_ends,
    message_headers,
    private_consumer,
    stable_ends,
    starts_at,
    to_consumed_record,
)

log = logging.getLogger(__name__)

POLL_MS = 10
"""The longest the committer waits on the in-flight topic before it polls the watch
again while a group waits in a lane (for the watch to read the input)."""
BATCH = 1_000
"""Records taken from the consumer in one call."""
FETCH_WAIT_MS = 500
"""The longest the broker holds the watch's fetch when nothing is new. A record, and a
transaction's records once it ends, are returned as they come whatever the hold (2-3 ms
here); what a hold delays is the end-of-partition event, one hold after them, which is
why positions are taken from the consumer (:meth:`InputWatch._take_positions`), which
moves past a transaction's marker with its last record. Held 10 ms, an idle broker
answered the watch 100 times a second."""
READ_AHEAD_MS = 20
"""How long before a delivery's commit time the committer reads the input to its end."""


class InputWatch:
    """Reads the pipeline's input topics for records that end handed-over versions.

    Args:
        bootstrap_servers: Kafka bootstrap list.
        parse: The input topics' parser (their contracts).
        now_ms: The host's time.
        memory_ms: See :class:`LaterRecords`.
        arrivals: Told, after each read, what arrived that the pipeline must read
            (:mod:`delayline.committer.arrivals`); ``None``: nobody asks.
        hot_records: See :class:`LaterRecords`.
        review_counts: Where what became of its reviews is counted (kept across the
            committer's sessions); ``None``: its own.

    Raises:
        KafkaUnavailableError: the topics' offsets could not be read.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        parse: InputParser,
        now_ms: Callable[[], int],
        memory_ms: int = MEMORY_MS,
        arrivals: Arrivals | None = None,
        hot_records: int = HOT_RECORDS,
        review_counts: ReviewCounts | None = None,
    ) -> None:
        self.parse = parse
        self.arrivals = arrivals
        self._arrived = 0
        self._earliest_due_ms: int | None = None
        self.now_ms = now_ms
        self._bootstrap_servers = bootstrap_servers
        self.later = LaterRecords(memory_ms, hot_records)
        self.read = 0
        """Records read since the start (for the committer's summary)."""
        self._consumer = private_consumer(
            bootstrap_servers,
            "delayline-watch",
            overrides={"enable.partition.eof": True, "fetch.wait.max.ms": FETCH_WAIT_MS},
        )
        self._admin = AdminClient(kafka_client_config(bootstrap_servers))
        self.positions: dict[Place, int] = {}
        """Per input partition, the offset up to which everything was read (the next
        to read): moved on by each record, each end of partition seen and the consumer's
        own position (past transaction markers and aborted records)."""
        self.started: dict[Place, int] = {}
        """Where :meth:`start` began reading each input partition."""
        self._rereads = Rereads(bootstrap_servers, self.later, BATCH, now_ms)
        self.reviews = Reviews(
            self.later, KafkaReviewWriter(bootstrap_servers), self._unseen, review_counts
        )
        """Own tombstones the hold must read after all (:mod:`delayline.committer.reviews`)."""
        self.taken: dict[Place, int] | None = None
        """The pipeline's progress, as :meth:`LaterRecords.expire` takes it (set by the
        committer: empty, nothing forgotten, until it has seen a logged batch); ``None``:
        not followed, the time alone decides."""
        self._assigned: list[Place] = []
        self.shorts: ShortVersions | None = None
        """Told each version it reads that may be of short notice, and each of
        delayline's own tombstones (:mod:`delayline.committer.short_notice`); ``None``:
        the committer delivers none itself."""

    def start(
        self,
        since_ms: int,
        give_up: Callable[[], bool],
        positions: Mapping[Place, int] | None = None,
    ) -> bool:
        """Read the input topics to their end offsets as of now, from ``since_ms`` (record
        time) or, where earlier, from ``positions`` (offset by topic and partition); False
        when ``give_up()`` cut it short. What is read now is remembered until
        :data:`delayline.committer.later.MEMORY_MS` after the first batch hands something over again
        (:meth:`LaterRecords.keep_until`)."""
        starts = self._starts(since_ms, positions)
        # A partition with no record that recent is read from its stable end as of now,
        # named, not from "the end" the client resolves later: a record written between
        # the two would be skipped.
        recent = [(tp.topic, tp.partition) for tp in starts if tp.offset < 0]
        stable = stable_ends(self._admin, recent, 30) if recent else {}
        assigned = [
            TopicPartition(tp.topic, tp.partition, stable[(tp.topic, tp.partition)])
            if tp.offset < 0
            else tp
            for tp in starts
        ]
        self._consumer.assign(assigned)
        # Read from there: what comes before is not the watch's (a re-read reaches back).
        self.positions = {(tp.topic, tp.partition): tp.offset for tp in assigned}
        self.started = dict(self.positions)
        if self.shorts is not None:
            self.shorts.begin(self.started)
        self._assigned = [(tp.topic, tp.partition) for tp in starts]
        # Each partition's end for this read_committed reader (its last stable offset),
        # asked through the admin client too: behind the consumer's held fetch, each
        # waited up to FETCH_WAIT_MS in turn (2.3 s at a restart).
        begun = {(tp.topic, tp.partition): tp.offset for tp in starts if tp.offset >= 0}
        highs = stable_ends(self._admin, begun, 30) if begun else {}
        ends = {place: high for place, high in highs.items() if high > begun[place]}
        while ends and not give_up():
            self.take_batch(self._consumer.consume(BATCH, 0.2), self.now_ms(), None)
            self._take_positions()
            for place in [place for place, end in ends.items() if self.positions[place] >= end]:
                del ends[place]
        self._report_arrived(self.now_ms())
        self._tell_shorts()
        if not ends:
            log.info(
                "committer watch: read %d input record(s) since %d, %d remembered",
                self.read,
                since_ms,
                len(self.later),
            )
        return not ends

    def reread(
        self,
        since_ms: int,
        positions: Mapping[Place, int] | None,
        give_up: Callable[[], bool],
        between: Callable[[], None],
        timeout_s: float = 30.0,
        also: tuple[Mapping[Place, tuple[int, int]], Callable[[Message, int], None]] | None = None,
    ) -> list[tuple[str, str]] | None:
        """Read again, with a consumer of its own, each input partition from
        ``since_ms`` (record time) or, where earlier, from ``positions``, up to where
        this watch may not remember a record (:meth:`Rereads.remembered_from`): what was
        forgotten there, or never read, is remembered again (as read now, for
        :attr:`LaterRecords.memory_ms` at least; what is still remembered stays as first
        read). ``also``: more ranges (by place, from and to) read again, and a call
        given each record read again. ``between()`` is called after each slice read
        (the committer keeps the watch itself polled meanwhile). Returns the (topic,
        schedule id) of each record noted, as :meth:`poll` does; ``None`` if
        ``give_up()`` cut it short.

        Raises:
            KafkaUnavailableError: nothing more was read for ``timeout_s``.
        """
        rereads = self._rereads
        todo: dict[Place, tuple[int, int]] = {}
        for tp in self._starts(since_ms, positions):
            place = (tp.topic, tp.partition)
            end = rereads.remembered_from(place, self.positions, self.started)
            if 0 <= tp.offset < end:
                todo[place] = (tp.offset, end)
        ranges, told = also or ({}, None)

        def reread_record(msg: Message, now_ms: int) -> tuple[str, str, Later] | None:
            if told is not None:
                told(msg, now_ms)
            return self._later_of(msg, now_ms, arrived=False)  # not counted as arrived

        return rereads.read(widened(todo, ranges), reread_record, give_up, between, timeout_s)

    def poll(self) -> list[tuple[str, str]]:
        """Read what arrived since the last call: the (topic, schedule id) of each."""
        out: list[tuple[str, str]] = []
        while True:
            msgs = self._consumer.consume(BATCH, 0)
            self.take_batch(msgs, self.now_ms(), out)
            if len(msgs) < BATCH:
                break
        self._take_positions()
        self._tell_shorts()
        now = self.now_ms()
        self._report_arrived(now)
        # Nothing read after a version that waits to be judged is forgotten meanwhile.
        oldest = None if self.shorts is None else self.shorts.oldest_ms()
        self.later.expire(now if oldest is None else min(now, oldest), self.taken)
        return out

    def take_batch(
        self, msgs: list[Message], now_ms: int, out: list[tuple[str, str]] | None = None
    ) -> None:
        """Take a batch its consumer returned, as :meth:`poll` does: note each record
        (read at ``now_ms``; into ``out`` the (topic, id) of each that ends something) and
        move :attr:`positions` past it or to an end of partition reported, before noting
        it: only what is published after the call is safe to wait on."""
        positions, later_of, eof = self.positions, self._later_of, KafkaError._PARTITION_EOF
        note = self.later.note
        for msg in msgs:
            error = msg.error()
            if error is not None and error.code() != eof:
                log.warning("committer watch: %s", error)
                continue
            place = (msg.topic() or "", msg.partition() or 0)
            offset = (msg.offset() or 0) + (error is None)
            if offset > positions.get(place, -1):
                positions[place] = offset
            if error is None:
                found = later_of(msg, now_ms)
                if found is not None:
                    note(*found)
                    if out is not None:
                        out.append(found[:2])
        if self.reviews.waiting:
            self.reviews.look()

    def acknowledged_ends(self, timeout_s: float = 10.0) -> dict[Place, int]:
        """The end of each input partition read, open transactions included, now: every
        record acknowledged by now is before it, and the watch (``read_committed``)
        reaches it once each transaction open now has ended. Thread-safe (its own
        client).

        Raises:
            KafkaUnavailableError: the offsets could not be read in time.
        """
        return acknowledged_ends(self._admin, self._assigned, timeout_s)

    def stable_ends(self, places: Iterable[Place], timeout_s: float = 10.0) -> dict[Place, int]:
        """The end of each of ``places`` (input partitions) for a ``read_committed``
        reader, now: a transaction open now ends it. Thread-safe (its own client).

        Raises:
            KafkaUnavailableError: the offsets could not be read in time.
        """
        return stable_ends(self._admin, places, timeout_s)

    def close(self) -> None:
        """Release the consumer (the arrivals it tells are down until another reads)."""
        if self.arrivals is not None:
            self.arrivals.stop()
        self.reviews.close()
        self._consumer.close()

    def _starts(self, since_ms: int, positions: Mapping[Place, int] | None) -> list[TopicPartition]:
        """Where to read each input partition from (:func:`starts_at`), asked through
        the admin client: the watch's consumer holds a fetch open on its connection
        (:data:`FETCH_WAIT_MS`), which a request behind it waits for."""
        return starts_at(self._admin, self.parse.topology.input_topics, since_ms, positions, 30)

    def _take_positions(self) -> None:
        """Move each partition's position to the consumer's, which is past what was
        taken from it, past the transaction markers and aborted records after that too:
        the end-of-partition event would say so only a fetch later (see
        :data:`FETCH_WAIT_MS`). Call after noting what was taken."""
        for tp in self._consumer.position([TopicPartition(t, p) for t, p in self._assigned]):
            place = (tp.topic, tp.partition)
            if tp.error is None and tp.offset > self.positions.get(place, -1):
                self.positions[place] = tp.offset

    def _later_of(
        self, msg: Message, now_ms: int, *, arrived: bool = True
    ) -> tuple[str, str, Later] | None:
        """What the record ``msg``, read at ``now_ms``, ends: (topic, id, how), or
        ``None`` for a record that ends nothing. With ``arrived`` (not a record read
        again), counts it among the arrivals unless it is delayline's own tombstone."""
        self.read += 1
        if msg.value() is None:
            headers = message_headers(msg)
            own = own_tombstone_of(msg.key(), headers)
            if own is not None:
                if arrived:
                    self._read_own_tombstone(msg, headers, own, now_ms)
                return None
        record = to_consumed_record(msg)
        parsed = self.parse.classify(record)
        if arrived and self.shorts is not None:
            version = short_candidate(record, parsed, self.parse)
            if version is not None:
                self.shorts.read_version(version, now_ms)
        if arrived and (not isinstance(parsed, Cancel) or parsed.fired_offset is None):
            self._arrived += 1  # and the earliest due time among them
            due = parsed.due_ms if isinstance(parsed, ScheduleFields | Schedule) else None
            earliest = self._earliest_due_ms
            if due is not None and (earliest is None or due < earliest):
                self._earliest_due_ms = due
        found = later_from(record, parsed, now_ms)
        if found is None:
            return None
        return record.topic, *found

    def _read_own_tombstone(
        self, msg: Message, headers: Headers, own: tuple[str, int], now_ms: int
    ) -> None:
        """delayline's own tombstone ``msg`` read at ``now_ms`` (``own``: the id and offset
        it names): it ends nothing and is not parsed; the hold may have to read it after
        all (a review), and it may show a short version delivered."""
        topic, partition = msg.topic() or "", msg.partition() or 0
        if skippable_tombstone(headers):
            self.reviews.read(topic, partition, msg.offset() or 0, msg.key() or b"", headers, *own)
        if self.shorts is not None and not handed_over(headers):
            self.shorts.read_own_tombstone((topic, partition), *own, now_ms)

    def _tell_shorts(self) -> None:
        """Tell :attr:`shorts` where each input partition was read to."""
        if self.shorts is not None:
            self.shorts.read_to(self.positions)

    def _unseen(self) -> dict[Place, int]:
        """Where the watch began reading each input partition that the pipeline still
        reads before (by its checkpoint, :attr:`taken`; all of them without one): what
        the pipeline hands over from there, the watch cannot tell what followed."""
        taken = self.taken
        return {
            place: start
            for place, start in self.started.items()
            if taken is None or taken.get(place, 0) < start
        }

    def _report_arrived(self, now_ms: int) -> None:
        """Tell the arrivals what was counted since the last report (nothing, too: the
        watch is reading)."""
        if self.arrivals is not None:
            self.arrivals.add(self._arrived, self._earliest_due_ms, now_ms)
        self._arrived, self._earliest_due_ms = 0, None
