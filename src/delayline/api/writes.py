"""Turn API bodies into schedules written through the schedules topic."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Awaitable
from datetime import datetime

from delayline.api.schemas import ScheduleIn, Written
from delayline.client import AsyncScheduler, ClientConfig
from delayline.client.aio import Written as ClientWritten
from delayline.core.clock import Clock, SystemClock, datetime_to_ms, ms_to_datetime
from delayline.core.model import MAX_EPOCH_MS
from delayline.core.units import format_duration_ms
from delayline.errors import InvalidScheduleError, KafkaUnavailableError

log = logging.getLogger(__name__)


class Writers:
    """One asyncio client per schedules topic, made on first use.

    Args:
        bootstrap_servers: Kafka bootstrap list.
        timeout_ms: Bound on waiting for Kafka's acknowledgement of one write.
        clock: "Now" for ``delay_ms``.
    """

    def __init__(self, bootstrap_servers: str, timeout_ms: int, clock: Clock | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.clock = clock or SystemClock()
        self.timeout_ms = timeout_ms
        self._clients: dict[str, AsyncScheduler] = {}

    def client(self, topic: str) -> AsyncScheduler:
        """The client writing to ``topic``."""
        if topic not in self._clients:
            self._clients[topic] = AsyncScheduler(
                ClientConfig(
                    bootstrap_servers=self.bootstrap_servers,
                    schedules_topic=topic,
                    metadata_timeout_ms=self.timeout_ms,
                    delivery_timeout_ms=self.timeout_ms,
                )
            )
        return self._clients[topic]

    async def schedule(
        self, topic: str, schedule_id: str, body: ScheduleIn, partition: int | None = None
    ) -> Written:
        """Write ``body`` as the new version of ``schedule_id`` on ``topic`` (in
        ``partition``, where the current version is, when given). A due time already
        past is written too (it fires at once), with a ``warning`` in the answer.

        Raises:
            InvalidScheduleError: the body breaks the contract (422).
            KafkaUnavailableError: Kafka did not acknowledge in time (503).
        """
        now_ms = self.clock.now_ms()  # before a delay_ms is resolved: never past
        due = due_datetime(body, self.clock)
        late_ms = now_ms - datetime_to_ms(due)
        payload = decode(body.payload, body.payload_encoding, "payload")
        key = None
        if body.target_key is not None:
            key = decode(body.target_key, body.target_key_encoding, "target_key")
        headers = [(h.name, decode(h.value, h.encoding, f"header {h.name}")) for h in body.headers]
        written = await self._bounded(
            self.client(topic).schedule(
                schedule_id,
                payload,
                body.target_topic,
                at=due,
                target_key=key,
                headers=headers,
                partition=partition,
            )
        )
        if late_ms <= 0:
            return _written(written)
        # As the command line does: most likely a mistake, never an error.
        warning = f"due time is {format_duration_ms(late_ms)} in the past; it fires at once"
        log.info("schedule %r: %s", schedule_id, warning)
        return _written(written).model_copy(update={"warning": warning})

    async def cancel(self, topic: str, schedule_id: str, partition: int | None = None) -> Written:
        """Write a cancel of ``schedule_id`` on ``topic`` (in ``partition`` when given)."""
        client = self.client(topic)
        return _written(await self._bounded(client.cancel(schedule_id, partition=partition)))

    async def _bounded(self, write: Awaitable[ClientWritten]) -> ClientWritten:
        try:
            return await asyncio.wait_for(write, self.timeout_ms / 1000 + 1)
        except TimeoutError as exc:
            raise KafkaUnavailableError(
                f"Kafka did not acknowledge the write within {self.timeout_ms} ms"
            ) from exc

    async def close(self) -> None:
        """Flush and close every client."""
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


def due_datetime(body: ScheduleIn, clock: Clock) -> datetime:
    """The due time the body asks for, as an aware datetime.

    Raises:
        InvalidScheduleError: not exactly one form given, no time zone, or beyond 9999.
    """
    given = [body.due_at is not None, body.due_ms is not None, body.delay_ms is not None]
    if sum(given) != 1:
        raise InvalidScheduleError("give exactly one of due_at, due_ms and delay_ms")
    if body.due_at is not None:
        if body.due_at.tzinfo is None:
            raise InvalidScheduleError("due_at needs a time zone, e.g. 2030-01-01T12:00:00Z")
        due_ms = datetime_to_ms(body.due_at)
    elif body.due_ms is not None:
        due_ms = body.due_ms
    else:
        due_ms = clock.now_ms() + (body.delay_ms or 0)
    if due_ms > MAX_EPOCH_MS:
        raise InvalidScheduleError("due time is beyond year 9999")
    if due_ms < 0:
        raise InvalidScheduleError("due time is before 1970")
    return ms_to_datetime(due_ms)


def decode(text: str, encoding: str, what: str) -> bytes:
    """Bytes from API text: UTF-8, or base64 when ``encoding`` says so.

    Raises:
        InvalidScheduleError: ``encoding`` is base64 and the text is not.
    """
    if encoding == "utf-8":
        return text.encode("utf-8")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidScheduleError(f"{what} is not valid base64") from exc


def _written(w: ClientWritten) -> Written:
    return Written(id=w.id, topic=w.topic, partition=w.partition, offset=w.offset)
