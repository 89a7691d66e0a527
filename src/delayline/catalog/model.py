"""What the catalog holds and answers: pending schedules, their versions, dead letters.

Times are integer epoch milliseconds (UTC).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from delayline.core.model import Headers

VersionKind = Literal["created", "updated", "cancelled", "fired", "dead-lettered", "finished"]
"""What happened to a schedule id. ``finished`` is delayline's tombstone seen without a
history topic to say whether the version fired or expired."""

SortKey = Literal["due", "id", "created"]

MAX_PAGE = 1000
"""Largest page a query may ask for."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A schedule waiting for its due time, as the catalog last saw it.

    Attributes:
        id: Schedule id.
        topic: Schedules topic it sits on.
        partition: Its partition there.
        offset: Offset of the current version.
        due_ms: When it fires.
        target_topic: Where it goes.
        target_key: Key of the delivered record.
        created_ms: Record timestamp of the first version of this lifecycle.
        updated_ms: Record timestamp of the current version.
        group: The group it names (header ``delayline-group``), if any.
        recurrence: How it recurs, in words (``cron 0 9 * * 1-5 in Europe/Berlin``),
            ``None`` for a one-off.
        paused_due_ms: The due time it had when paused; ``None``: not paused.
        window_ms: The delivery window its headers state (``delayline-window``);
            ``None`` for none or one refused. Whatever its contract: only the header
            contract's is used.
        payload: The current version's value.
        headers: The current version's headers.
    """

    id: str
    topic: str
    partition: int
    offset: int
    due_ms: int
    target_topic: str
    target_key: bytes | None
    created_ms: int
    updated_ms: int
    group: str | None = None
    recurrence: str | None = None
    paused_due_ms: int | None = None
    window_ms: int | None = None
    payload: bytes = b""
    headers: Headers = ()


@dataclass(frozen=True, slots=True)
class Version:
    """One event in the life of a schedule id.

    Attributes:
        kind: What happened.
        at_ms: When (the Kafka timestamp of the record that says so).
        topic: Schedules topic of the id.
        partition: Partition of the record that says so.
        offset: Offset of the schedule version it is about.
        due_ms: Due time of that version, when known.
        target_topic: Target of that version, when known.
        lateness_ms: For ``fired``: delivery time minus due time.
        reason: For ``dead-lettered``: why.
        payload_size: For ``created``/``updated``: bytes of the value.
    """

    kind: VersionKind
    at_ms: int
    topic: str
    partition: int
    offset: int
    due_ms: int | None = None
    target_topic: str | None = None
    lateness_ms: int | None = None
    reason: str | None = None
    payload_size: int | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record the pipeline rejected, as written to the dead-letter topic.

    Attributes:
        topic: Dead-letter topic.
        partition: Its partition.
        offset: Its offset (with topic and partition: the identity of this entry).
        at_ms: When it was dead-lettered.
        reason: The ``delayline-error`` header.
        source: ``topic/partition/offset`` of the rejected record.
        schedule_id: The rejected record's key as text, when it is UTF-8.
        key: The rejected record's key.
        value: The rejected record's value.
        headers: Its headers, the two delayline ones included.
    """

    topic: str
    partition: int
    offset: int
    at_ms: int
    reason: str
    source: str
    schedule_id: str | None
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


@dataclass(frozen=True, slots=True)
class PendingQuery:
    """A filtered, sorted page of pending schedules.

    Attributes:
        id_prefix: Only ids starting with this.
        id_contains: Only ids containing this.
        due_from_ms: Only due at or after this.
        due_to_ms: Only due before this.
        target_topic: Only with this target topic.
        topics: Only read from one of these input topics (``None``: any); how the API
            filters by contract.
        group: Only those of this group.
        sort: Order by due time, id or creation time (ties broken by id, then topic).
        descending: Reverse the order.
        limit: Page size, 1 to :data:`MAX_PAGE`.
        cursor: ``next_cursor`` of the previous page; ``None`` for the first.
    """

    id_prefix: str | None = None
    id_contains: str | None = None
    due_from_ms: int | None = None
    due_to_ms: int | None = None
    target_topic: str | None = None
    topics: tuple[str, ...] | None = None
    group: str | None = None
    sort: SortKey = "due"
    descending: bool = False
    limit: int = 100
    cursor: str | None = None


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of results; ``next_cursor`` is ``None`` on the last page."""

    items: list[T]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class Stats:
    """Figures for the dashboard.

    Attributes:
        pending: Pending schedules.
        dead_letters: Dead letters seen.
        fired_per_minute: ``(minute start, deliveries)`` for recent minutes, oldest
            first, minutes without deliveries included.
        lateness_buckets_ms: Upper bounds of the lateness histogram buckets.
        lateness_counts: Deliveries per bucket in the same window; one more entry
            than ``lateness_buckets_ms`` for everything above the last bound.
    """

    pending: int
    dead_letters: int
    fired_per_minute: list[tuple[int, int]] = field(default_factory=list)
    lateness_buckets_ms: list[int] = field(default_factory=list)
    lateness_counts: list[int] = field(default_factory=list)
