"""Keep a catalog store current from the schedules, history and dead-letter topics."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from delayline.catalog.events import Change, Role, changes_for
from delayline.catalog.store import CatalogStore, Position
from delayline.contract.contracts import InputParser
from delayline.contract.topology import Topology
from delayline.core.clock import Clock, SystemClock
from delayline.core.units import format_duration_ms
from delayline.kafka.errors import kafka_error
from delayline.kafka.reader import private_consumer, to_consumed_record

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FollowConfig:
    """What the follower reads.

    Attributes:
        topology: The cluster and the topics followed: every input topic, the
            history topic (when the pipeline writes one) and the dead-letter topic.
        batch_size: Records applied per store transaction at most.
        poll_timeout_ms: Longest wait for records before looking around again; also how
            long a batch may wait for more records, so about what a request that reads
            its own writes (:meth:`CatalogFollower.wait_read`) waits after a write.
        metadata_refresh_ms: How often to look for new topics and partitions.
        retention_ms: Forget versions of finished ids and dead letters older than
            this (checked hourly); ``None`` keeps everything.
    """

    topology: Topology
    batch_size: int = 5_000
    poll_timeout_ms: int = 100
    metadata_refresh_ms: int = 10_000
    retention_ms: int | None = 7 * 86_400_000

    def roles(self) -> dict[str, Role]:
        """Topic name to its role."""
        t = self.topology
        roles = dict.fromkeys(t.input_topics, Role.SCHEDULES)
        if t.history_topic:
            roles[t.history_topic] = Role.HISTORY
        roles[t.dead_letter_topic] = Role.DEAD_LETTER
        return roles


@dataclass(frozen=True, slots=True)
class FollowStatus:
    """A snapshot of the follower.

    Attributes:
        caught_up: Every followed partition was read to its end at least once.
        lag: Records not yet applied, per topic (as of the last look).
        missing_topics: Followed topics that do not exist (yet).
        records_applied: Records applied since start.
        records_skipped: Records the catalog could not use (logged with their offsets).
        last_error: The last error met since the last good batch, if any.
        unreachable_since_ms: Since when Kafka has not answered (every broker down, or
            a metadata request failed); ``None`` while it answers. Cleared as soon
            as records or metadata come again.
        unreachable_reason: What the client said when it lost Kafka.
    """

    caught_up: bool
    lag: dict[str, int] = field(default_factory=dict)
    missing_topics: list[str] = field(default_factory=list)
    records_applied: int = 0
    records_skipped: int = 0
    last_error: str | None = None
    unreachable_since_ms: int | None = None
    unreachable_reason: str | None = None


UNREACHABLE = frozenset(
    {
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._RESOLVE,
    }
)
"""librdkafka errors that mean Kafka does not answer (not that it refused something)."""


class CatalogFollower:
    """Reads the followed topics (``read_committed``) into a store, in a thread.

    Every batch of records is applied together with the new positions, so after
    a crash or restart it resumes where the store left off: no record is applied
    twice or skipped. :meth:`wait_read` lets a caller read its own writes: it waits
    until every record below given offsets is in the store.
    """

    def __init__(
        self, store: CatalogStore, config: FollowConfig, clock: Clock | None = None
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock or SystemClock()
        self.caught_up = threading.Event()
        self._roles = config.roles()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lag: dict[str, int] = {}
        self._missing: list[str] = list(self._roles)
        self._applied = 0
        self._skipped = 0
        self._last_error: str | None = None
        self._unreachable: tuple[int, str] | None = None  # (since, reason)
        self._read: dict[Position, int] = {}  # every record below it is in the store
        self._read_changed = threading.Condition()

    def start(self) -> None:
        """Start following in a daemon thread."""
        self._thread = threading.Thread(target=self._run, name="delayline-catalog", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop after the batch in hand is applied."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def status(self) -> FollowStatus:
        """Where the follower stands."""
        unreachable = self._unreachable
        return FollowStatus(
            caught_up=self.caught_up.is_set(),
            lag=dict(self._lag),
            missing_topics=list(self._missing),
            records_applied=self._applied,
            records_skipped=self._skipped,
            last_error=self._last_error,
            unreachable_since_ms=None if unreachable is None else unreachable[0],
            unreachable_reason=None if unreachable is None else unreachable[1],
        )

    def wait_read(self, ends: Mapping[Position, int], timeout_s: float) -> bool:
        """Wait until every record below ``ends`` (per partition, the next offset) is
        applied to the store and visible to readers; returns whether it was within
        ``timeout_s`` (never longer, whether the follower runs or not)."""

        def reached() -> bool:
            return all(self._read.get(p, 0) >= end for p, end in ends.items())

        with self._read_changed:
            return self._read_changed.wait_for(reached, max(0.0, timeout_s))

    def followed_inputs(self) -> list[Position]:
        """The partitions of input topics (schedules, envelopes, timer requests) the
        follower has found so far."""
        with self._read_changed:
            return [p for p in self._read if self._roles.get(p[0]) == Role.SCHEDULES]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._follow()
            except KafkaException as exc:  # Kafka away: say so once per outage, no trace
                error = kafka_error(exc)
                self._last_error = f"Kafka: {error or exc}"
                if error is not None and error.code() in UNREACHABLE:
                    self._lost_kafka(error)
                    log.debug("catalog follower: %s; retrying in 2 s", self._last_error)
                else:
                    log.warning("catalog follower: %s; retrying in 2 s", self._last_error)
                self._stop.wait(2.0)
            except Exception as exc:  # a broken batch: start over from the store's positions
                self._last_error = f"{type(exc).__name__}: {exc}"
                log.exception("catalog follower failed; resuming from stored positions")
                self._stop.wait(2.0)

    def _follow(self) -> None:
        consumer = private_consumer(
            self.config.topology.bootstrap_servers,
            "delayline-catalog",
            overrides={"enable.partition.eof": True, "error_cb": self._on_client_error},
        )
        assigned: dict[Position, int] = {}
        at_end: set[Position] = set()
        next_look = 0.0
        next_prune = time.monotonic() + 60
        try:
            while not self._stop.is_set():
                if time.monotonic() >= next_prune:
                    self._prune()
                    next_prune = time.monotonic() + 3600
                # While Kafka is lost, ask every round (raises until it answers again).
                if time.monotonic() >= next_look or self._unreachable is not None:
                    self._assign_new(consumer, assigned, 10 if self._unreachable is None else 2)
                    self._kafka_answered()
                    next_look = time.monotonic() + self.config.metadata_refresh_ms / 1000
                messages = consumer.consume(
                    self.config.batch_size, self.config.poll_timeout_ms / 1000
                )
                eof = self._apply(messages, assigned, at_end)
                self._publish_read(self._measure_lag(consumer, assigned), eof)
                if assigned and not self.caught_up.is_set() and at_end >= set(assigned):
                    log.info("catalog caught up (%d records applied)", self._applied)
                    self.store.optimize()
                    self.caught_up.set()
        finally:
            consumer.close()

    def _on_client_error(self, error: KafkaError) -> None:
        """librdkafka's error callback (served by ``consume`` on this thread)."""
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._lost_kafka(error)

    def _lost_kafka(self, error: KafkaError) -> None:
        if self._unreachable is None:
            reason = error.str()
            if error.code() == KafkaError._ALL_BROKERS_DOWN:  # librdkafka: "0/1 brokers are down"
                reason = f"no broker of {self.config.topology.bootstrap_servers} answers"
            self._unreachable = (self.clock.now_ms(), reason)
            log.warning("catalog: Kafka unreachable: %s", reason)

    def _kafka_answered(self) -> None:
        if self._unreachable is not None:
            since, _reason = self._unreachable
            self._unreachable = None
            away = format_duration_ms(self.clock.now_ms() - since)
            log.info("catalog: Kafka answers again (unreachable for %s)", away)

    def _prune(self) -> None:
        if self.config.retention_ms is None:
            return
        removed = self.store.prune(self.clock.now_ms() - self.config.retention_ms)
        if removed:
            log.info("catalog: forgot %d entries older than the retention", removed)

    def _apply(
        self, messages: list[Message], assigned: dict[Position, int], at_end: set[Position]
    ) -> dict[Position, int]:
        """Apply a batch of ``messages``; returns the offsets the partitions that reached
        their end in it ended at (a partition whose tail is only transaction markers
        has no record to say it was read past them)."""
        batch: list[tuple[Position, int, list[Change]]] = []
        eof: dict[Position, int] = {}
        skipped_before = self._skipped
        history_followed = self.config.topology.history_topic is not None
        parse = InputParser(self.config.topology)
        for msg in messages:
            error = msg.error()
            where = (msg.topic() or "", msg.partition() or 0)
            if error is None or error.code() == KafkaError._PARTITION_EOF:
                self._kafka_answered()  # a record or the end of a partition came
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(where)
                    eof[where] = msg.offset() or 0
                else:
                    self._last_error = str(error)
                    log.warning("catalog read error on %s[%d]: %s", *where, error)
                continue
            offset = msg.offset() or 0
            try:
                record = to_consumed_record(msg)
                found = changes_for(
                    record,
                    self._roles[record.topic],
                    history_followed=history_followed,
                    parse=parse,
                )
            except Exception as exc:  # e.g. a header name that is not UTF-8
                found = []
                self._skip(where, offset, exc)
            batch.append((where, offset, found))
        if not batch:
            return eof
        positions = {where: offset + 1 for where, offset, _ in batch}
        try:
            self.store.apply([c for _, _, found in batch for c in found], positions)
        except Exception as exc:
            log.warning("catalog batch failed (%s); applying its records one by one", exc)
            self._apply_one_by_one(batch)
        assigned.update(positions)
        self._applied += len(batch)
        if self._skipped == skipped_before:
            self._last_error = None  # a clean batch: whatever went wrong before is over
        return eof

    def _apply_one_by_one(self, batch: list[tuple[Position, int, list[Change]]]) -> None:
        """Find the record the store refuses, skip it, keep every other one."""
        for where, offset, found in batch:
            try:
                self.store.apply(found, {where: offset + 1})
            except Exception as exc:
                self._skip(where, offset, exc)
                self.store.apply([], {where: offset + 1})

    def _skip(self, where: Position, offset: int, exc: Exception) -> None:
        self._skipped += 1
        self._last_error = f"skipped {where[0]}/{where[1]}/{offset}: {type(exc).__name__}: {exc}"
        log.error("catalog skips record %s/%d/%d: %s", where[0], where[1], offset, exc)

    def _assign_new(
        self, consumer: Consumer, assigned: dict[Position, int], timeout_s: float
    ) -> None:
        metadata = consumer.list_topics(timeout=timeout_s)
        unseen: list[Position] = []
        missing = []
        for topic in self._roles:
            info = metadata.topics.get(topic)
            if info is None or info.error is not None:
                missing.append(topic)
                continue
            unseen += [(topic, p) for p in info.partitions if (topic, p) not in assigned]
        stored = self.store.positions() if unseen else {}
        new = [TopicPartition(t, p, stored.get((t, p), OFFSET_BEGINNING)) for t, p in unseen]
        for tp in new:
            assigned[(tp.topic, tp.partition)] = max(tp.offset, 0)
        if missing != self._missing and missing:
            log.warning("catalog: topics not found (yet): %s", ", ".join(missing))
        self._missing = missing
        if new:
            consumer.incremental_assign(new)
            log.info("catalog follows %d new partition(s)", len(new))

    def _publish_read(self, read: Mapping[Position, int], eof: Mapping[Position, int]) -> None:
        """Add ``read`` and ``eof`` (every record below them applied, per partition) to
        what :meth:`wait_read` sees, and wake its waiters. Called after each batch is
        applied; it never goes back (an applied record stays applied)."""
        with self._read_changed:
            merged = dict(self._read)
            for where, offset in [*read.items(), *eof.items()]:
                merged[where] = max(merged.get(where, 0), offset)
            self._read = merged
            self._read_changed.notify_all()

    def _measure_lag(
        self, consumer: Consumer, assigned: dict[Position, int]
    ) -> dict[Position, int]:
        """Measure the lag per topic; returns where each partition was applied up to."""
        # The consumer's position steps over transaction markers; the last record's
        # offset + 1 does not, and would leave a lag of one after every transaction.
        read = {
            (tp.topic, tp.partition): tp.offset
            for tp in consumer.position([TopicPartition(t, p) for t, p in assigned])
        }
        lag: dict[str, int] = {}
        done: dict[Position, int] = {}
        for (topic, partition), applied in assigned.items():
            position = max(applied, read.get((topic, partition), 0))
            done[(topic, partition)] = position
            # Cached: from the last fetch response. Asking the broker costs ~0.4 s per
            # partition while the consumer starts up.
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), cached=True
            )
            if high < 0:
                continue  # no fetch answered yet
            lag[topic] = lag.get(topic, 0) + max(0, high - position)
        self._lag = lag
        return done
