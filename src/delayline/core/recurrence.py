"""The calendar arithmetic of recurring schedules: pure, no I/O, no clock.

A :class:`Recurrence` is a series of occurrences, each an instant (integer epoch
milliseconds, UTC) with a 1-based number. It is either a cron expression read in an
IANA time zone, or a fixed rate (``every_ms``). The series may end at an instant
(``until_ms``) or after a number of occurrences (``max_occurrences``). Time is always
passed in: nothing here reads a clock, so the same arguments give the same answer.

Cron expressions are those of `cronsim <https://github.com/cuu508/cronsim>`_: five
fields (minute, hour, day of month, month, day of week) or six with the second first;
``L``, ``LW``, ``5L``, ``1#2``, month and day names. cronsim parses and matches; this
module only decides how the time zone is applied. Cron instants are whole seconds.

Daylight saving time
--------------------
Days, months and weekdays are always those of the zone's local calendar. Within a
day, a cron expression behaves in one of two ways, chosen from the expression alone:

* **Wall-clock expressions**: the minute field and the hour field both fix their
  values (neither starts with ``*``; for six fields, the second and third fields), as
  in ``30 2 * * *`` or ``0 9 * * 1-5``. They name local times and follow Debian cron
  (as cronsim does for five fields):

  - a local time that does not exist (clocks spring forward) fires once, at the first
    instant after the gap: ``30 2 * * *`` in Europe/Berlin on 2026-03-29 fires at
    03:00 CEST (01:00Z); ``15 2 * * *`` in Australia/Lord_Howe on 2026-10-04 at 02:30
    (the gap is half an hour). Several missing times fire once, together. (Debian and
    cronsim step minute by minute to the first local time that exists: the same
    instant whenever the transition falls on a whole minute, as all modern ones do.)
  - a local time that occurs twice (clocks fall back) fires once, at its first
    occurrence: ``30 2 * * *`` in Europe/Berlin on 2026-10-25 fires at 02:30 CEST
    (00:30Z), not again at 02:30 CET. An expression matching several times in that
    hour (``0-59 2 * * *``) fires them during the first pass only.

* **Real-time expressions**: the minute or the hour field starts with ``*`` (hourly,
  every 15 minutes, every second). They keep their period in real time across a
  transition: ``0 * * * *`` fires 23 times on a spring-forward day and 25 times on a
  fall-back day; a repeated wall time fires in both passes (``*/20 2 * * *`` fires six
  times on Berlin's fall-back day), and a wall time that does not exist never fires.

Rates (``every_ms``) keep their period in real time, always: a rate of one hour is
3,600,000 ms between occurrences whatever the clocks do.

Whatever the rule, a series is strictly increasing in real time: two local times that
map to the same instant fire once, and the next occurrence is strictly after the
instant asked about, even one in the second pass of a repeated hour (there cronsim,
which starts from the wall time, can answer the earlier first pass; this module moves
on to the next later instant). cronsim reads six-field expressions in real time
always; this module applies the same wall-clock rule to five and six fields.

Guarantees
----------
* No occurrence is after ``until_ms`` or numbered above ``max_occurrences``.
* :meth:`Recurrence.next_after` answers an instant strictly after the one it is given
  (to the millisecond), numbered by counting the occurrences in between.
* A :class:`Recurrence` that constructs without :class:`RecurrenceError` is usable:
  every method answers without raising. A cron expression must match at least once in
  the 50 years after 2000-01-01 (cronsim's look-ahead); a series that later finds no
  match in 50 years, or whose local calendar runs past year 9999, simply ends.
* Results depend on the IANA time-zone data in use (``tzdata``) and nothing else on
  the host: ``localtime`` and ``posixrules``, which stand for the host's own zone, are
  refused.
* Cost: a rate is arithmetic; a cron answer walks the occurrences it passes, one by
  one (a ``latest`` or ``none`` catch-up after a long outage of a frequent expression
  walks them all).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from delayline.core.clock import datetime_to_ms, ms_to_datetime
from delayline.core.units import format_duration_ms
from delayline.errors import InvalidScheduleError


class RecurrenceError(InvalidScheduleError):
    """A recurrence cannot be used: a bad cron expression, an unknown time zone, a
    rate too small, a bound out of range. The message is short and stable: it becomes
    the reason a dead letter carries."""


class CatchUp(StrEnum):
    """What becomes of occurrences missed by more than the catch-up window."""

    ALL = "all"
    """Every missed occurrence is delivered, late, in order."""
    LATEST = "latest"
    """Of the missed occurrences only the latest (the last at or before now) is delivered."""
    NONE = "none"
    """Missed occurrences are skipped."""


DEFAULT_CATCH_UP = CatchUp.LATEST
"""The catch-up policy when none is given."""

DEFAULT_CATCH_UP_WINDOW_MS = 60_000
"""An occurrence delivered at most this late is not missed, when no window is given."""

MIN_EVERY_MS = 1_000
"""The smallest rate accepted: one occurrence a second."""

_HOST_ZONES = frozenset({"localtime", "posixrules"})
"""Zone names that stand for the host's own setting, not an IANA zone."""

