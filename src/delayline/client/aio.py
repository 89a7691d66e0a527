"""The asyncio client. librdkafka runs its own threads; a poll thread resolves futures."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from delayline.client._core import HeadersArg, SchedulerCore, own_of
from delayline.client.config import ClientConfig, RetryPolicy
from delayline.client.written import Written
from delayline.contract import OutgoingRecord
from delayline.core.clock import Clock
from delayline.core.model import Schedule
from delayline.core.recurrence import Recurrence
from delayline.errors import DeliveryError, KafkaUnavailableError
from delayline.kafka.produce import produce

__all__ = ["AsyncScheduler", "Written"]  # Written: defined in delayline.client.written


class AsyncScheduler:
    """asyncio twin of :class:`~delayline.client.Scheduler`.

    Every write coroutine returns once Kafka acknowledged the record (acks=all,
    idempotent), with the partition and offset it got, or raises
    :class:`~delayline.errors.DeliveryError`. Use ``async with``.
    """

    def __init__(self, config: ClientConfig | str, *, clock: Clock | None = None) -> None:
        self._core = SchedulerCore(config, clock)
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="delayline-aio-poll", daemon=True)
        self._poller.start()

    @property
    def config(self) -> ClientConfig:
        """The settings in use."""
        return self._core.config

    async def schedule(
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
    ) -> Written:
        """Write a schedule; see :meth:`Scheduler.schedule` (with ``window_ms`` it may be
        delivered anywhere in [due, due + window], spread evenly over it, never early)."""
        due_ms = self._core.due_ms(at, delay, recurrence)
        own = own_of(recurrence, group, window_ms)
        await self._ensure_partitions()
        schedule, record = self._core.schedule_record(
            id, payload, target_topic, due_ms, target_key, headers, partition, own
        )
        self._core.warn_if_past(id, at)
        return await self._send(id, record, schedule)

    async def send_later(
        self, key: bytes | str | None, value: bytes | str, topic: str, when: datetime | timedelta
    ) -> Written:
        """Deliver ``value`` with ``key`` to ``topic`` at ``when``; the id is generated."""
        await self._ensure_partitions()
        schedule_id = str(uuid.uuid4())
        schedule, record = self._core.schedule_record(
            schedule_id, value, topic, self._core.when_ms(when), key, None
        )
        self._core.warn_if_past(schedule_id, when)
        return await self._send(schedule_id, record, schedule)

    async def pause(self, version: Schedule, *, partition: int | None = None) -> Written:
        """Write ``version`` (the pending one, as read) paused: it waits, due at the
        latest instant delayline accepts, remembering its due time in
        ``delayline-paused``. ``partition``: the version's own, when another
        partitioner wrote it."""
        await self._ensure_partitions()
        schedule, record = self._core.paused_record(version, partition)
        return await self._send(version.id, record, schedule)

    async def resume(
        self, version: Schedule, due_ms: int, *, partition: int | None = None
    ) -> Written:
        """Write paused ``version`` resumed, due at ``due_ms`` (usually the due time it
        had: :func:`delayline.contract.recurring.paused_due_ms`)."""
        await self._ensure_partitions()
        schedule, record = self._core.paused_record(version, partition, resume_ms=due_ms)
        return await self._send(version.id, record, schedule)

    async def cancel(self, id: str, *, partition: int | None = None) -> Written:
        """Write a cancel (tombstone) for ``id``; returns once Kafka acknowledged it, so
        the cancel is durable. See :meth:`Scheduler.cancel`.

        Raises:
            DeliveryError: Kafka refused the record or did not acknowledge it within
                ``config.delivery_timeout_ms``.
        """
        await self._ensure_partitions()
        return await self._send(id, self._core.cancel_record(id, partition), None)

    async def schedule_retry(
        self,
        id: str,
        payload: bytes | str,
        target_topic: str,
        *,
        previous_headers: HeadersArg = None,
        attempt: int | None = None,
        target_key: bytes | str | None = None,
        policy: RetryPolicy | None = None,
    ) -> Written:
        """Schedule another try with backoff; see :meth:`Scheduler.schedule_retry`."""
        await self._ensure_partitions()
        schedule, record = self._core.retry_record(
            id, payload, target_topic, attempt, previous_headers, target_key, policy
        )
        return await self._send(id, record, schedule)

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Wait until every queued record is acknowledged."""
        timeout_s = (
            timeout_ms if timeout_ms is not None else self.config.delivery_timeout_ms
        ) / 1000
        remaining = await asyncio.to_thread(self._core.producer.flush, timeout_s)
        if remaining:
            raise KafkaUnavailableError(
                f"{remaining} record(s) still unacknowledged after {timeout_s:g} s"
            )

    async def close(self) -> None:
        """Flush, then stop the poll thread."""
        try:
            await self.flush()
        finally:
            self._stop.set()
            await asyncio.to_thread(self._poller.join)

    async def __aenter__(self) -> AsyncScheduler:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _ensure_partitions(self) -> None:
        # The metadata request blocks; keep it off the event loop (once: it is cached).
        if not self._core.partitions_known:
            await asyncio.to_thread(self._core.partitions)

    async def _send(
        self, schedule_id: str, record: OutgoingRecord, schedule: Schedule | None
    ) -> Written:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Written] = loop.create_future()

        def settle(err: Any, msg: Any) -> None:
            if future.done():
                return
            if err is not None:
                future.set_exception(DeliveryError([(schedule_id, str(err))]))
            else:
                future.set_result(
                    Written(schedule_id, msg.topic(), msg.partition(), msg.offset(), schedule)
                )

        def on_delivery(err: Any, msg: Any) -> None:
            loop.call_soon_threadsafe(settle, err, msg)

        produce(self._core.producer, record, on_delivery)
        return await future

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._core.producer.poll(0.05)
