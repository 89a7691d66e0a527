"""Request and response bodies of the REST API (pydantic, shown in OpenAPI)."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Literal, overload

from pydantic import BaseModel, ConfigDict, Field

from delayline.catalog import DeadLetter, Pending, Stats, Version
from delayline.contract.contracts import HEADER, Contract
from delayline.contract.pacing import MAX_WINDOW_MS
from delayline.contract.recurring import MAX_GROUP_LENGTH, occurrence_number, recurrence_of
from delayline.core.clock import ms_to_datetime
from delayline.core.model import MAX_EPOCH_MS, Headers
from delayline.core.recurrence import Occurrence, RecurrenceError

MAX_ID_LENGTH = 1024


class HeaderIn(BaseModel):
    """A header to add to the schedule (and so to the delivered record)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=256)
    value: str = Field(max_length=65_536)
    encoding: Literal["utf-8", "base64"] = Field(
        default="utf-8", description="How ``value`` is written here."
    )


class RecurrenceIn(BaseModel):
    """How a schedule recurs: a cron expression or a fixed rate (one of the two), read
    in ``time_zone``. The rules (daylight saving, catch-up) are in docs/contracts.md."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = Field(
        default=None,
        max_length=200,
        description="5 fields (minute hour day month weekday), or 6 with the second "
        "first, e.g. '0 9 * * 1-5'.",
    )
    every: str | None = Field(
        default=None, max_length=40, description="A fixed rate instead: '90s', '15m', '1h'."
    )
    time_zone: str = Field(default="UTC", max_length=64, description="IANA zone name.")
    until: datetime | None = Field(default=None, description="No occurrence after this.")
    max_occurrences: int | None = Field(default=None, ge=1, le=10**15)
    catch_up: Literal["all", "latest", "none"] = Field(
        default="latest", description="What becomes of occurrences missed during an outage."
    )
    catch_up_window: str = Field(
        default="1m", max_length=40, description="Later than this an occurrence is missed."
    )


class RecurrenceOut(BaseModel):
    """How a pending schedule recurs, and its next occurrences."""

    rule: str = Field(description="In words: 'cron 0 9 * * 1-5 in Europe/Berlin'.")
    cron: str | None
    every_ms: int | None
    time_zone: str
    until: datetime | None
    max_occurrences: int | None
    catch_up: str
    catch_up_window_ms: int
    occurrence: int = Field(description="The number of the occurrence it is due for.")
    next: list[datetime] = Field(description="Its next occurrences (up to five).")


class ScheduleIn(BaseModel):
    """A schedule to create or replace. Give exactly one of ``due_at``, ``due_ms`` and
    ``delay_ms``; with a ``recurrence`` they are its start, and optional (now)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "example": {
                "target_topic": "orders",
                "target_key": "order-42",
                "payload": '{"status": "expired"}',
                "delay_ms": 60000,
            }
        },
    )
    target_topic: str = Field(min_length=1, max_length=249, description="Topic to deliver to.")
    target_key: str | None = Field(default=None, max_length=65_536, description="Delivered key.")
    target_key_encoding: Literal["utf-8", "base64"] = Field(
        default="utf-8", description="How ``target_key`` is written here."
    )
    payload: str = Field(default="", max_length=1_048_576, description="Delivered value.")
    payload_encoding: Literal["utf-8", "base64"] = Field(
        default="utf-8", description="How ``payload`` is written here."
    )
    due_at: datetime | None = Field(
        default=None, description="Due time, ISO 8601 with a time zone, e.g. 2030-01-01T12:00:00Z."
    )
    due_ms: int | None = Field(default=None, ge=0, description="Due time, epoch milliseconds.")
    delay_ms: int | None = Field(
        default=None, ge=0, le=10**13, description="Due this many milliseconds from now."
    )
    headers: list[HeaderIn] = Field(default_factory=list, max_length=100)
    recurrence: RecurrenceIn | None = Field(
        default=None, description="Deliver it again and again (header contract only)."
    )
    group: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_GROUP_LENGTH,
        description="A group: listed, cancelled, paused and resumed together.",
    )
    window_ms: int | None = Field(
        default=None,
        ge=1,
        le=MAX_WINDOW_MS,
        description="A flexible delivery window, milliseconds (at most an hour): it may be "
        "delivered anywhere from its due time to its due time plus the window, spread "
        "evenly over it with the schedules due alike; never early. Header contract only.",
    )


class ScheduleCreate(ScheduleIn):
    """A new schedule; without ``id`` the API makes one up (a UUID)."""

    id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_LENGTH)