_CRON_CHECKED_FROM = datetime(2000, 1, 1)
"""Where the "never matches" check starts (naive: no zone logic in cronsim)."""

_SECOND = timedelta(seconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One occurrence of a series.

    Attributes:
        nominal_ms: Its nominal (scheduled) instant, epoch milliseconds.
        number: Its 1-based number in the series.
    """

    nominal_ms: int
    number: int


@dataclass(frozen=True, slots=True)
class Settled:
    """What to do with an occurrence being delivered (:meth:`Recurrence.settle`).

    Attributes:
        deliver: The occurrence to deliver now; ``None``: deliver nothing.
        next: The occurrence the schedule re-arms to; ``None``: the series has ended.
        skipped: How many occurrences, from the one being delivered on, are never
            delivered.
    """

    deliver: Occurrence | None
    next: Occurrence | None
    skipped: int


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A recurring series: a cron expression in a time zone, or a fixed rate.

    Construction validates every field; a :class:`Recurrence` that exists is usable.
    The daylight-saving rules are those of the module (:mod:`delayline.core.recurrence`).

    Attributes:
        cron: 5 fields (minute hour day-of-month month day-of-week) or 6 (second
            first), in cronsim's dialect. Exactly one of ``cron`` and ``every_ms``.
        every_ms: A fixed rate, at least :data:`MIN_EVERY_MS`.
        time_zone: The IANA zone ``cron`` is read in (a rate ignores it).
        until_ms: No occurrence is after this instant.
        max_occurrences: No occurrence is numbered above this (at least 1).
        catch_up: What becomes of missed occurrences (:class:`CatchUp`).
        catch_up_window_ms: An occurrence delivered at most this late is not missed.

    Raises:
        RecurrenceError: a field is refused; the message says which and why.
    """

    cron: str | None = None
    every_ms: int | None = None
    time_zone: str = "UTC"
    until_ms: int | None = None
    max_occurrences: int | None = None
    catch_up: CatchUp = DEFAULT_CATCH_UP
    catch_up_window_ms: int = DEFAULT_CATCH_UP_WINDOW_MS

    def __post_init__(self) -> None:
        if self.cron is None and self.every_ms is None:
            raise RecurrenceError("give a cron expression or a rate (every)")
        if self.cron is not None and self.every_ms is not None:
            raise RecurrenceError("give a cron expression or a rate (every), not both")
        if self.cron is not None:
            problem = _cron_problem(self.cron)
            if problem is not None:
                raise RecurrenceError(f"cron expression {self.cron!r}: {problem}")
        if self.every_ms is not None and self.every_ms < MIN_EVERY_MS:
            raise RecurrenceError(
                f"rate {format_duration_ms(self.every_ms)} is below the minimum of "
                f"{format_duration_ms(MIN_EVERY_MS)}"
            )
        _zone(self.time_zone)
        if self.until_ms is not None and self.until_ms < 0:
            raise RecurrenceError(f"until {self.until_ms} is before 1970")
        if self.max_occurrences is not None and self.max_occurrences < 1:
            raise RecurrenceError(f"max occurrences {self.max_occurrences} is below 1")
        if self.catch_up_window_ms < 0:
            raise RecurrenceError(f"catch-up window {self.catch_up_window_ms} ms is negative")
        try:
            # A plain string ("none") becomes the enum: the field is always a CatchUp.
            object.__setattr__(self, "catch_up", CatchUp(self.catch_up))
        except ValueError:
            raise RecurrenceError(
                f"unknown catch-up policy {self.catch_up!r}: use all, latest or none"
            ) from None

    def first_at_or_after(self, start_ms: int) -> Occurrence | None:
        """Occurrence number 1 of a series that starts at ``start_ms``.

        Args:
            start_ms: The earliest instant the series may begin.

        Returns:
            For a cron expression its first instant at or after ``start_ms``; for a
            rate ``start_ms`` itself. ``None`` when that is after ``until_ms``, or
            when a cron expression has no instant left before year 10000.
        """
        if self.every_ms is not None:
            first: int | None = start_ms
        else:
            first = next(self._cron_instants_after(start_ms - 1), None)
        if first is None or not self._within(first, 1):
            return None
        return Occurrence(first, 1)

    def next_after(self, current: Occurrence, after_ms: int | None = None) -> Occurrence | None:
        """The occurrence that follows ``current``, or the first after ``after_ms``.

        Args:
            current: An occurrence of the series. For a cron expression its instant
                need not match the expression (a producer may choose any first due
                time); a rate is anchored at it (``nominal + k * every_ms``).
            after_ms: Skip to the first occurrence strictly after this instant, when
                it is later than ``current``.

        Returns:
            The first occurrence strictly after ``max(current.nominal_ms, after_ms)``,
            numbered ``current.number`` plus the occurrences counted from ``current``
            to it (``current.number + 1`` for the very next). ``None`` when the series
            ends first (``until_ms``, ``max_occurrences``).
        """
        threshold = current.nominal_ms if after_ms is None else max(current.nominal_ms, after_ms)
        if self.every_ms is not None:
            return self._rate_nth(current, (threshold - current.nominal_ms) // self.every_ms + 1)
        for occurrence in self._following(current):
            if occurrence.nominal_ms > threshold:
                return occurrence
        return None

    def upcoming(self, current: Occurrence, count: int) -> list[Occurrence]:
        """``current`` and the occurrences after it, for display.

        Args:
            current: The occurrence the schedule is due for.
            count: How many occurrences to list at most.

        Returns:
            At most ``count`` occurrences in order, starting with ``current``; none
            of them past ``until_ms`` or ``max_occurrences`` (empty if ``current``
            itself is).
        """
        if count <= 0 or not self._within(current.nominal_ms, current.number):
            return []
        return [current, *itertools.islice(self._following(current), count - 1)]

    def settle(self, current: Occurrence, now_ms: int) -> Settled:
        """Decide what delivering ``current`` at ``now_ms`` means, by the catch-up policy.

        ``current`` is missed when it is delivered more than ``catch_up_window_ms``
        after its nominal instant (never delivering early is the caller's job: a
        ``now_ms`` before the nominal instant counts as on time).

        * Not missed, or policy ``all``: deliver ``current``; re-arm to the next
          occurrence (which, if already past, is judged on its own turn).
        * ``latest``: deliver the last occurrence at or before ``now_ms``; re-arm to
          the one after it.
        * ``none``: deliver nothing; re-arm to the first occurrence not older than the
          window (``nominal >= now_ms - catch_up_window_ms``).

        Args:
            current: The occurrence due, as the schedule carries it.
            now_ms: The instant of delivery.

        Returns:
            What to deliver, what to re-arm to, and how many occurrences (counted from
            ``current``) are never delivered. An occurrence past ``until_ms`` or
            ``max_occurrences`` is never delivered: nothing to deliver, the series has
            ended, none skipped.
        """
        if not self._within(current.nominal_ms, current.number):
            return Settled(None, None, 0)
        if now_ms - current.nominal_ms <= self.catch_up_window_ms or self.catch_up == CatchUp.ALL:
            return Settled(current, self.next_after(current), 0)
        if self.catch_up == CatchUp.LATEST:
            return self._settle_latest(current, now_ms)
        return self._settle_none(current, now_ms - self.catch_up_window_ms)

    def _settle_latest(self, current: Occurrence, now_ms: int) -> Settled:
        """Deliver the last occurrence at or before ``now_ms``."""
        if self.every_ms is not None:
            k = (now_ms - current.nominal_ms) // self.every_ms
            last = self._rate_last_k(current)
            if last is not None:
                k = min(k, last)
            latest = Occurrence(current.nominal_ms + k * self.every_ms, current.number + k)
            return Settled(latest, self._rate_nth(current, k + 1), k)
        latest, following = current, None
        for occurrence in self._following(current):
            if occurrence.nominal_ms > now_ms:
                following = occurrence
                break
            latest = occurrence
        return Settled(latest, following, latest.number - current.number)

    def _settle_none(self, current: Occurrence, oldest_ms: int) -> Settled:
        """Deliver nothing; re-arm to the first occurrence at or after ``oldest_ms``."""
        if self.every_ms is not None:
            k = -((current.nominal_ms - oldest_ms) // self.every_ms)  # ceiling division
            last = self._rate_last_k(current)
            if last is not None and k > last:
                return Settled(None, None, last + 1)
            return Settled(None, self._rate_nth(current, k), k)
        last_number = current.number
        for occurrence in self._following(current):
            if occurrence.nominal_ms >= oldest_ms:
                return Settled(None, occurrence, occurrence.number - current.number)
            last_number = occurrence.number
        return Settled(None, None, last_number - current.number + 1)

    def _within(self, nominal_ms: int, number: int) -> bool:
        """Whether an occurrence is inside the series' bounds."""
        return (self.until_ms is None or nominal_ms <= self.until_ms) and (
            self.max_occurrences is None or number <= self.max_occurrences
        )

    def _rate_last_k(self, current: Occurrence) -> int | None:
        """For a rate: the largest ``k`` whose occurrence ``current + k`` is in bounds."""
        assert self.every_ms is not None
        bounds = []
        if self.until_ms is not None:
            bounds.append((self.until_ms - current.nominal_ms) // self.every_ms)
        if self.max_occurrences is not None:
            bounds.append(self.max_occurrences - current.number)
        return min(bounds) if bounds else None

    def _rate_nth(self, current: Occurrence, k: int) -> Occurrence | None:
        """For a rate: the occurrence ``k`` steps after ``current``, if in bounds."""
        assert self.every_ms is not None
        occurrence = Occurrence(current.nominal_ms + k * self.every_ms, current.number + k)
        return occurrence if self._within(occurrence.nominal_ms, occurrence.number) else None

    def _following(self, current: Occurrence) -> Iterator[Occurrence]:
        """The occurrences after ``current``, in order, numbered, until the series ends."""
        if self.every_ms is not None:
            instants: Iterator[int] = itertools.count(
                current.nominal_ms + self.every_ms, self.every_ms
            )
        else:
            instants = self._cron_instants_after(current.nominal_ms)
        for number, instant in enumerate(instants, start=current.number + 1):
            if not self._within(instant, number):
                return
            yield Occurrence(instant, number)

    def _cron_instants_after(self, after_ms: int) -> Iterator[int]:
        """The expression's instants strictly after ``after_ms``, strictly increasing.

        Ends quietly when cronsim finds no match within 50 years or the calendar runs
        out (year 9999).
        """
        assert self.cron is not None
        zone = _zone(self.time_zone)
        last = after_ms
        try:
            local = ms_to_datetime(after_ms).astimezone(zone)
            if _is_wall_clock(self.cron):
                # Naive: cronsim iterates local times with no zone logic; they are mapped
                # to instants here. Local times at or before `local` map at or before it.
                naive = local.replace(tzinfo=None, fold=0)
                instants = (_wall_to_ms(t, zone) for t in CronSim(self.cron, naive))
            else:
                instants = (datetime_to_ms(t) for t in CronSim(self.cron, local))
            for instant in instants:
                if instant > last:
                    last = instant
                    yield instant
        except OverflowError:
            return


def _is_wall_clock(cron: str) -> bool:
    """Whether ``cron`` names local times (minute and hour fields fixed)."""
    fields = cron.split()
    minute, hour = fields[-5], fields[-4]
    return not minute.startswith("*") and not hour.startswith("*")


@lru_cache(maxsize=1024)
def _cron_problem(cron: str) -> str | None:
    """Why cronsim refuses ``cron`` (lowercase, short), ``None`` if it accepts it."""
    try:
        iterator = CronSim(cron, _CRON_CHECKED_FROM)
    except CronSimError as exc:
        message = str(exc) or "not a cron expression"
        return message[:1].lower() + message[1:]
    try:
        next(iterator)
    except StopIteration:
        return "never matches"
    return None


def _zone(name: str) -> ZoneInfo:
    """The IANA zone named ``name``.

    Raises:
        RecurrenceError: no such zone, or a name that stands for the host's setting.
    """
    if name in _HOST_ZONES:
        raise RecurrenceError(f"time zone {name!r} depends on the host: name an IANA zone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise RecurrenceError(f"unknown time zone {name!r}") from None


def _wall_to_ms(local: datetime, zone: ZoneInfo) -> int:
    """The instant a naive local time stands for: its first occurrence when it is
    repeated, the first instant after the gap when it does not exist."""
    aware = local.replace(tzinfo=zone, fold=0)
    if aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == local:
        return datetime_to_ms(aware)
    return _gap_end_s(local, zone) * 1000


def _gap_end_s(local: datetime, zone: ZoneInfo) -> int:
    """The first instant (epoch seconds) whose local time is after ``local``, a local
    time that does not exist: the instant the gap ends."""
    # In a gap fold=1 reads the offset after the transition and fold=0 the one before:
    # the transition lies in (low, high]. Bisect on "its local time is after `local`".
    low = (local.replace(tzinfo=zone, fold=1) - _EPOCH) // _SECOND
    high = (local.replace(tzinfo=zone, fold=0) - _EPOCH) // _SECOND
    while high - low > 1:
        middle = (low + high) // 2
        if (_EPOCH + middle * _SECOND).astimezone(zone).replace(tzinfo=None) > local:
            high = middle
        else:
            low = middle
    return high
