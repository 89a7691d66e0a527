"""What the sync and async schedulers share: building records and placing them."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from confluent_kafka import Producer

from delayline.client.config import ClientConfig, RetryPolicy
from delayline.client.partitioner import partition_for
from delayline.client.retry import plan_retry
from delayline.contract import OutgoingRecord, build_schedule, render_cancel, render_schedule
from delayline.contract.pacing import WindowError
from delayline.contract.recurring import (
    first_due_ms,
    own_headers,
    paused_headers,
    resumed_headers,
)
from delayline.core.clock import Clock, SystemClock, datetime_to_ms, ms_to_datetime
from delayline.core.model import MAX_EPOCH_MS, Headers, Schedule
from delayline.core.recurrence import Recurrence
from delayline.core.units import format_duration_ms
from delayline.errors import InvalidScheduleError
from delayline.kafka.metadata import topic_partitions

log = logging.getLogger(__name__)

HeadersArg = Mapping[str, str | bytes | None] | Iterable[tuple[str, str | bytes | None]] | None

PAST_DUE = "schedule %r is due %s in the past (%s); it fires at once"
"""The warning logged for a schedule written with a due time already past (the
command line says it in its own words and filters this one out)."""


class SchedulerCore:
    """Producer, partition lookup and record building; no delivery waiting."""

    def __init__(
        self, config: ClientConfig | str, clock: Clock | None, producer: Producer | None = None
    ) -> None:
        """``producer``: the one to write with (a transactional one, say); an idempotent
        one of ``config``'s by default."""
        self.config = ClientConfig(bootstrap_servers=config) if isinstance(config, str) else config
        self.clock = clock or SystemClock()
        self.producer = producer or Producer(self.config.producer_config())
        self._partitions: int | None = None

    @property
    def partitions_known(self) -> bool:
        """Whether :meth:`partitions` answers without asking the cluster."""
        return self._partitions is not None

    def partitions(self) -> int:
        """Partition count of the schedules topic, looked up once."""
        if self._partitions is None:
            self._partitions = topic_partition_count(
                self.producer, self.config.schedules_topic, self.config
            )
        return self._partitions

    def schedule_record(
        self,
        schedule_id: str,
        payload: bytes | str,
        target_topic: str,
        due_ms: int,
        target_key: bytes | str | None,
        headers: HeadersArg,
        partition: int | None = None,
        own: Headers = (),
    ) -> tuple[Schedule, OutgoingRecord]:
        """A header-contract schedule and its record; ``own``: delayline's own headers
        (:func:`own_of`)."""
        if not isinstance(schedule_id, str):
            raise InvalidScheduleError(
                f"schedule id must be a str, got {type(schedule_id).__name__}"
            )
        schedule = build_schedule(
            schedule_id,
            _to_bytes(payload, "payload"),
            target_topic,
            due_ms,
            target_key=None if target_key is None else _to_bytes(target_key, "target_key"),
            extra_headers=normalize_headers(headers),
            own_headers=own,
        )
        partition = self.partition_of(schedule_id, partition)
        return schedule, render_schedule(schedule, self.config.schedules_topic, partition)

    def paused_record(
        self, version: Schedule, partition: int | None, *, resume_ms: int | None = None
    ) -> tuple[Schedule, OutgoingRecord]:
        """``version`` paused (due at :data:`~delayline.core.model.MAX_EPOCH_MS`,
        remembering its due time), or, with ``resume_ms``, a paused version resumed to
        that due time; written to ``partition`` (the version's own) or the id's."""
        if resume_ms is None:
            due_ms, headers = MAX_EPOCH_MS, paused_headers(version.headers, version.due_ms)
        else:
            due_ms, headers = resume_ms, resumed_headers(version.headers, resume_ms)
        schedule = replace(version, due_ms=due_ms, headers=headers, source=None)
        partition = self.partition_of(version.id, partition)
        return schedule, render_schedule(schedule, self.config.schedules_topic, partition)

    def cancel_record(self, schedule_id: str, partition: int | None = None) -> OutgoingRecord:
        if not schedule_id or not isinstance(schedule_id, str):
            raise InvalidScheduleError("schedule id must be a non-empty str")
        partition = self.partition_of(schedule_id, partition)
        return render_cancel(schedule_id, self.config.schedules_topic, partition)

    def partition_of(self, schedule_id: str, given: int | None) -> int:
        """``given``, checked, or the id's own partition (Java's murmur2 partitioner).

        Raises:
            InvalidScheduleError: ``given`` is not a partition of the schedules topic.
        """
        count = self.partitions()
        if given is None:
            return partition_for(schedule_id.encode(), count)
        if isinstance(given, bool) or not isinstance(given, int) or not 0 <= given < count:
            raise InvalidScheduleError(
                f"partition must be 0 to {count - 1} ({self.config.schedules_topic} has "
                f"{count}), got {given!r}"
            )
        return given

    def retry_record(
        self,
        schedule_id: str,
        payload: bytes | str,
        target_topic: str,
        attempt: int | None,
        previous_headers: HeadersArg,
        target_key: bytes | str | None,
        policy: RetryPolicy | None,
    ) -> tuple[Schedule, OutgoingRecord]:
        due_ms, headers = plan_retry(
            normalize_headers(previous_headers),
            self.clock.now_ms(),
            policy or RetryPolicy(),
            attempt,
        )
        return self.schedule_record(schedule_id, payload, target_topic, due_ms, target_key, headers)

    def due_ms(
        self,
        at: datetime | None,
        delay: timedelta | float | None,
        recurrence: Recurrence | None = None,
    ) -> int:
        """See :func:`resolve_due_ms`; "now" is this client's clock. With a
        ``recurrence``, ``at`` or ``delay`` is its start (now when neither is given) and
        the due time its first occurrence from then on."""
        now_ms = self.clock.now_ms()
        if recurrence is None:
            return resolve_due_ms(at, delay, now_ms)
        start_ms = now_ms if at is None and delay is None else resolve_due_ms(at, delay, now_ms)
        return first_due_ms(recurrence, start_ms)

    def warn_if_past(self, schedule_id: str, at: datetime | timedelta | None) -> None:
        """Log a warning when an absolute due time ``at`` is already past: the
        schedule fires at once, which a caller who meant the future wants to know.

        A relative delay is never past (it cannot be negative), so only a datetime
        is checked. The id is logged, never the payload.
        """
        if not isinstance(at, datetime):
            return
        now_ms = self.clock.now_ms()
        due_ms = datetime_to_ms(at)
        if due_ms < now_ms:
            log.warning(
                PAST_DUE,
                schedule_id,
                format_duration_ms(now_ms - due_ms),
                ms_to_datetime(due_ms).isoformat(),
            )

    def when_ms(self, when: datetime | timedelta) -> int:
        """``send_later``'s ``when``: a datetime is absolute, a timedelta relative."""
        if isinstance(when, datetime):
            return self.due_ms(when, None)
        if isinstance(when, timedelta):
            return self.due_ms(None, when)
        raise InvalidScheduleError(
            f"when must be a datetime or timedelta, got {type(when).__name__}"
        )


