"""Retry a consumed record later, without blocking its partition: the consumer's side.

A consumer whose handler failed on a record calls :meth:`Retries.failed`: the record goes
to delayline as a schedule (its key, value and headers, with the retry headers of
:mod:`delayline.client.retry`), due after the policy's backoff, to its group's
retry topic, which the same consumer also reads. The next records of the partition flow
on meanwhile. A record that may not be retried (its error, or its attempts used up) goes
to the group's dead-letter topic instead, with the same headers and the reason.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message, Producer

from delayline.client._core import SchedulerCore
from delayline.client.config import ClientConfig, RetryPolicy
from delayline.client.retry import (
    DEAD_REASON,
    EXHAUSTED,
    NOT_RETRYABLE,
    RETRY_TOPIC,
    UNSCHEDULABLE,
    Failure,
)
from delayline.contract import ConsumedRecord, OutgoingRecord
from delayline.contract.topics import topic_name_problem
from delayline.core.clock import Clock, SystemClock
from delayline.errors import (
    ConfigError,
    DeliveryError,
    InvalidScheduleError,
    KafkaUnavailableError,
)
from delayline.kafka.produce import produce
from delayline.kafka.reader import to_consumed_record

log = logging.getLogger(__name__)

RECORD_OVERHEAD_BYTES = 100
"""A record's own framing in a batch, rounded up."""
RETRIED = "retried"
""":meth:`Retries.failed`'s answer: scheduled for another try."""
DEAD = "dead"
"""... sent to the dead-letter topic."""


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """Where a consumer group's retries and dead letters go, and when.

    Attributes:
        group: The consumer group (its ``group.id``): its retries come back to it alone.
        policy: Backoff, jitter and the most retries (``1 + policy.max_attempts`` tries).
        retry_topic: Where retries are delivered, read by the group besides its sources;
            ``<group>-retry`` by default (other groups of the source never see them).
        dead_letter_topic: Where records go that may not be retried;
            ``<group>-dlt`` by default.
        back_to_source: Deliver retries to the topic the record was first read from
            instead of the retry topic: every group of that topic then reads them again.
        not_retryable: Exception classes that go straight to the dead-letter topic.
        retryable: Decides for every other error (``None``: all are retryable).
        max_schedule_bytes: A retry larger than this as a schedule (the record, its
            headers and the retry headers) is a dead letter (``unschedulable``): keep it
            at most the schedules topic's ``max.message.bytes`` (Kafka's default, 1 MiB).
    """

    group: str
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    retry_topic: str = ""
    dead_letter_topic: str = ""
    back_to_source: bool = False
    not_retryable: tuple[type[BaseException], ...] = ()
    retryable: Callable[[BaseException], bool] | None = None
    max_schedule_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        if not self.group:
            raise ConfigError("a retry config needs the consumer group's name")
        if not self.retry_topic:
            object.__setattr__(self, "retry_topic", f"{self.group}-retry")
        if not self.dead_letter_topic:
            object.__setattr__(self, "dead_letter_topic", f"{self.group}-dlt")
        for what, name in (("retry", self.retry_topic), ("dead-letter", self.dead_letter_topic)):
            problem = topic_name_problem(name)
            if problem is not None:
                raise ConfigError(f"{what} topic name {name!r} is invalid: {problem}")

    def may_retry(self, error: BaseException) -> bool:
        """Whether ``error`` may be retried (it is not :attr:`not_retryable`, and
        :attr:`retryable` says yes)."""
        if isinstance(error, self.not_retryable):
            return False
        return self.retryable is None or bool(self.retryable(error))


def record_bytes(record: OutgoingRecord) -> int:
    """About what ``record`` takes of a topic's ``max.message.bytes``: its key, value and
    headers, and a record's own overhead."""
    headers = sum(len(n) + len(v or b"") + 2 for n, v in record.headers)
    return len(record.key or b"") + len(record.value or b"") + headers + RECORD_OVERHEAD_BYTES


def retry_id(group: str, message: ConsumedRecord) -> str:
    """The schedule id of ``message``'s retry: its group and place, so a consumer that
    fails on the same record again (after a crash, before its offset was committed)
    replaces its retry instead of adding one."""
    return f"retry/{group}/{message.topic}/{message.partition}/{message.offset}"