class Written(BaseModel):
    """Where Kafka stored the record the API wrote. The pipeline acts on it next."""

    id: str
    topic: str
    partition: int
    offset: int
    warning: str | None = Field(
        default=None,
        description="Something the write did that may not be what was meant, e.g. "
        "'due time is 5m in the past; it fires at once'. Absent when there is none.",
    )


class WrittenMany(BaseModel):
    """The records a request wrote (a cancel writes one per schedules topic holding the id)."""

    id: str
    records: list[Written]
    note: str | None = Field(
        default=None,
        description="Present when the catalog had no pending version of the id (not read "
        "yet, or already delivered or cancelled): the cancel was written anyway, where the "
        "id's own record goes. Absent otherwise.",
    )


class HeaderOut(BaseModel):
    """A header as stored; ``value`` is text, or base64 when ``encoding`` says so."""

    name: str
    value: str | None
    encoding: Literal["utf-8", "base64"] | None


class ScheduleSummary(BaseModel):
    """A pending schedule in a list."""

    id: str
    contract: Contract = Field(
        description="How it came in: header (the schedules topic), envelope (JSON) or "
        "timer-request (protobuf); see docs/contracts.md."
    )
    topic: str
    partition: int
    offset: int
    due_ms: int
    due_at: datetime
    target_topic: str
    target_key: str | None = Field(description="The delivered key as text, when it is UTF-8.")
    target_key_base64: str | None = Field(description="The delivered key, base64.")
    created_at: datetime
    updated_at: datetime
    group: str | None = None
    recurrence: str | None = Field(default=None, description="How it recurs, in words.")
    paused: bool = False
    paused_due_at: datetime | None = Field(
        default=None, description="When paused: the due time it had."
    )
    window_ms: int | None = Field(
        default=None,
        description="Its flexible delivery window, milliseconds (header delayline-window); "
        "null for none, for a window refused (it goes to the dead letters when due), and "
        "for envelopes and timer requests (only the header contract reads it).",
    )


class ScheduleFull(ScheduleSummary):
    """A pending schedule with its payload and headers (and, recurring, its next
    occurrences)."""

    payload_base64: str
    payload_text: str | None = Field(description="The payload as text, when it is UTF-8.")
    payload_json: bool = Field(description="Whether the payload text is valid JSON.")
    payload_size: int
    headers: list[HeaderOut]
    recurring: RecurrenceOut | None = None


class GroupWritten(BaseModel):
    """What a request on a group wrote: one record per schedule acted on."""

    group: str
    schedules: int = Field(description="How many schedules of the group it acted on.")
    records: list[Written]


class VersionOut(BaseModel):
    """One event in the life of a schedule id."""

    kind: str
    at: datetime
    topic: str
    partition: int
    offset: int
    due_at: datetime | None = None
    target_topic: str | None = None
    lateness_ms: int | None = None
    reason: str | None = None
    payload_size: int | None = None


class ScheduleDetail(BaseModel):
    """An id: its pending version (if any) and every version seen."""

    id: str
    pending: bool
    current: ScheduleFull | None
    versions: list[VersionOut]


class SchedulePage(BaseModel):
    """A page of pending schedules; pass ``next_cursor`` back as ``cursor`` for the next."""

    items: list[ScheduleSummary]
    next_cursor: str | None


class DeadLetterOut(BaseModel):
    """A rejected or expired record."""

    topic: str
    partition: int
    offset: int
    at: datetime
    reason: str
    source: str
    schedule_id: str | None
    payload_base64: str | None
    payload_text: str | None
    headers: list[HeaderOut]


class DeadLetterPage(BaseModel):
    """A page of dead letters, newest first."""

    items: list[DeadLetterOut]
    next_cursor: str | None


class MinuteCount(BaseModel):
    """Deliveries in one minute (UTC)."""

    minute: datetime
    deliveries: int


class StatsOut(BaseModel):
    """Dashboard figures."""

    pending: int
    dead_letters: int
    fired_per_minute: list[MinuteCount]
    lateness_buckets_ms: list[int]
    lateness_counts: list[int]


class Problem(BaseModel):
    """Every error answer: what is wrong, in one sentence."""

    detail: str


_MIN_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z


def utc(epoch_ms: int) -> datetime:
    """Epoch milliseconds as an aware UTC datetime, clamped to what datetime holds
    (a producer may set any Kafka timestamp, microseconds by mistake included)."""
    return ms_to_datetime(min(max(epoch_ms, _MIN_MS), MAX_EPOCH_MS))


def text_or_none(raw: bytes | None) -> str | None:
    """``raw`` as text when it is UTF-8."""
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