def resolve_due_ms(at: datetime | None, delay: timedelta | float | None, now_ms: int) -> int:
    """Resolve exactly one of ``at`` (aware datetime) and ``delay`` (timedelta or seconds).

    Raises:
        InvalidScheduleError: both or neither given, a naive datetime, or a
            negative or NaN delay.
    """
    if (at is None) == (delay is None):
        raise InvalidScheduleError("give exactly one of at= and delay=")
    if at is not None:
        if not isinstance(at, datetime):
            raise InvalidScheduleError(f"at= must be a datetime, got {type(at).__name__}")
        try:
            return datetime_to_ms(at)
        except ValueError as exc:
            raise InvalidScheduleError(str(exc)) from exc
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)  # type: ignore[arg-type]
    if not seconds >= 0:  # also rejects NaN
        raise InvalidScheduleError(f"delay must be zero or more seconds, got {seconds}")
    return now_ms + round(seconds * 1000)


def topic_partition_count(producer: Producer, topic: str, config: ClientConfig) -> int:
    """Ask the cluster how many partitions ``topic`` has.

    Raises:
        KafkaUnavailableError: no answer within ``config.metadata_timeout_ms``.
        TopicConfigError: the topic does not exist.
    """
    timeout_s = config.metadata_timeout_ms / 1000
    hint = "; create it with `delayline topics create`"
    return len(topic_partitions(producer, topic, config.bootstrap_servers, timeout_s, hint))


def normalize_headers(headers: HeadersArg) -> list[tuple[str, bytes | None]]:
    """Accept a mapping or pairs, with str or bytes values; return byte pairs."""
    if headers is None:
        return []
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: list[tuple[str, bytes | None]] = []
    for name, value in pairs:
        if not isinstance(name, str) or not name:
            raise InvalidScheduleError(f"header names must be non-empty strings, got {name!r}")
        out.append((name, None if value is None else _to_bytes(value, f"header {name}")))
    return out


def own_of(recurrence: Recurrence | None, group: str | None, window_ms: int | None) -> Headers:
    """delayline's own headers for ``schedule(recurrence=, group=, window_ms=)``.

    Raises:
        InvalidScheduleError: a bad group.
        WindowError: ``window_ms`` is not a whole number of milliseconds within 1 ms..1 h.
    """
    if window_ms is not None and (isinstance(window_ms, bool) or not isinstance(window_ms, int)):
        raise WindowError(f"window_ms must be an int of milliseconds, got {window_ms!r}")
    return own_headers(recurrence, group, window_ms)


def _to_bytes(value: bytes | str, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise InvalidScheduleError(f"{what} must be bytes or str, got {type(value).__name__}")
