"""Records in and out of Kafka, and their translation to and from the model.

Parsing never raises: any input becomes a :class:`~delayline.core.model.Schedule`,
a :class:`~delayline.core.model.Cancel` or an :class:`~delayline.core.model.Invalid` with
a reason, so one bad record can never stop the pipeline. The reasons come from the
parser's own checks (:func:`parse_record_checked`, tested without any safety net);
:func:`parse_record` adds a last net that logs a parser bug and dead-letters the record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

from delayline.contract import headers as h
from delayline.contract.checks import (
    ScheduleFields,
    fired_offset,
    key_id,
    record_id,
    schedule_fields,
)
from delayline.contract.topics import target_topic_problem
from delayline.core.model import Cancel, Headers, Invalid, Parsed, Schedule, SourceRef
from delayline.errors import InvalidScheduleError

log = logging.getLogger(__name__)


class ConsumedRecord(NamedTuple):
    """A record as read from Kafka, independent of the client library. Immutable; a
    named tuple, not a frozen dataclass: readers make one per record (the committer's
    watch one per input record), and a frozen dataclass took three times as long to
    make (2.5 against 0.7 us here, seven fields).

    Attributes:
        topic: Source topic.
        partition: Source partition.
        offset: Offset within the partition.
        timestamp_ms: Record timestamp, epoch milliseconds.
        key: Raw key, or ``None``.
        value: Raw value, or ``None`` for a tombstone.
        headers: Headers in wire order; names may repeat.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    @property
    def source(self) -> SourceRef:
        """Where this record came from."""
        return SourceRef(self.topic, self.partition, self.offset, self.timestamp_ms)


class OutgoingRecord(NamedTuple):
    """A record to produce. Immutable; a named tuple, as :class:`ConsumedRecord` is: a
    delivery makes several.

    Attributes:
        topic: Destination topic.
        key: Key bytes or ``None``.
        value: Value bytes, or ``None`` for a tombstone.
        headers: Headers in order.
        partition: Exact partition, or ``None`` to let the writer choose.
        timestamp_ms: Record timestamp, or ``None`` for the time of writing.
    """

    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    partition: int | None = None
    timestamp_ms: int | None = None


_Checked = TypeVar("_Checked")


def parse_record(record: ConsumedRecord) -> Parsed:
    """Translate a schedules-topic record into the model.

    A null value is a cancel. Otherwise the control headers must be present once
    each (``scheduler-target-key`` is optional) and valid.

    Returns:
        A ``Schedule``, a ``Cancel`` or an ``Invalid`` carrying the reason; never raises.
    """
    return parse_safely(parse_record_checked, record, "record")


def parse_safely(
    checked: Callable[[ConsumedRecord], _Checked], record: ConsumedRecord, what: str
) -> _Checked | Invalid:
    """``checked(record)``, whose own checks refuse every malformed input; should it
    raise all the same (a parser bug), the record is :class:`Invalid` and the bug is
    logged loudly, so one record never stops the pipeline."""
    try:
        return checked(record)
    except Exception as exc:
        log.exception(
            "parser bug on %s %s (dead-lettered): %s", what, record.source.describe(), exc
        )
        return Invalid(f"unparseable {what}: {type(exc).__name__}", record.source)


def parse_record_checked(record: ConsumedRecord) -> Parsed:
    """:func:`parse_record` without its safety net: every malformed input is caught by
    an explicit check with its own reason, so this raises only on a bug."""
    fields = schedule_fields(record)
    if not isinstance(fields, ScheduleFields):
        return fields
    return Schedule(  # positional: once per schedule read
        fields.id,
        fields.due_ms,
        fields.target_topic,
        fields.target_key,
        record.value or b"",  # not None: a null value is a cancel
        tuple(record.headers),
        SourceRef(record.topic, record.partition, fields.version_offset, record.timestamp_ms),
    )


def render_rewrite(schedule: Schedule) -> OutgoingRecord:
    """A copy of ``schedule`` appended to its own partition (a rewrite): the schedule
    as read, stamped with its timestamp, naming its offset in
    :data:`delayline.contract.headers.COPY_OF`."""
    source = schedule.require_source()
    headers = (*without_copy_of(schedule.headers), (h.COPY_OF, str(source.offset).encode()))
    return OutgoingRecord(
        source.topic,
        schedule.id.encode(),
        schedule.payload,
        headers,
        source.partition,
        timestamp_ms=source.timestamp_ms,
    )