@overload
def b64(raw: bytes) -> str: ...
@overload
def b64(raw: None) -> None: ...
def b64(raw: bytes | None) -> str | None:
    """``raw`` as base64 text (``None`` stays ``None``)."""
    return None if raw is None else base64.b64encode(raw).decode()


def headers_out(headers: Headers) -> list[HeaderOut]:
    """Headers with text values where possible, base64 otherwise."""
    out = []
    for name, value in headers:
        text = text_or_none(value)
        if value is None:
            out.append(HeaderOut(name=name, value=None, encoding=None))
        elif text is not None:
            out.append(HeaderOut(name=name, value=text, encoding="utf-8"))
        else:
            out.append(HeaderOut(name=name, value=b64(value), encoding="base64"))
    return out


def summary(p: Pending, contract: Contract) -> ScheduleSummary:
    """A list item; ``contract`` is that of the topic it came in by."""
    return ScheduleSummary(
        id=p.id,
        contract=contract,
        topic=p.topic,
        partition=p.partition,
        offset=p.offset,
        due_ms=p.due_ms,
        due_at=utc(p.due_ms),
        target_topic=p.target_topic,
        target_key=text_or_none(p.target_key),
        target_key_base64=b64(p.target_key),
        created_at=utc(p.created_ms),
        updated_at=utc(p.updated_ms),
        group=p.group,
        recurrence=p.recurrence,
        paused=p.paused_due_ms is not None,
        paused_due_at=None if p.paused_due_ms is None else utc(p.paused_due_ms),
        window_ms=p.window_ms if contract == HEADER else None,
    )


def full(p: Pending, contract: Contract) -> ScheduleFull:
    """A pending schedule with payload and headers."""
    text = text_or_none(p.payload)
    return ScheduleFull(
        **summary(p, contract).model_dump(),
        payload_base64=b64(p.payload),
        payload_text=text,
        payload_json=_is_json(text),
        payload_size=len(p.payload),
        headers=headers_out(p.headers),
        recurring=recurrence_out(p),
    )


NEXT_OCCURRENCES = 5
"""How many of its next occurrences a recurring schedule's detail shows."""


def recurrence_out(p: Pending) -> RecurrenceOut | None:
    """How ``p`` recurs and its next occurrences; ``None`` for a one-off or a refused
    recurrence (the list's ``recurrence`` says why)."""
    try:
        recurrence = recurrence_of(p.headers)
        number = occurrence_number(p.headers)
    except RecurrenceError:
        return None
    if recurrence is None:
        return None
    due_ms = p.due_ms if p.paused_due_ms is None else p.paused_due_ms
    upcoming = recurrence.upcoming(Occurrence(due_ms, number), NEXT_OCCURRENCES)
    return RecurrenceOut(
        rule=p.recurrence or "",
        cron=recurrence.cron,
        every_ms=recurrence.every_ms,
        time_zone=recurrence.time_zone,
        until=None if recurrence.until_ms is None else utc(recurrence.until_ms),
        max_occurrences=recurrence.max_occurrences,
        catch_up=str(recurrence.catch_up),
        catch_up_window_ms=recurrence.catch_up_window_ms,
        occurrence=number,
        next=[utc(o.nominal_ms) for o in upcoming],
    )


def version_out(v: Version) -> VersionOut:
    """A version for the detail page."""
    return VersionOut(
        kind=v.kind,
        at=utc(v.at_ms),
        topic=v.topic,
        partition=v.partition,
        offset=v.offset,
        due_at=None if v.due_ms is None else utc(v.due_ms),
        target_topic=v.target_topic,
        lateness_ms=v.lateness_ms,
        reason=v.reason,
        payload_size=v.payload_size,
    )


def dead_letter_out(d: DeadLetter) -> DeadLetterOut:
    """A dead letter."""
    return DeadLetterOut(
        topic=d.topic,
        partition=d.partition,
        offset=d.offset,
        at=utc(d.at_ms),
        reason=d.reason,
        source=d.source,
        schedule_id=d.schedule_id,
        payload_base64=b64(d.value),
        payload_text=text_or_none(d.value),
        headers=headers_out(d.headers),
    )


def stats_out(s: Stats) -> StatsOut:
    """Dashboard figures."""
    return StatsOut(
        pending=s.pending,
        dead_letters=s.dead_letters,
        fired_per_minute=[
            MinuteCount(minute=utc(minute), deliveries=n) for minute, n in s.fired_per_minute
        ],
        lateness_buckets_ms=s.lateness_buckets_ms,
        lateness_counts=s.lateness_counts,
    )


def _is_json(text: str | None) -> bool:
    if text is None:
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
