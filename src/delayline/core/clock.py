"""Time sources. Inside delayline time is integer epoch milliseconds.

Code that depends on "now" takes a :class:`Clock`, so tests pass a
:class:`ManualClock` instead of sleeping.
"""

from __future__ import annotations

import abc
import time
from datetime import UTC, datetime, timedelta

from delayline.errors import ConfigError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Clock(abc.ABC):
    """A source of the current time."""

    @abc.abstractmethod
    def now_ms(self) -> int:
        """Return the current time as integer milliseconds since the Unix epoch."""


class SystemClock(Clock):
    """The machine's wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock(Clock):
    """A clock that only moves when told to; for tests of pure logic."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, delta_ms: int) -> None:
        """Move the clock forward by ``delta_ms`` milliseconds."""
        self._now_ms += delta_ms


def datetime_to_ms(value: datetime) -> int:
    """Convert a timezone-aware datetime to epoch milliseconds.

    Raises:
        ValueError: ``value`` is naive; delayline never guesses a timezone.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ConfigError(f"datetime {value.isoformat()} has no timezone; pass an aware datetime")
    delta = value - _EPOCH
    # Integer arithmetic: float seconds lose sub-millisecond exactness far from 1970.
    # Round sub-millisecond parts up: a due time must never move earlier.
    return (delta.days * 86_400 + delta.seconds) * 1000 + -(-delta.microseconds // 1000)


def ms_to_datetime(epoch_ms: int) -> datetime:
    """Convert epoch milliseconds to an aware UTC datetime."""
    return _EPOCH + timedelta(milliseconds=epoch_ms)


GRANULARITY_MS = 100
"""A timer's wake time is its due time rounded up to this step: the pipeline's waker
writes at most one wake record per step."""


def wake_slot(due_ms: int) -> int:
    """The wake time of a timer due at ``due_ms``: rounded up, never earlier."""
    return -(-due_ms // GRANULARITY_MS) * GRANULARITY_MS


def earliest_ms(*times: int | None) -> int | None:
    """The earliest of ``times`` that are given, or ``None`` if none is."""
    given = [t for t in times if t is not None]
    return min(given) if given else None