def without_copy_of(headers: Headers) -> Headers:
    """``headers`` less delayline's own marks (``delayline-copy-of``,
    ``delayline-rearm-of``): never delivered, never carried onto another record."""
    for name, _ in headers:  # a loop: this runs once per delivery
        if name in _OWN_MARKS:
            return tuple((name, value) for name, value in headers if name not in _OWN_MARKS)
    return headers


_OWN_MARKS = frozenset({h.COPY_OF, h.REARM_OF})


def parse_tombstone(record: ConsumedRecord) -> Cancel | Invalid:
    """A tombstone (null value): a cancel of the schedule id its key holds, in every
    contract. delayline's own tombstone after a delivery also names the offset that
    fired (``delayline-fired-offset``)."""
    schedule_id = record_id(record)
    if isinstance(schedule_id, Invalid):
        return schedule_id
    return Cancel(schedule_id, fired_offset(record.headers), record.source)


def is_own_tombstone(key: bytes | None, headers: Headers) -> bool:
    """Whether a tombstone (null value) with ``key`` and ``headers`` is delayline's own
    after a delivery: exactly when every contract's parser makes it a :class:`Cancel`
    naming the offset that fired (:func:`parse_tombstone`), without making one (the
    committer's watch reads one after each delivery, and skips it)."""
    return own_tombstone_of(key, headers) is not None


def own_tombstone_of(key: bytes | None, headers: Headers) -> tuple[str, int] | None:
    """The schedule id and fired offset of delayline's own tombstone with ``key`` and
    ``headers`` (see :func:`is_own_tombstone`); ``None`` for any other tombstone."""
    schedule_id = key_id(key)
    if schedule_id is None:
        return None
    fired = fired_offset(headers)
    return None if fired is None else (schedule_id, fired)


def skippable_tombstone(headers: Headers) -> bool:
    """Whether delayline's own tombstone with ``headers`` is one a hold may drop unread:
    marked by the start that handed its version over
    (:data:`~delayline.contract.headers.PLAN`), not asking for review
    (:data:`~delayline.contract.headers.REVIEW`). The committer's watch looks, for each,
    whether the hold must read it after all (:func:`review_tombstone`)."""
    marked = False
    for name, _ in headers:
        if name == h.REVIEW:
            return False
        marked = marked or name == h.PLAN
    return marked


def handed_over(headers: Headers) -> bool:
    """Whether delayline's own tombstone with ``headers`` was written by a hand-over
    (marked by its start, :data:`~delayline.contract.headers.PLAN`): never the delivery
    of a short-notice version, which the committer writes unmarked."""
    return any(name == h.PLAN for name, _ in headers)


def build_schedule(
    schedule_id: str,
    payload: bytes,
    target_topic: str,
    due_ms: int,
    *,
    target_key: bytes | None = None,
    extra_headers: Iterable[tuple[str, bytes | None]] = (),
    own_headers: Headers = (),
) -> Schedule:
    """Build a schedule as a producer writes it, control headers first, then
    ``own_headers`` (delayline's: a recurrence, a window, a group; see
    :func:`delayline.contract.recurring.own_headers`), then ``extra_headers``.

    Raises:
        InvalidScheduleError: the contract would reject the result, or an extra
            header uses a reserved ``scheduler-*`` name.
    """
    if not schedule_id:
        raise InvalidScheduleError("schedule id must not be empty")
    problem = target_topic_problem(target_topic)
    if problem is not None:
        raise InvalidScheduleError(f"target topic is {problem}")
    if due_ms < 0:
        raise InvalidScheduleError(f"due time {due_ms} ms is before 1970")
    extra = tuple(extra_headers)
    for name, _ in extra:
        if name in h.RESERVED_HEADERS:
            raise InvalidScheduleError(f"header {name} is reserved; use the matching argument")
    control: list[tuple[str, bytes | None]] = [
        (h.EPOCH, h.format_epoch(due_ms).encode()),
        (h.TARGET_TOPIC, target_topic.encode()),
    ]
    if target_key is not None:
        control.append((h.TARGET_KEY, target_key))
    headers = (*control, *own_headers, *extra)
    schedule = Schedule(schedule_id, due_ms, target_topic, target_key, payload, headers)
    # The writer must never produce what the reader would refuse.
    check = parse_record(
        ConsumedRecord("check", 0, 0, 0, schedule_id.encode(), payload, schedule.headers)
    )
    if isinstance(check, Invalid):
        raise InvalidScheduleError(check.reason)
    return schedule


