"""A consumer loop with retries done for you: read the sources and the group's retry topic,
hand each record to a handler, send what it failed on for a later try, commit.

Two modes. At least once (the default): a batch's retries are flushed before its offsets
are committed; a crash in between hands some records to the handler again. Exactly once
(``transactional=True``): the batch's retries, dead letters, whatever the handler wrote
with :attr:`RetryingConsumer.producer`, and the offsets commit in one Kafka transaction
(``send_offsets_to_transaction``); a crash aborts it and the batch is read again, so a
handler whose effects are records it writes there has each record's effect once (what
it wrote before it raised commits too: a record of each try).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from delayline.client.config import ClientConfig
from delayline.client.consumer.retries import Retries, RetryConfig
from delayline.client.consumer.topics import ensure_retry_topics
from delayline.core.clock import Clock
from delayline.errors import ConfigError
from delayline.kafka.config import kafka_client_config

log = logging.getLogger(__name__)

TRANSACTION_CALL_S = 60.0
"""The longest one call of a transaction (offsets, commit, abort) waits for Kafka."""

Handler = Callable[[Message], object]
"""Handles one record; an exception it raises is the record's failure."""


@dataclass(frozen=True, slots=True)
class LoopConfig:
    """How the loop reads and commits.

    Attributes:
        topics: The source topics (the retry topic is read besides them).
        transactional: Retries, dead letters, the handler's own records and the offsets
            in one transaction per batch: each record's effect once.
        instance: This process among the group's, unique among them and the same after a
            restart (the host name by default: one process per host). It names the
            process's transactional id and static group membership: a restarted process
            aborts what the killed one left open and takes its partitions back at once,
            instead of readers waiting for the transaction's timeout. Two processes with
            one instance fence each other.
        batch_size: Records read and committed together, at most.
        poll_timeout_ms: How long one read waits for records.
        transaction_timeout_ms: A transaction left open longer is aborted by the broker.
        create_topics: Make the retry and dead-letter topics at the start when missing.
        retry_partitions: Their partitions when made (0: as many as the source topic
            with the most).
    """

    topics: tuple[str, ...]
    transactional: bool = False
    instance: str = socket.gethostname()
    batch_size: int = 500
    poll_timeout_ms: int = 500
    transaction_timeout_ms: int = 30_000
    create_topics: bool = True
    retry_partitions: int = 0

    def __post_init__(self) -> None:
        if not self.topics:
            raise ConfigError("the loop needs at least one source topic")
        if self.batch_size < 1 or self.poll_timeout_ms < 0:
            raise ConfigError("need batch_size >= 1 and poll_timeout_ms >= 0")