class Retries:
    """Sends failed records for another try later, or to the dead-letter topic.

    Guarantees: a record :meth:`failed` returned for is written once :meth:`flush`
    returns without error; commit the consumer's offsets only after that (a crash before
    the commit reads the record again, and its retry, written again with the same id,
    replaces the first). With a transactional ``producer`` whose transaction also holds
    the offsets (:class:`~delayline.client.consumer.loop.RetryingConsumer`), a record is
    retried exactly once. Thread-safe.

    Args:
        client: The cluster and the schedules topic.
        config: The group's retry settings.
        producer: Writes the retries and dead letters (a transactional one, say); the
            client's own idempotent producer by default.
        clock: "Now" for due times; the system clock by default.
        draw: Random numbers in [0, 1) for the jitter.
    """

    def __init__(
        self,
        client: ClientConfig | str,
        config: RetryConfig,
        *,
        producer: Producer | None = None,
        clock: Clock | None = None,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self._core = SchedulerCore(client, clock, producer=producer)
        self._clock = clock or SystemClock()
        self._draw = draw
        self._lock = threading.Lock()
        self._failures: list[tuple[str, str]] = []
        self.retried = 0
        """Records sent for another try."""
        self.dead = 0
        """Records sent to the dead-letter topic."""

    @property
    def producer(self) -> Producer:
        """The producer the retries and dead letters are written with."""
        return self._core.producer

    def failed(self, message: Message | ConsumedRecord, error: BaseException) -> str:
        """Send ``message``, which its handler failed on with ``error``, for another try
        (:data:`RETRIED`) or to the dead-letter topic (:data:`DEAD`). Returns at once: the
        write is acknowledged by :meth:`flush`. A null value comes back empty. Another
        client's record (aiokafka's, say) is passed as a
        :class:`~delayline.contract.ConsumedRecord`.

        Raises:
            KafkaUnavailableError: the schedules topic's partitions could not be read.
            TopicConfigError: the schedules topic does not exist.
        """
        config = self.config
        now_ms = self._clock.now_ms()
        if not isinstance(message, ConsumedRecord):
            message = to_consumed_record(message)
        where = (message.topic, message.partition, message.offset)
        failure = Failure(message.headers, *where, now_ms, group=config.group)
        attempt = failure.retries + 1
        if not config.may_retry(error):
            return self._dead(message, failure, error, NOT_RETRYABLE)
        if attempt > config.policy.max_attempts:
            return self._dead(message, failure, error, EXHAUSTED)
        target = failure.source[0] if config.back_to_source else config.retry_topic
        due_ms = now_ms + config.policy.jittered_ms(attempt, self._draw())
        schedule_id = retry_id(config.group, message)
        try:
            _, record = self._core.schedule_record(
                schedule_id,
                message.value or b"",
                target,
                due_ms,
                message.key,
                failure.headers(config.group, error, attempt=attempt),
            )
        except InvalidScheduleError as refused:
            return self._unschedulable(message, failure, error, str(refused))
        size = record_bytes(record)
        if size > config.max_schedule_bytes:
            limit = config.max_schedule_bytes
            return self._unschedulable(
                message, failure, error, f"{size} bytes as a schedule, over {limit}"
            )
        self._produce(schedule_id, record)
        with self._lock:
            self.retried += 1
        return RETRIED

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until every retry and dead letter is acknowledged.

        Raises:
            DeliveryError: some were refused (their ids); do not commit the offsets.
            KafkaUnavailableError: some were still unacknowledged at the timeout.
        """
        remaining = self.producer.flush(timeout_s)
        self.raise_failures()
        if remaining:
            raise KafkaUnavailableError(
                f"{remaining} retry or dead-letter record(s) unacknowledged after {timeout_s:g} s"
            )

    def discard_failures(self) -> None:
        """Forget what was refused so far: the writes of an aborted transaction."""
        self.producer.poll(0)
        with self._lock:
            self._failures.clear()

    def _unschedulable(
        self, message: ConsumedRecord, failure: Failure, error: BaseException, why: str
    ) -> str:
        log.warning("record %s/%d/%d cannot be scheduled for a retry: %s",
                    message.topic, message.partition, message.offset, why)  # fmt: skip
        return self._dead(message, failure, error, UNSCHEDULABLE)

    def _dead(
        self, message: ConsumedRecord, failure: Failure, error: BaseException, reason: str
    ) -> str:
        config = self.config
        retried_to = failure.source[0] if config.back_to_source else config.retry_topic
        headers = (
            *failure.headers(config.group, error, attempt=None),
            (RETRY_TOPIC, retried_to.encode()),
            (DEAD_REASON, reason.encode()),
        )
        topic = self.config.dead_letter_topic
        record = OutgoingRecord(topic, message.key, message.value, headers)
        self._produce(retry_id(self.config.group, message), record)
        log.info(
            "record %s/%d/%d to the dead-letter topic %s (%s)",
            message.topic, message.partition, message.offset, topic, reason,
        )  # fmt: skip
        with self._lock:
            self.dead += 1
        return DEAD

    def _produce(self, ident: str, record: OutgoingRecord) -> None:
        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                log.warning("record %s to %s not written: %s", ident, record.topic, err)
                with self._lock:
                    self._failures.append((ident, str(err)))

        produce(self.producer, record, on_delivery)
        self.producer.poll(0)

    def raise_failures(self) -> None:
        """Raise what was refused since the last call (:class:`DeliveryError`)."""
        with self._lock:
            failures, self._failures = self._failures, []
        if failures:
            raise DeliveryError(failures)