def render_schedule(
    schedule: Schedule, schedules_topic: str, partition: int | None
) -> OutgoingRecord:
    """The schedules-topic record a producer writes for ``schedule``."""
    return OutgoingRecord(
        schedules_topic, schedule.id.encode(), schedule.payload, schedule.headers, partition
    )


def render_cancel(schedule_id: str, schedules_topic: str, partition: int | None) -> OutgoingRecord:
    """The tombstone a producer writes to cancel ``schedule_id``."""
    return OutgoingRecord(schedules_topic, schedule_id.encode(), None, (), partition)


def render_delivery(schedule: Schedule, timestamp_ms: int | None = None) -> OutgoingRecord:
    """The record delivered to the target topic when ``schedule`` falls due, stamped
    ``timestamp_ms`` (``None``: the time of writing).

    Key is the target key, value the payload, headers every input header plus
    ``scheduler-timestamp`` (input record timestamp, Unix seconds),
    ``scheduler-key`` (schedule id) and ``scheduler-topic`` (source topic).

    Raises:
        ValueError: ``schedule`` was not read from Kafka (it has no source).
    """
    source = schedule.require_source()
    added: Headers = (
        (h.TIMESTAMP, h.format_epoch(source.timestamp_ms).encode()),
        (h.KEY, schedule.id.encode()),
        (h.TOPIC, source.topic.encode()),
    )
    headers = (*without_copy_of(schedule.headers), *added)
    return OutgoingRecord(
        schedule.target_topic, schedule.target_key, schedule.payload, headers,
        timestamp_ms=timestamp_ms,
    )  # fmt: skip


def render_tombstone(schedule: Schedule, plan: str | None = None) -> OutgoingRecord:
    """The tombstone that forgets ``schedule`` once delivered.

    It goes to the exact topic and partition the schedule came from, never
    through a client partitioner, so compaction removes the right record. It
    carries ``delayline-fired-offset`` so that it cancels no newer version and, with a
    ``plan``, ``delayline-plan``: the mark of the start that raised the version
    (:data:`delayline.contract.headers.PLAN`).

    Raises:
        ValueError: ``schedule`` was not read from Kafka (it has no source).
    """
    source = schedule.require_source()
    fired: Headers = ((h.FIRED_OFFSET, str(source.offset).encode()),)
    if plan is not None:
        fired = (*fired, (h.PLAN, plan.encode()))
    return OutgoingRecord(source.topic, schedule.id.encode(), None, fired, source.partition)


def review_tombstone(topic: str, partition: int, key: bytes, headers: Headers) -> OutgoingRecord:
    """Delayline's own tombstone (of ``key`` with ``headers``, read in ``topic`` /
    ``partition``) written again after itself, marked for review
    (:data:`delayline.contract.headers.REVIEW`)."""
    return OutgoingRecord(topic, key, None, (*headers, (h.REVIEW, b"1")), partition)


def render_history(schedule: Schedule, history_topic: str) -> OutgoingRecord:
    """The audit record of a delivery: keyed by schedule id, the delivered headers plus
    ``delayline-source`` (``topic/partition/offset`` of the version that fired),
    ``delayline-due`` and ``delayline-target-topic`` (for every contract: only the header
    contract's schedules carry their due time and target in headers of their own)."""
    delivered = render_delivery(schedule)
    source = schedule.require_source()
    headers = (
        *delivered.headers,
        (h.SOURCE, source.describe().encode()),
        (h.DUE, h.format_epoch(schedule.due_ms).encode()),
        (h.TARGET, schedule.target_topic.encode()),
    )
    return OutgoingRecord(history_topic, schedule.id.encode(), schedule.payload, headers)


def render_dead_letter(
    record: ConsumedRecord, reason: str, dead_letter_topic: str
) -> OutgoingRecord:
    """The rejected record unchanged, plus ``delayline-error`` and ``delayline-source``."""
    added: Headers = ((h.ERROR, reason.encode()), (h.SOURCE, record.source.describe().encode()))
    return OutgoingRecord(dead_letter_topic, record.key, record.value, (*record.headers, *added))
