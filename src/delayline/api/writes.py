"""Turn API bodies into schedules written through the schedules topic."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Awaitable
from datetime import UTC, datetime

from delayline.api.schemas import RecurrenceIn, ScheduleIn, Written
from delayline.catalog import Pending
from delayline.client import AsyncScheduler, ClientConfig
from delayline.client.aio import Written as ClientWritten
from delayline.contract.recurring import (
    at_occurrence,
    is_recurring,
    occurrence_number,
    one_off_catch_up,
    recurrence_of,
)
from delayline.core.clock import Clock, SystemClock, datetime_to_ms, ms_to_datetime
from delayline.core.model import MAX_EPOCH_MS, Schedule
from delayline.core.recurrence import CatchUp, Occurrence, Recurrence, RecurrenceError
from delayline.core.units import format_duration_ms, parse_duration_ms
from delayline.errors import ConfigError, InvalidScheduleError, KafkaUnavailableError

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
        recurrence = None if body.recurrence is None else recurrence_from(body.recurrence)
        due = due_datetime(body, self.clock, optional=recurrence is not None)
        # A recurrence starts then: its first occurrence is never past.
        late_ms = 0 if recurrence is not None else now_ms - datetime_to_ms(due)
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
                recurrence=recurrence,
                group=body.group,
                window_ms=body.window_ms,
            )
        )
        if late_ms <= 0:
            return _written(written)
        # As the command line does: most likely a mistake, never an error.
        warning = f"due time is {format_duration_ms(late_ms)} in the past; it fires at once"
        log.info("schedule %r: %s", schedule_id, warning)
        return _written(written).model_copy(update={"warning": warning})

    async def pause(self, version: Pending) -> Written:
        """Write ``version`` (pending, with its body) paused, in its own partition."""
        client = self.client(version.topic)
        return _written(
            await self._bounded(client.pause(_schedule(version), partition=version.partition))
        )

    async def resume(self, version: Pending, at: Occurrence) -> Written:
        """Write paused ``version`` resumed, due at ``at`` (its occurrence number too,
        for a recurring one), in its own partition."""
        client = self.client(version.topic)
        schedule = _schedule(version)
        if is_recurring(version.headers):
            schedule = at_occurrence(schedule, at)
        write = client.resume(schedule, at.nominal_ms, partition=version.partition)
        return _written(await self._bounded(write))

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


def recurrence_from(body: RecurrenceIn) -> Recurrence:
    """The recurrence ``body`` states.

    Raises:
        InvalidScheduleError: it is refused (422), with the library's reason.
    """
    try:
        return Recurrence(
            cron=body.cron,
            every_ms=None if body.every is None else parse_duration_ms(body.every),
            time_zone=body.time_zone,
            until_ms=None if body.until is None else datetime_to_ms(_aware(body.until)),
            max_occurrences=body.max_occurrences,
            catch_up=CatchUp(body.catch_up),
            catch_up_window_ms=parse_duration_ms(body.catch_up_window),
        )
    except ConfigError as exc:  # a duration
        raise InvalidScheduleError(f"recurrence: {exc}") from exc


def resume_point(version: Pending, fired_dues: list[int], now_ms: int) -> Occurrence | None:
    """Where paused ``version`` resumes: its due time (and occurrence number) when
    paused; ``None`` when it is not to be delivered at all.

    A recurring schedule whose paused version was read a little stale (an occurrence
    delivered just before the pause landed, ``fired_dues`` from the history says which)
    resumes after the last occurrence delivered, so none is delivered twice; its
    catch-up policy is applied when the occurrence is delivered. A one-off that fell due
    while paused follows the policy its headers state (``latest`` by default: delivered
    at once; ``none``, later than its window: ``None``).
    """
    due_ms = version.paused_due_ms if version.paused_due_ms is not None else version.due_ms
    try:
        recurrence = recurrence_of(version.headers)
        current = Occurrence(due_ms, occurrence_number(version.headers))
    except RecurrenceError:
        return Occurrence(due_ms, 1)  # dead-lettered with its reason when due
    if recurrence is not None:
        fired = max((d for d in fired_dues if d >= due_ms), default=None)
        return current if fired is None else recurrence.next_after(current, fired)
    policy, window_ms = one_off_catch_up(version.headers)
    if policy == CatchUp.NONE and now_ms - due_ms > window_ms:
        return None
    return current


def _schedule(version: Pending) -> Schedule:
    return Schedule(
        version.id,
        version.due_ms,
        version.target_topic,
        version.target_key,
        version.payload,
        version.headers,
    )


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def due_datetime(body: ScheduleIn, clock: Clock, *, optional: bool = False) -> datetime:
    """The due time the body asks for, as an aware datetime (now when ``optional`` and
    none is given: a recurrence's start).

    Raises:
        InvalidScheduleError: not exactly one form given, no time zone, or beyond 9999.
    """
    given = [body.due_at is not None, body.due_ms is not None, body.delay_ms is not None]
    if optional and not any(given):
        return ms_to_datetime(clock.now_ms())
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
