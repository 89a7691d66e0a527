"""The blocking client, on confluent-kafka."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Literal, overload

from delayline.client._core import HeadersArg, SchedulerCore, own_of
from delayline.client.config import ClientConfig, RetryPolicy
from delayline.client.written import Written
from delayline.contract import OutgoingRecord
from delayline.core.clock import Clock
from delayline.core.model import Schedule
from delayline.core.recurrence import Recurrence
from delayline.errors import DeliveryError, KafkaUnavailableError
from delayline.kafka.produce import produce

log = logging.getLogger(__name__)


class Scheduler:
    """Writes schedules and cancels to the schedules topic.

    Schedules are written asynchronously: each call queues a record and returns;
    :meth:`flush` (also run on close) waits until Kafka acknowledged every queued record
    and raises :class:`~delayline.errors.DeliveryError` naming the ids that failed.
    :meth:`cancel` waits for its own record's acknowledgement by default, so a cancel
    that returned is durable.
    Records are idempotent and acknowledged by all in-sync replicas. A schedule and
    its cancel always land in the same partition (Java-compatible murmur2).

    Example:
        >>> with Scheduler("127.0.0.1:9092") as s:            # doctest: +SKIP
        ...     s.schedule("order-42-reminder", b"{...}", "reminders", delay=90)
    """

    def __init__(self, config: ClientConfig | str, *, clock: Clock | None = None) -> None:
        """Create a client.

        Args:
            config: A :class:`ClientConfig`, or just the bootstrap servers.
            clock: Source of "now" for ``delay=``; the system clock by default.
        """
        self._core = SchedulerCore(config, clock)
        self._lock = threading.Lock()
        self._failures: list[tuple[str, str]] = []

    @property
    def config(self) -> ClientConfig:
        """The settings in use."""
        return self._core.config

    def schedule(
        self,
        id: str,
        payload: bytes | str,
        target_topic: str,
        *,
        at: datetime | None = None,
        delay: timedelta | float | None = None,
        target_key: bytes | str | None = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        recurrence: Recurrence | None = None,
        group: str | None = None,
        window_ms: int | None = None,
    ) -> Schedule:
        """Queue a schedule: deliver ``payload`` to ``target_topic`` at ``at`` or after ``delay``.

        A later schedule with the same ``id`` replaces this one.

        Args:
            id: Schedule id, unique per pending schedule.
            payload: Value of the delivered record (str is UTF-8 encoded).
            target_topic: Where to deliver.
            at: Absolute due time, a timezone-aware datetime. One already past is
                written and fires at once; a warning naming the id is logged.
            delay: Relative due time, a timedelta or seconds.
            target_key: Key of the delivered record; ``None`` delivers a null key.
            headers: Extra headers carried onto the delivered record.
            partition: Write to this partition instead of the id's own (Java's murmur2
                partitioner): to replace or cancel a version another partitioner wrote,
                so that compaction removes it.
            recurrence: Deliver it again and again
                (``Recurrence(cron="0 9 * * 1-5", time_zone="Europe/Berlin")``): ``at``
                or ``delay`` is then the start (now when neither is given), and the
                schedule is due at its first occurrence from then on. Each occurrence
                is delivered once, with headers ``scheduler-epoch`` (its nominal time)
                and ``delayline-occurrence`` (its number).
            group: A group name: the API lists, cancels, pauses and resumes a group's
                schedules together.
            window_ms: A flexible delivery window (header ``delayline-window``): it may
                be delivered anywhere from its due time to its due time plus the window,
                and schedules due alike are spread evenly over it; never early. 1 ms
                to 1 h.

        Returns:
            The schedule as written (for a recurring one, due at its first occurrence).

        Raises:
            InvalidScheduleError: the arguments break the contract.
            WindowError: ``window_ms`` is outside 1 ms..1 h (nothing is written).
            KafkaUnavailableError: the cluster did not answer the metadata request.
            TopicConfigError: the schedules topic does not exist.
        """
        due_ms = self._core.due_ms(at, delay, recurrence)
        own = own_of(recurrence, group, window_ms)
        schedule, record = self._core.schedule_record(
            id, payload, target_topic, due_ms, target_key, headers, partition, own
        )
        self._core.warn_if_past(id, at)
        self._send(id, record)
        return schedule

    def send_later(
        self, key: bytes | str | None, value: bytes | str, topic: str, when: datetime | timedelta
    ) -> str:
        """Deliver ``value`` with ``key`` to ``topic`` at ``when`` (``kafka-scheduler`` API).

        Args:
            key: Key of the delivered record.
            value: Value of the delivered record.
            topic: Where to deliver.
            when: Aware datetime (absolute) or timedelta (from now).

        Returns:
            The generated schedule id, for :meth:`cancel`.
        """
        schedule_id = str(uuid.uuid4())
        schedule, record = self._core.schedule_record(
            schedule_id, value, topic, self._core.when_ms(when), key, None
        )
        self._core.warn_if_past(schedule_id, when)
        self._send(schedule.id, record)
        return schedule_id

    @overload
    def cancel(
        self, id: str, *, partition: int | None = None, wait: Literal[True] = True
    ) -> Written: ...
    @overload
    def cancel(self, id: str, *, partition: int | None = None, wait: Literal[False]) -> None: ...
    @overload
    def cancel(self, id: str, *, partition: int | None = None, wait: bool) -> Written | None: ...
    def cancel(self, id: str, *, partition: int | None = None, wait: bool = True) -> Written | None:
        """Write a cancel (tombstone) for ``id`` and, by default, wait until Kafka
        acknowledged it (every in-sync replica): once it returns the cancel is durable.
        Cancelling an unknown id is harmless.

        Args:
            id: Schedule id.
            partition: Write to this partition instead of the id's own (Java's murmur2
                partitioner): to replace or cancel a version another partitioner wrote,
                so that compaction removes it.
            wait: ``False`` queues the cancel and returns at once, as schedules are
                (:meth:`flush` then reports a failure).

        Returns:
            Where Kafka stored the cancel; ``None`` with ``wait=False``.

        Raises:
            InvalidScheduleError: an empty id, or ``partition`` is not one of the topic's.
            DeliveryError: Kafka refused or lost the cancel (nothing is left to flush
                for it).
            KafkaUnavailableError: no acknowledgement within
                ``config.delivery_timeout_ms``; the cancel stays queued and may still be
                written (a failure then shows in :meth:`flush`). Repeating it is harmless.
        """
        record = self._core.cancel_record(id, partition)
        if not wait:
            self._send(id, record)
            return None
        return self._send_and_wait(id, record)

    def schedule_retry(
        self,
        id: str,
        payload: bytes | str,
        target_topic: str,
        *,
        previous_headers: HeadersArg = None,
        attempt: int | None = None,
        target_key: bytes | str | None = None,
        policy: RetryPolicy | None = None,
    ) -> Schedule:
        """Schedule another try of a failed message with exponential backoff.

        The attempt number comes from ``attempt`` or the ``retry-attempt`` header of
        ``previous_headers`` (plus one). The delivered record carries
        ``retry-attempt`` and ``retry-original-timestamp`` (epoch ms of the first try).

        Raises:
            RetriesExhaustedError: the attempt is beyond ``policy.max_attempts``.
        """
        schedule, record = self._core.retry_record(
            id, payload, target_topic, attempt, previous_headers, target_key, policy
        )
        self._send(id, record)
        return schedule

    def flush(self, timeout_ms: int | None = None) -> None:
        """Wait until every queued record is acknowledged.

        Raises:
            DeliveryError: some records were refused; the error lists their ids.
            KafkaUnavailableError: records were still unacknowledged at the timeout.
        """
        timeout_s = (
            timeout_ms if timeout_ms is not None else self.config.delivery_timeout_ms
        ) / 1000
        remaining = self._core.producer.flush(timeout_s)
        with self._lock:
            failures, self._failures = self._failures, []
        if failures:
            raise DeliveryError(failures)
        if remaining:
            raise KafkaUnavailableError(
                f"{remaining} record(s) still unacknowledged after {timeout_s:g} s"
            )

    def close(self) -> None:
        """Flush and release the producer."""
        self.flush()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            # Do not hide the original error behind a flush failure.
            self._core.producer.flush(self.config.delivery_timeout_ms / 1000)

    def _send_and_wait(self, schedule_id: str, record: OutgoingRecord) -> Written:
        """Produce ``record`` and serve delivery reports until Kafka answered for it, at
        most ``config.delivery_timeout_ms``."""
        answered = threading.Event()
        outcome: list[tuple[Any, Any]] = []  # (error, message), once answered
        waiting = [True]  # under self._lock: False once this call stopped waiting

        def on_delivery(err: Any, msg: Any) -> None:
            with self._lock:
                if waiting[0]:
                    outcome.append((err, msg))
                    answered.set()
                    return
            self._failed(schedule_id, err)  # answered after the caller gave up

        produce(self._core.producer, record, on_delivery)
        deadline = time.monotonic() + self.config.delivery_timeout_ms / 1000
        while not answered.is_set() and (left := deadline - time.monotonic()) > 0:
            self._core.producer.poll(min(left, 0.1))
        with self._lock:
            waiting[0] = False
        if not outcome:
            raise KafkaUnavailableError(
                f"the record for schedule {schedule_id!r} was not acknowledged within "
                f"{self.config.delivery_timeout_ms} ms; it stays queued"
            )
        err, msg = outcome[0]
        if err is not None:
            log.warning("record for schedule %s not written: %s", schedule_id, err)
            raise DeliveryError([(schedule_id, str(err))])
        return Written(schedule_id, msg.topic(), msg.partition(), msg.offset(), None)

    def _failed(self, schedule_id: str, err: Any) -> None:
        if err is not None:
            log.warning("record for schedule %s not written: %s", schedule_id, err)
            with self._lock:
                self._failures.append((schedule_id, str(err)))

    def _send(self, schedule_id: str, record: OutgoingRecord) -> None:
        def on_delivery(err: Any, _msg: Any) -> None:
            self._failed(schedule_id, err)

        produce(self._core.producer, record, on_delivery)
        self._core.producer.poll(0)