class RetryingConsumer:
    """Reads ``loop.topics`` and the group's retry topic as ``retry.group``, and hands
    every record to ``handler``; a record it raises on goes to
    :meth:`Retries.failed`. The partition never waits for a retry: the next records flow
    while it is scheduled. See the module for the two modes' guarantees.

    Args:
        client: The cluster and the schedules topic (security settings included).
        retry: The group's retry settings.
        loop: What to read and how to commit.
        handler: Called once per record read (again after a crash, at least once mode).
        consumer_overrides: Extra librdkafka settings of the consumer.
        clock: "Now" for due times.
    """

    def __init__(
        self,
        client: ClientConfig,
        retry: RetryConfig,
        loop: LoopConfig,
        handler: Handler,
        *,
        consumer_overrides: dict[str, Any] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.loop = loop
        self._client = client
        self._handler = handler
        self.producer: Producer = Producer(_producer_settings(client, retry, loop))
        """The producer of the retries: a handler's records written with it commit with
        the batch (transactional mode)."""
        self.retries = Retries(client, retry, producer=self.producer, clock=clock)
        settings = kafka_client_config(
            client.bootstrap_servers,
            **{
                "group.id": retry.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                # Retries are written in transactions: only committed ones are read.
                "isolation.level": "read_committed",
                # Static membership: a restarted process (same instance) takes its
                # partitions back at once, not after the old one's session timed out.
                "group.instance.id": f"{retry.group}-{loop.instance}",
            },
        )
        settings.update(dict(client.kafka))
        settings.update(consumer_overrides or {})
        self.consumer = Consumer(settings)
        self.handled = 0
        """Records the handler returned for."""
        if loop.transactional:
            self.producer.init_transactions(loop.transaction_timeout_ms / 1000)

    def run(self, stop: threading.Event) -> None:
        """Read, handle and commit until ``stop`` is set; then close the consumer (the
        batch in hand is finished first).

        Raises:
            KafkaException: a fatal Kafka error (a fenced producer: another process
                took this instance's transactional id).
        """
        topics = [*self.loop.topics, self.retries.config.retry_topic]
        if self.loop.create_topics:
            ensure_retry_topics(self._client, self.retries.config, self._partitions())
        self.consumer.subscribe(topics)
        log.info("retrying consumer of %s in group %s started", ",".join(topics),
                 self.retries.config.group)  # fmt: skip
        try:
            while not stop.is_set():
                messages = self.consumer.consume(
                    self.loop.batch_size, self.loop.poll_timeout_ms / 1000
                )
                records = [m for m in messages if not _skipped(m)]
                if records:
                    self._batch(records)
        finally:
            self.consumer.close()

    def _partitions(self) -> int:
        """:attr:`LoopConfig.retry_partitions`, or the most any source topic has."""
        if self.loop.retry_partitions:
            return self.loop.retry_partitions
        counts = [1]
        for topic in self.loop.topics:
            found = self.consumer.list_topics(topic, timeout=30).topics.get(topic)
            if found is not None and found.error is None:
                counts.append(len(found.partitions))
        return max(counts)

    def _batch(self, records: Sequence[Message]) -> None:
        if not self.loop.transactional:
            for record in records:
                self._one(record)
            self.retries.flush()  # every retry acknowledged: now the offsets
            try:
                self.consumer.commit(offsets=_next_offsets(records), asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].fatal():
                    raise
                # Read again after a rebalance: each retry, written again with its id,
                # replaces itself.
                log.warning("offsets not committed (%s): the batch may be read again",
                            exc.args[0].str())  # fmt: skip
            return
        self.producer.begin_transaction()
        try:
            for record in records:
                self._one(record)
            self.producer.send_offsets_to_transaction(
                _next_offsets(records), self.consumer.consumer_group_metadata(), TRANSACTION_CALL_S
            )
            self.producer.commit_transaction(TRANSACTION_CALL_S)
        except BaseException as exc:
            error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            if error is not None and error.fatal():
                raise
            self._abort()  # nothing of the batch stays open for readers
            if error is None or not error.txn_requires_abort():
                raise
            log.warning("transaction aborted (%s): the batch is read again", error.str())
            self._rewind(records)
        finally:
            # A committed transaction had no failed write (its commit would have failed);
            # an aborted one's failures are its own.
            self.retries.discard_failures()

    def _abort(self) -> None:
        try:
            self.producer.abort_transaction(TRANSACTION_CALL_S)
        except KafkaException as exc:  # what made us abort is the error to report
            log.warning("abort failed: %s", exc.args[0].str() if exc.args else exc)

    def _one(self, record: Message) -> None:
        try:
            self._handler(record)
        except Exception as exc:
            self.retries.failed(record, exc)
        else:
            self.handled += 1

    def _rewind(self, records: Sequence[Message]) -> None:
        """Read an aborted batch again: each partition back to its first record in it."""
        first: dict[tuple[str, int], int] = {}
        for record in records:
            first.setdefault(_place(record), record.offset() or 0)
        for (topic, partition), offset in first.items():
            self.consumer.seek(TopicPartition(topic, partition, offset))


def _producer_settings(
    client: ClientConfig, retry: RetryConfig, loop: LoopConfig
) -> dict[str, Any]:
    settings = client.producer_config()
    if loop.transactional:
        settings["transactional.id"] = f"delayline-retry-{retry.group}-{loop.instance}"
        settings["transaction.timeout.ms"] = loop.transaction_timeout_ms
        # librdkafka refuses a message timeout past the transaction's.
        timeout = min(int(settings["delivery.timeout.ms"]), loop.transaction_timeout_ms)
        settings["delivery.timeout.ms"] = timeout
    return settings


def _skipped(message: Message) -> bool:
    """A partition's end or a passing error (logged: a missing topic, a broker away);
    raises a fatal one."""
    error = message.error()
    if error is None:
        return False
    if error.code() == KafkaError._PARTITION_EOF:
        return True
    if error.fatal():
        raise KafkaException(error)
    log.warning("consumer: %s", error.str())
    return True


def _next_offsets(records: Sequence[Message]) -> list[TopicPartition]:
    """Each partition's offset to commit: one past its last record."""
    last: dict[tuple[str, int], int] = {}
    for record in records:
        last[_place(record)] = record.offset() or 0
    return [TopicPartition(t, p, o + 1) for (t, p), o in last.items()]


def _place(record: Message) -> tuple[str, int]:
    return record.topic() or "", record.partition() or 0
