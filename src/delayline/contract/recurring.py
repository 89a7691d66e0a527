"""Recurring schedules, groups and pauses in the header contract.

A recurring schedule is an ordinary header-contract schedule (its ``scheduler-epoch`` is
the due time of its next occurrence) with a recurrence in headers of its own. Each
occurrence is delivered by the committer, which writes the schedule again for its
next occurrence in the transaction that delivers it (:func:`render_rearm`): the hold
keeps one version per recurring schedule, as for any other.

* ``delayline-cron``: a cron expression, 5 fields or 6 with the second first
  (:mod:`delayline.core.recurrence`); or ``delayline-every``: a fixed rate (``15m``).
* ``delayline-time-zone``: the IANA zone the expression is read in (``UTC``).
* ``delayline-until``, ``delayline-max-occurrences``: where the series ends.
* ``delayline-catch-up`` (``all``, ``latest``, ``none``) and
  ``delayline-catch-up-window``: what becomes of missed occurrences.
* ``delayline-occurrence``: the number of the occurrence the version is due for (1 when
  absent); every delivery carries it, with ``scheduler-epoch`` set to that
  occurrence's nominal time.

The reference is ``docs/contracts.md``.
Two more headers work on any schedule: ``delayline-group`` names a group (listed,
cancelled, paused and resumed together through the API), and ``delayline-paused`` marks
a paused version, whose ``scheduler-epoch`` is the latest instant delayline accepts
(:data:`delayline.core.model.MAX_EPOCH_MS`) and which remembers in this header the
due time it had (Unix seconds).

A recurrence the library refuses (a bad cron expression, an unknown zone...) makes
the schedule a dead letter when it falls due, with the reason in ``delayline-error``:
the pipeline's validation in Spark SQL judges only the header contract itself. The
client, the command line and the API refuse such a schedule before writing it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from delayline.contract import headers as h
from delayline.contract.headers import (
    CATCH_UP,
    CATCH_UP_WINDOW,
    CRON,
    EVERY,
    GROUP,
    MAX_OCCURRENCES,
    OCCURRENCE,
    PAUSED,
    RECURRENCE_HEADERS,
    TIME_ZONE,
    UNTIL,
)
from delayline.contract.pacing import window_headers
from delayline.contract.records import OutgoingRecord, without_copy_of
from delayline.core.model import MAX_EPOCH_MS, Headers, Schedule
from delayline.core.recurrence import (
    DEFAULT_CATCH_UP,
    DEFAULT_CATCH_UP_WINDOW_MS,
    CatchUp,
    Occurrence,
    Recurrence,
    RecurrenceError,
)
from delayline.core.units import format_duration_ms, parse_duration_ms
from delayline.errors import ConfigError, InvalidScheduleError

MAX_GROUP_LENGTH = 200
"""The longest group name, in characters."""


def is_recurring(headers: Headers) -> bool:
    """Whether ``headers`` state a recurrence (valid or not): a cron or a rate header."""
    for name, _ in headers:  # noqa: SIM110 - a loop: this runs once per delivery
        if name in (CRON, EVERY):
            return True
    return False


def recurrence_of(headers: Headers) -> Recurrence | None:
    """The recurrence ``headers`` state, ``None`` for a one-off.

    Raises:
        RecurrenceError: a header is repeated, not UTF-8 or refused by
            :class:`~delayline.core.recurrence.Recurrence`; the message is the reason a
            dead letter carries.
    """
    if not is_recurring(headers):
        return None
    text = _texts(headers, RECURRENCE_HEADERS)
    every_ms = None
    if EVERY in text:
        every_ms = _duration(EVERY, text[EVERY])
    until_ms = None
    if UNTIL in text:
        until_ms = _epoch(UNTIL, text[UNTIL])
    limit = None
    if MAX_OCCURRENCES in text:
        limit = _number(MAX_OCCURRENCES, text[MAX_OCCURRENCES])
    catch_up, window_ms = _catch_up(text)
    return Recurrence(
        cron=text.get(CRON),
        every_ms=every_ms,
        time_zone=text.get(TIME_ZONE, "UTC").strip() or "UTC",
        until_ms=until_ms,
        max_occurrences=limit,
        catch_up=catch_up,
        catch_up_window_ms=window_ms,
    )


def one_off_catch_up(headers: Headers) -> tuple[CatchUp, int]:
    """The catch-up policy and window a one-off schedule states (a paused one-off
    follows them on resume); the defaults where absent or unreadable."""
    try:
        return _catch_up(_texts(headers, (CATCH_UP, CATCH_UP_WINDOW)))
    except RecurrenceError:
        return DEFAULT_CATCH_UP, DEFAULT_CATCH_UP_WINDOW_MS


def occurrence_number(headers: Headers) -> int:
    """The number of the occurrence a version is due for (``delayline-occurrence``, 1
    when absent).

    Raises:
        RecurrenceError: the header is repeated or not a whole number of 1 or more.
    """
    text = _texts(headers, (OCCURRENCE,))
    return _number(OCCURRENCE, text[OCCURRENCE]) if OCCURRENCE in text else 1


def group_of(headers: Headers) -> str | None:
    """The group a schedule names (the first ``delayline-group``), if any."""
    for name, value in headers:
        if name == GROUP and value is not None:
            return value.decode("utf-8", "replace")
    return None


def describe_recurrence(headers: Headers) -> str | None:
    """How a schedule recurs, in words (``cron 0 9 * * 1-5 in Europe/Berlin``, ``every
    15m``), for lists; ``None`` for a one-off. A refused recurrence is described as
    ``refused: <reason>``."""
    try:
        recurrence = recurrence_of(headers)
    except RecurrenceError as exc:
        return f"refused: {exc}"
    if recurrence is None:
        return None
    if recurrence.cron is not None:
        return f"cron {recurrence.cron} in {recurrence.time_zone}"
    return f"every {format_duration_ms(recurrence.every_ms or 0)}"


def paused_due_ms(headers: Headers) -> int | None:
    """The due time a paused version had (``delayline-paused``); ``None``: not paused,
    or the header unreadable (the version then waits as written)."""
    for name, value in headers:
        if name == PAUSED and value is not None:
            try:
                return h.parse_epoch_ms(value.decode("utf-8"))
            except (UnicodeDecodeError, h.EpochError):
                return None
    return None


def recurrence_headers(recurrence: Recurrence) -> Headers:
    """The headers that state ``recurrence``, defaults left out (the inverse of
    :func:`recurrence_of`)."""
    out: list[tuple[str, bytes | None]] = []
    if recurrence.cron is not None:
        out.append((CRON, recurrence.cron.encode()))
    if recurrence.every_ms is not None:
        out.append((EVERY, format_duration_ms(recurrence.every_ms).encode()))
    if recurrence.time_zone != "UTC":
        out.append((TIME_ZONE, recurrence.time_zone.encode()))
    if recurrence.until_ms is not None:
        out.append((UNTIL, h.format_epoch(recurrence.until_ms).encode()))
    if recurrence.max_occurrences is not None:
        out.append((MAX_OCCURRENCES, str(recurrence.max_occurrences).encode()))
    if recurrence.catch_up != DEFAULT_CATCH_UP:
        out.append((CATCH_UP, str(recurrence.catch_up).encode()))
    if recurrence.catch_up_window_ms != DEFAULT_CATCH_UP_WINDOW_MS:
        out.append((CATCH_UP_WINDOW, format_duration_ms(recurrence.catch_up_window_ms).encode()))
    return tuple(out)


def own_headers(
    recurrence: Recurrence | None, group: str | None, window_ms: int | None = None
) -> Headers:
    """The headers a producer writes for ``recurrence``, ``group`` and a delivery
    window of ``window_ms`` (:func:`delayline.contract.pacing.window_headers`), for
    :func:`delayline.contract.records.build_schedule`.

    Raises:
        InvalidScheduleError: ``group`` is empty, too long, or has control characters.
        WindowError: ``window_ms`` is outside 1 ms..1 h.
    """
    out = recurrence_headers(recurrence) if recurrence is not None else ()
    out = (*out, *window_headers(window_ms))
    if group is None:
        return out
    if not group or len(group) > MAX_GROUP_LENGTH or not group.isprintable():
        raise InvalidScheduleError(
            f"group {h.clip(group)}: use 1 to {MAX_GROUP_LENGTH} printable characters"
        )
    return (*out, (GROUP, group.encode()))


def first_due_ms(recurrence: Recurrence, start_ms: int) -> int:
    """The due time of a recurring schedule's first occurrence at or after ``start_ms``.

    Raises:
        InvalidScheduleError: the series has no occurrence from then on.
    """
    first = recurrence.first_at_or_after(start_ms)
    if first is None:
        raise InvalidScheduleError("the recurrence has no occurrence after its start")
    return first.nominal_ms


def with_headers(headers: Headers, replaced: Iterable[tuple[str, bytes | None]]) -> Headers:
    """``headers`` with every header named in ``replaced`` removed, then ``replaced``
    appended in order (a name with value ``None`` is only removed)."""
    changes = list(replaced)
    names = {name for name, _ in changes}
    kept = tuple((name, value) for name, value in headers if name not in names)
    return (*kept, *((name, value) for name, value in changes if value is not None))


def at_occurrence(schedule: Schedule, occurrence: Occurrence) -> Schedule:
    """``schedule`` as due for ``occurrence``: ``scheduler-epoch`` its nominal time and
    ``delayline-occurrence`` its number, in place of theirs (other headers as they
    were). The source is kept: it is the version that delivers it."""
    headers = _with_epoch(schedule.headers, occurrence.nominal_ms)
    headers = with_headers(headers, ((OCCURRENCE, str(occurrence.number).encode()),))
    return replace(schedule, due_ms=occurrence.nominal_ms, headers=headers)


def render_rearm(schedule: Schedule, occurrence: Occurrence) -> OutgoingRecord:
    """The schedules-topic record that re-arms recurring ``schedule`` for
    ``occurrence``: the schedule as due then, marked ``delayline-rearm-of`` (the
    version's offset), written to the partition its version came from (never through a
    partitioner, so compaction replaces that version)."""
    source = schedule.require_source()
    due = at_occurrence(schedule, occurrence)
    marked = (*without_copy_of(due.headers), (h.REARM_OF, str(source.offset).encode()))
    return OutgoingRecord(
        source.topic, schedule.id.encode(), schedule.payload, marked, source.partition
    )


def paused_headers(headers: Headers, due_ms: int) -> Headers:
    """The headers of a version paused at due time ``due_ms``: due at
    :data:`MAX_EPOCH_MS`, remembering ``due_ms`` in ``delayline-paused``."""
    headers = _with_epoch(headers, MAX_EPOCH_MS)
    return with_headers(without_copy_of(headers), ((PAUSED, h.format_epoch(due_ms).encode()),))


def resumed_headers(headers: Headers, due_ms: int) -> Headers:
    """The headers of a paused version resumed, due at ``due_ms``."""
    return with_headers(_with_epoch(without_copy_of(headers), due_ms), ((PAUSED, None),))


def _with_epoch(headers: Headers, due_ms: int) -> Headers:
    """``headers`` with ``scheduler-epoch`` set to ``due_ms``, in its place."""
    epoch = h.format_epoch(due_ms).encode()
    return tuple((name, epoch if name == h.EPOCH else value) for name, value in headers)


def _texts(headers: Headers, names: Iterable[str]) -> dict[str, str]:
    """The text of each header of ``names`` present, each at most once."""
    wanted = set(names)
    out: dict[str, str] = {}
    for name, value in headers:
        if name not in wanted:
            continue
        if name in out:
            raise RecurrenceError(f"header {name} appears more than once")
        if value is None:
            raise RecurrenceError(f"header {name} has no value")
        try:
            out[name] = value.decode("utf-8")
        except UnicodeDecodeError:
            raise RecurrenceError(f"header {name} is not valid UTF-8") from None
    return out


def _catch_up(text: Mapping[str, str]) -> tuple[CatchUp, int]:
    """The catch-up policy and window the header texts state (the defaults where
    absent)."""
    policy = DEFAULT_CATCH_UP
    if CATCH_UP in text:
        try:
            policy = CatchUp(text[CATCH_UP].strip().lower())
        except ValueError:
            raise RecurrenceError(
                f"header {CATCH_UP} is {h.clip(text[CATCH_UP])}: use all, latest or none"
            ) from None
    window_ms = DEFAULT_CATCH_UP_WINDOW_MS
    if CATCH_UP_WINDOW in text:
        window_ms = _duration(CATCH_UP_WINDOW, text[CATCH_UP_WINDOW])
    return policy, window_ms


def _duration(name: str, text: str) -> int:
    try:
        return parse_duration_ms(text)
    except ConfigError:
        raise RecurrenceError(
            f"header {name} is {h.clip(text)}: use a duration such as 90s, 15m or 1h30m"
        ) from None


def _epoch(name: str, text: str) -> int:
    try:
        return h.parse_epoch_ms(text)
    except h.EpochError as exc:
        raise RecurrenceError(f"header {name} {exc}") from None


def _number(name: str, text: str) -> int:
    stripped = text.strip()
    if not stripped.isascii() or not stripped.isdigit() or len(stripped) > 18 or int(stripped) < 1:
        raise RecurrenceError(f"header {name} is {h.clip(text)}: use a whole number of 1 or more")
    return int(stripped)
