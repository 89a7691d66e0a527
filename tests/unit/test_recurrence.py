"""The calendar arithmetic of recurring schedules (delayline.core.recurrence): against
cronsim itself over random expressions, zones and instants; named daylight-saving
transitions with exact instants; the catch-up policies; the validation messages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim, CronSimError
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from delayline.core.model import MAX_EPOCH_MS
from delayline.core.recurrence import (
    DEFAULT_CATCH_UP,
    DEFAULT_CATCH_UP_WINDOW_MS,
    MIN_EVERY_MS,
    CatchUp,
    Occurrence,
    Recurrence,
    RecurrenceError,
    Settled,
)
from delayline.errors import InvalidScheduleError

SECOND = 1_000
NO_EXPLAIN = tuple(p for p in Phase if p is not Phase.explain)
"""The property tests run a fixed set of examples (``derandomize``: a fresh clone must not
draw a rare expression that cronsim walks minute by minute for years) and without the
explain phase, whose line tracer made one such walk take over ten minutes here."""
MINUTE = 60_000
HOUR = 3_600_000
DAY = 86_400_000

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "Australia/Lord_Howe",  # 30-minute DST
    "Asia/Kolkata",  # +05:30, no DST
    "America/Santiago",  # DST changes at local midnight
    "Pacific/Chatham",  # +12:45/+13:45, changes at 02:45/03:45
    "Europe/London",
    "America/St_Johns",  # -03:30/-02:30
]


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    """Epoch milliseconds of a UTC wall time (written out, not computed by the module)."""
    return int(datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()) * 1000


def local(ms: int, zone: str) -> datetime:
    """The local time of an instant in ``zone`` (fold set on a repeated hour's 2nd pass)."""
    return datetime.fromtimestamp(ms / 1000, UTC).astimezone(ZoneInfo(zone))


def cronsim_ms(value: datetime) -> int:
    """cronsim's answer as epoch milliseconds (its datetimes are whole seconds)."""
    return round(value.timestamp() * 1000)


def is_wall_clock(expr: str) -> bool:
    """The rule of the module, restated: minute and hour fields fixed."""
    fields = expr.split()
    return not fields[-5].startswith("*") and not fields[-4].startswith("*")


def nominals(occurrences: list[Occurrence]) -> list[int]:
    return [o.nominal_ms for o in occurrences]


def series(recurrence: Recurrence, start_ms: int, count: int) -> list[int]:
    """The first ``count`` instants from ``start_ms``, walked with next_after."""
    occurrence = recurrence.first_at_or_after(start_ms)
    out: list[int] = []
    while occurrence is not None and len(out) < count:
        out.append(occurrence.nominal_ms)
        occurrence = recurrence.next_after(occurrence)
    return out


def between(recurrence: Recurrence, start_ms: int, end_ms: int) -> list[int]:
    """The instants in ``[start_ms, end_ms)``."""
    out: list[int] = []
    occurrence = recurrence.first_at_or_after(start_ms)
    while occurrence is not None and occurrence.nominal_ms < end_ms:
        out.append(occurrence.nominal_ms)
        occurrence = recurrence.next_after(occurrence)
    return out


# --- random cron expressions, zones and instants -------------------------------------


def cron_field(low: int, high: int, extra: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """A field of fixed values, ranges, steps, lists or '*' within ``low..high``."""
    value = st.integers(low, high)
    choices = [
        st.just("*"),
        value.map(str),
        st.tuples(value, value).map(lambda ab: f"{min(ab)}-{max(ab)}"),
        st.integers(1, high).map(lambda n: f"*/{n}"),
        st.tuples(value, st.integers(1, high)).map(lambda vs: f"{vs[0]}/{vs[1]}"),
        st.tuples(value, value, st.integers(1, 5)).map(
            lambda abs_: f"{min(abs_[:2])}-{max(abs_[:2])}/{abs_[2]}"
        ),
        st.lists(value, min_size=2, max_size=4).map(lambda vs: ",".join(map(str, vs))),
    ]
    if extra:
        choices.append(st.sampled_from(extra))
    return st.one_of(*choices)


# Minutes and hours where the transitions of ZONES fall come up often.
minutes = st.one_of(st.sampled_from(["0", "30", "45", "15", "0,30", "*/15"]), cron_field(0, 59))
hours = st.one_of(st.sampled_from(["0", "1", "2", "3", "23", "1-3", "2,3"]), cron_field(0, 23))
days = st.one_of(st.just("*"), cron_field(1, 31, ("L", "LW", "L,15", "28-31")))
months = st.one_of(st.just("*"), cron_field(1, 12, ("JAN-MAR", "OCT,NOV")))
weekdays = st.one_of(st.just("*"), cron_field(0, 6, ("MON-FRI", "5L", "0#1", "SUN")))
five_fields = st.tuples(minutes, hours, days, months, weekdays).map(" ".join)
six_fields = st.tuples(cron_field(0, 59), five_fields).map(" ".join)

JAN_2024 = utc(2024, 1, 1)
JAN_2031 = utc(2031, 1, 1)


@lru_cache
def transitions(zone: str) -> tuple[int, ...]:
    """The instants (ms) where ``zone`` changes its UTC offset in 2024-2030: found day by
    day, then bisected to the second (independently of the module)."""
    tz = ZoneInfo(zone)

    def offset(ms: int) -> timedelta | None:
        return datetime.fromtimestamp(ms / 1000, tz).utcoffset()

    found = []
    for day in range(JAN_2024, JAN_2031, DAY):
        if offset(day) != offset(day + DAY):
            low, high = day, day + DAY
            while high - low > SECOND:
                middle = (low + high) // 2 // SECOND * SECOND
                low, high = (middle, high) if offset(middle) == offset(low) else (low, middle)
            found.append(high)
    return tuple(found)


@st.composite
def zone_and_instant(draw: st.DrawFn) -> tuple[str, int]:
    """A zone, and an instant in 2024-2030, most often within hours of a transition."""
    zone = draw(st.sampled_from(ZONES))
    near = transitions(zone)
    if near and draw(st.integers(0, 3)) > 0:
        instant = draw(st.sampled_from(near)) + draw(st.integers(-30 * HOUR, 30 * HOUR))
        if draw(st.booleans()):
            instant = instant // MINUTE * MINUTE + draw(st.sampled_from([0, -1, 1, 500]))
    else:
        instant = draw(st.integers(JAN_2024, JAN_2031 - 1))
    return zone, instant


def accepted(expr: str) -> bool:
    """Whether cronsim parses ``expr`` and finds a first match from 2000."""
    try:
        next(CronSim(expr, datetime(2000, 1, 1)))
    except (CronSimError, StopIteration):
        return False
    return True


def cronsim_next(expr: str, zone: str, after_ms: int) -> tuple[int, int]:
    """cronsim's own first answer after ``after_ms`` (an aware datetime in ``zone``), and
    its first answer strictly after ``after_ms`` (iterating on)."""
    iterator = CronSim(expr, local(after_ms, zone))
    first = answer = cronsim_ms(next(iterator))
    while answer <= after_ms:
        answer = cronsim_ms(next(iterator))
    return first, answer


# --- against cronsim ------------------------------------------------------------------


@settings(max_examples=600, deadline=None, derandomize=True, phases=NO_EXPLAIN)
@given(expr=five_fields, where=zone_and_instant())
# cronsim answers at or before `after` here (the exclusion below):
@example(expr="30 2 * * *", where=("Europe/Berlin", utc(2026, 10, 25, 1, 10)))
@example(expr="30 1 * * *", where=("America/New_York", utc(2026, 11, 1, 6, 10)))
def test_next_after_is_cronsims_next_instant(expr: str, where: tuple[str, int]) -> None:
    """Five steps from a random instant, each compared with a fresh cronsim, which uses
    the same daylight-saving rule for five fields (wall-clock expressions iterated in
    local time, a missing time moved to the end of the gap, a repeated one read at its
    first pass; the others in real time).

    One exclusion: cronsim starts from the *wall time* of the instant it is given. When
    that instant is in the second pass of a repeated hour (fold=1) and the expression is
    a wall-clock one, cronsim may answer a time of that repeated hour read at its first
    pass: an instant before the one it was given. The module answers cronsim's first
    answer that is strictly later; the test asserts the exclusion happens only then."""
    zone, after = where
    if not accepted(expr):
        with pytest.raises(RecurrenceError, match=r"^cron expression "):
            Recurrence(cron=expr, time_zone=zone)
        return
    recurrence = Recurrence(cron=expr, time_zone=zone)
    current = Occurrence(after, 1)
    for _ in range(5):
        first, strictly_after = cronsim_next(expr, zone, current.nominal_ms)
        if first <= current.nominal_ms:
            assert is_wall_clock(expr), (expr, zone, current)
            assert local(current.nominal_ms, zone).fold == 1, (expr, zone, current)
            assert local(first, zone).fold == 0
        following = recurrence.next_after(current)
        assert following == Occurrence(strictly_after, current.number + 1), (expr, zone)
        current = following


@settings(max_examples=150, deadline=None, derandomize=True, phases=NO_EXPLAIN)
@given(expr=st.one_of(five_fields, six_fields), where=zone_and_instant())
def test_fifty_instants_in_a_row_strictly_increase(expr: str, where: tuple[str, int]) -> None:
    zone, after = where
    if not accepted(expr):
        return
    recurrence = Recurrence(cron=expr, time_zone=zone)
    first = recurrence.next_after(Occurrence(after, 7))
    assert first is not None
    assert first.nominal_ms > after
    assert first.number == 8
    assert first.nominal_ms % SECOND == 0
    previous = first
    for _ in range(49):
        following = recurrence.next_after(previous)
        assert following is not None
        assert following.nominal_ms > previous.nominal_ms
        assert following.number == previous.number + 1
        previous = following
    # upcoming walks the same series in one pass.
    assert recurrence.upcoming(first, 50)[-1] == previous
    # first_at_or_after agrees: the first instant at or after, number 1.
    assert recurrence.first_at_or_after(after + 1) == Occurrence(first.nominal_ms, 1)
    assert recurrence.first_at_or_after(first.nominal_ms) == Occurrence(first.nominal_ms, 1)


def test_the_exclusion_cronsim_answers_before_the_instant_it_is_given() -> None:
    # 2026-10-25 02:10 CET: the second pass of Berlin's repeated hour.
    after = utc(2026, 10, 25, 1, 10)
    assert local(after, "Europe/Berlin").fold == 1
    theirs = next(CronSim("30 2 * * *", local(after, "Europe/Berlin")))
    assert cronsim_ms(theirs) == utc(2026, 10, 25, 0, 30)  # 02:30 CEST: 40 minutes earlier
    ours = Recurrence(cron="30 2 * * *", time_zone="Europe/Berlin").next_after(Occurrence(after, 1))
    assert ours == Occurrence(utc(2026, 10, 26, 1, 30), 2)  # the next day, 02:30 CET


# --- daylight saving time: named transitions -----------------------------------------


@pytest.mark.parametrize(
    ("zone", "start", "expected"),
    [
        # Berlin springs forward 2026-03-29 02:00 CET -> 03:00 CEST: 02:30 fires at 03:00.
        (
            "Europe/Berlin",
            utc(2026, 3, 28),
            [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)],
        ),
        # Sydney springs forward 2026-10-04 02:00 AEST -> 03:00 AEDT.
        (
            "Australia/Sydney",
            utc(2026, 10, 2, 12),
            [utc(2026, 10, 2, 16, 30), utc(2026, 10, 3, 16, 0), utc(2026, 10, 4, 15, 30)],
        ),
    ],
)
def test_a_daily_time_in_the_missing_hour_fires_once_when_the_gap_ends(
    zone: str, start: int, expected: list[int]
) -> None:
    recurrence = Recurrence(cron="30 2 * * *", time_zone=zone)
    assert series(recurrence, start, 3) == expected
    assert (local(expected[1], zone).hour, local(expected[1], zone).minute) == (3, 0)


@pytest.mark.parametrize(
    ("zone", "start", "expected"),
    [
        # Berlin falls back 2026-10-25 03:00 CEST -> 02:00 CET: 02:30 fires at 02:30 CEST.
        (
            "Europe/Berlin",
            utc(2026, 10, 24),
            [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)],
        ),
        # Sydney falls back 2026-04-05 03:00 AEDT -> 02:00 AEST.
        (
            "Australia/Sydney",
            utc(2026, 4, 3, 12),
            [utc(2026, 4, 3, 15, 30), utc(2026, 4, 4, 15, 30), utc(2026, 4, 5, 16, 30)],
        ),
    ],
)
def test_a_daily_time_in_the_repeated_hour_fires_once_at_its_first_occurrence(
    zone: str, start: int, expected: list[int]
) -> None:
    recurrence = Recurrence(cron="30 2 * * *", time_zone=zone)
    assert series(recurrence, start, 3) == expected
    assert local(expected[1], zone).fold == 0
    # Asked from inside the repeated hour's second pass: not again that day.
    assert recurrence.next_after(Occurrence(expected[1] + HOUR - MINUTE, 5)) == Occurrence(
        expected[2], 6
    )


@pytest.mark.parametrize(
    ("zone", "day_start", "day_end", "slots"),
    [
        ("Europe/Berlin", utc(2026, 3, 28, 23), utc(2026, 3, 29, 22), 23),
        ("Europe/Berlin", utc(2026, 10, 24, 22), utc(2026, 10, 25, 23), 25),
        ("Australia/Sydney", utc(2026, 10, 3, 14), utc(2026, 10, 4, 13), 23),
        ("Australia/Sydney", utc(2026, 4, 4, 13), utc(2026, 4, 5, 14), 25),
    ],
)
def test_an_hourly_expression_keeps_its_period_in_real_time(
    zone: str, day_start: int, day_end: int, slots: int
) -> None:
    """The local day of the transition (local midnight to local midnight) has 23 or 25
    hours: as many instants, an hour apart."""
    recurrence = Recurrence(cron="0 * * * *", time_zone=zone)
    instants = between(recurrence, day_start, day_end)
    assert instants == [day_start + k * HOUR for k in range(slots)]
    hours = [local(i, zone).hour for i in instants]
    if slots == 23:
        assert len(set(hours)) == 23  # one local hour does not exist
    else:
        assert len(set(hours)) == 24  # one local hour comes twice
        assert sorted(hours).count(2) == 2


@pytest.mark.parametrize(
    ("zone", "start", "local_hours"),
    [
        ("Europe/Berlin", utc(2026, 3, 28, 23), [0, 1, 3, 4]),
        ("Europe/Berlin", utc(2026, 10, 24, 23), [1, 2, 2, 3]),
        ("Australia/Sydney", utc(2026, 10, 3, 14), [0, 1, 3, 4]),
        ("Australia/Sydney", utc(2026, 4, 4, 14), [1, 2, 2, 3]),
    ],
)
def test_a_rate_keeps_its_period_in_real_time(
    zone: str, start: int, local_hours: list[int]
) -> None:
    recurrence = Recurrence(every_ms=HOUR, time_zone=zone)
    instants = series(recurrence, start, 4)
    assert instants == [start, start + 3_600_000, start + 7_200_000, start + 10_800_000]
    assert [local(i, zone).hour for i in instants] == local_hours


def test_the_repeated_hour_fires_in_both_passes_in_real_time_in_the_first_on_the_wall() -> None:
    day_start, day_end = utc(2026, 10, 24, 22), utc(2026, 10, 25, 23)  # Berlin's 25 hours
    real_time = Recurrence(cron="*/20 2 * * *", time_zone="Europe/Berlin")
    assert between(real_time, day_start, day_end) == [
        utc(2026, 10, 25, 0, 0) + k * 20 * MINUTE for k in range(6)
    ]
    wall_clock = Recurrence(cron="0-59 2 * * *", time_zone="Europe/Berlin")
    assert between(wall_clock, day_start, day_end) == [
        utc(2026, 10, 25, 0, 0) + k * MINUTE for k in range(60)
    ]


def test_lord_howe_springs_forward_half_an_hour() -> None:
    # 2026-10-04 02:00 +10:30 -> 02:30 +11: 02:15 does not exist, fires at 02:30.
    recurrence = Recurrence(cron="15 2 * * *", time_zone="Australia/Lord_Howe")
    assert series(recurrence, utc(2026, 10, 2, 12), 3) == [
        utc(2026, 10, 2, 15, 45),
        utc(2026, 10, 3, 15, 30),
        utc(2026, 10, 4, 15, 15),
    ]


def test_santiago_springs_forward_at_midnight() -> None:
    # 2026-09-06 00:00 -04 -> 01:00 -03: local midnight does not exist that day.
    recurrence = Recurrence(cron="0 0 * * *", time_zone="America/Santiago")
    assert series(recurrence, utc(2026, 9, 5), 3) == [
        utc(2026, 9, 5, 4),
        utc(2026, 9, 6, 4),
        utc(2026, 9, 7, 3),
    ]


def test_a_skipped_calendar_day_fires_when_the_gap_ends() -> None:
    # Samoa skipped 2011-12-30 entirely (-10 -> +14 at local midnight).
    recurrence = Recurrence(cron="0 12 30 12 *", time_zone="Pacific/Apia")
    assert recurrence.first_at_or_after(utc(2011, 12, 1)) == Occurrence(utc(2011, 12, 30, 10), 1)


def test_local_times_that_meet_at_the_end_of_a_gap_fire_once() -> None:
    # 02:00, 02:30 and 03:00 on 2026-03-29 in Berlin are all 03:00 CEST (01:00Z).
    recurrence = Recurrence(cron="0,30 2,3 * * *", time_zone="Europe/Berlin")
    start = Occurrence(utc(2026, 3, 28, 23), 1)
    expected = [
        Occurrence(utc(2026, 3, 28, 23), 1),
        Occurrence(utc(2026, 3, 29, 1, 0), 2),
        Occurrence(utc(2026, 3, 29, 1, 30), 3),
        Occurrence(utc(2026, 3, 30, 0, 0), 4),
    ]
    assert recurrence.upcoming(start, 4) == expected
    assert recurrence.settle(start, utc(2026, 3, 29, 23, 50)) == Settled(
        Occurrence(utc(2026, 3, 29, 1, 30), 3), Occurrence(utc(2026, 3, 30, 0, 0), 4), 2
    )


def test_a_six_field_wall_clock_time_follows_the_same_rule() -> None:
    recurrence = Recurrence(cron="0 30 2 * * *", time_zone="Europe/Berlin")
    assert series(recurrence, utc(2026, 3, 28), 3) == [
        utc(2026, 3, 28, 1, 30),
        utc(2026, 3, 29, 1, 0),
        utc(2026, 3, 30, 0, 30),
    ]
    assert series(recurrence, utc(2026, 10, 24, 12), 2) == [
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 26, 1, 30),
    ]


# --- calendar cases ------------------------------------------------------------------


def test_every_weekday_at_nine_in_berlin_over_a_week() -> None:
    recurrence = Recurrence(cron="0 9 * * 1-5", time_zone="Europe/Berlin")
    # Monday 2026-03-23 to Monday 2026-03-30, over the spring-forward Sunday.
    assert series(recurrence, utc(2026, 3, 22), 6) == [
        utc(2026, 3, 23, 8),
        utc(2026, 3, 24, 8),
        utc(2026, 3, 25, 8),
        utc(2026, 3, 26, 8),
        utc(2026, 3, 27, 8),
        utc(2026, 3, 30, 7),
    ]


def test_l_is_the_last_day_of_each_month() -> None:
    recurrence = Recurrence(cron="0 0 L * *")
    assert series(recurrence, utc(2027, 12, 15), 7) == [
        utc(2027, 12, 31),
        utc(2028, 1, 31),
        utc(2028, 2, 29),
        utc(2028, 3, 31),
        utc(2028, 4, 30),
        utc(2028, 5, 31),
        utc(2028, 6, 30),
    ]


def test_the_29th_of_february_waits_for_a_leap_year() -> None:
    recurrence = Recurrence(cron="0 12 29 2 *")
    assert series(recurrence, utc(2026, 1, 1), 2) == [utc(2028, 2, 29, 12), utc(2032, 2, 29, 12)]


def test_the_31st_skips_the_short_months() -> None:
    recurrence = Recurrence(cron="0 0 31 * *")
    assert series(recurrence, utc(2026, 1, 1), 7) == [
        utc(2026, 1, 31),
        utc(2026, 3, 31),
        utc(2026, 5, 31),
        utc(2026, 7, 31),
        utc(2026, 8, 31),
        utc(2026, 10, 31),
        utc(2026, 12, 31),
    ]


def test_every_second_over_a_transition_and_after_a_fraction_of_a_second() -> None:
    recurrence = Recurrence(cron="* * * * * *", time_zone="Europe/Berlin")
    after = utc(2026, 3, 29, 0, 59, 58) + 250
    assert recurrence.next_after(Occurrence(after, 1)) == Occurrence(after + 750, 2)
    assert series(recurrence, after, 3) == [
        utc(2026, 3, 29, 0, 59, 59),
        utc(2026, 3, 29, 1, 0, 0),  # 03:00:00 CEST
        utc(2026, 3, 29, 1, 0, 1),
    ]


def test_first_at_or_after_includes_the_start_and_respects_until() -> None:
    recurrence = Recurrence(cron="0 * * * *", until_ms=utc(2030, 1, 1, 2))
    assert recurrence.first_at_or_after(utc(2030, 1, 1, 1)) == Occurrence(utc(2030, 1, 1, 1), 1)
    assert recurrence.first_at_or_after(utc(2030, 1, 1, 1) + 1) == Occurrence(utc(2030, 1, 1, 2), 1)
    assert recurrence.first_at_or_after(utc(2030, 1, 1, 2) + 1) is None
    rate = Recurrence(every_ms=MINUTE, until_ms=utc(2030, 1, 1))
    assert rate.first_at_or_after(utc(2030, 1, 1) - 123) == Occurrence(utc(2030, 1, 1) - 123, 1)
    assert rate.first_at_or_after(utc(2030, 1, 1) + 1) is None


def test_the_calendar_ends_quietly_in_year_9999() -> None:
    recurrence = Recurrence(cron="0 0 1 1 *", time_zone="Europe/Berlin")
    assert recurrence.first_at_or_after(MAX_EPOCH_MS - DAY) is None
    assert recurrence.next_after(Occurrence(MAX_EPOCH_MS - DAY, 3)) is None
    assert recurrence.settle(Occurrence(MAX_EPOCH_MS - DAY, 3), MAX_EPOCH_MS) == Settled(
        Occurrence(MAX_EPOCH_MS - DAY, 3), None, 0
    )


# --- next_after, upcoming --------------------------------------------------------------

T0 = utc(2030, 1, 1)  # a Tuesday, midnight UTC


def test_next_after_counts_the_occurrences_it_passes() -> None:
    rate = Recurrence(every_ms=MINUTE)
    current = Occurrence(T0, 4)
    assert rate.next_after(current) == Occurrence(T0 + MINUTE, 5)
    assert rate.next_after(current, T0 + 150 * SECOND) == Occurrence(T0 + 3 * MINUTE, 7)
    assert rate.next_after(current, T0 + 3 * MINUTE) == Occurrence(T0 + 4 * MINUTE, 8)
    assert rate.next_after(current, T0 - DAY) == Occurrence(T0 + MINUTE, 5)
    assert rate.next_after(current, T0 + MINUTE - 1) == Occurrence(T0 + MINUTE, 5)
    hourly = Recurrence(cron="0 * * * *")
    assert hourly.next_after(current, T0 + 2 * HOUR) == Occurrence(T0 + 3 * HOUR, 7)
    assert hourly.next_after(current, T0 + 2 * HOUR - 1) == Occurrence(T0 + 2 * HOUR, 6)


def test_a_cron_series_may_start_off_the_expression() -> None:
    hourly = Recurrence(cron="0 * * * *")
    assert hourly.next_after(Occurrence(T0 + 10 * MINUTE, 1)) == Occurrence(T0 + HOUR, 2)


def test_next_after_stops_at_until_and_max_occurrences() -> None:
    assert Recurrence(every_ms=MINUTE, until_ms=T0 + MINUTE).next_after(
        Occurrence(T0, 1)
    ) == Occurrence(T0 + MINUTE, 2)
    assert (
        Recurrence(every_ms=MINUTE, until_ms=T0 + MINUTE - 1).next_after(Occurrence(T0, 1)) is None
    )
    assert Recurrence(every_ms=MINUTE, max_occurrences=3).next_after(Occurrence(T0, 2)) == (
        Occurrence(T0 + MINUTE, 3)
    )
    assert Recurrence(every_ms=MINUTE, max_occurrences=3).next_after(Occurrence(T0, 3)) is None
    hourly = Recurrence(cron="0 * * * *", max_occurrences=5, until_ms=T0 + 10 * HOUR)
    assert hourly.next_after(Occurrence(T0, 1), T0 + 3 * HOUR) == Occurrence(T0 + 4 * HOUR, 5)
    assert hourly.next_after(Occurrence(T0, 1), T0 + 4 * HOUR) is None
    assert hourly.next_after(Occurrence(T0, 1), T0 + 20 * HOUR) is None


def test_upcoming_lists_current_and_the_following_within_the_bounds() -> None:
    hourly = Recurrence(cron="0 * * * *", max_occurrences=4)
    assert hourly.upcoming(Occurrence(T0, 1), 3) == [
        Occurrence(T0, 1),
        Occurrence(T0 + HOUR, 2),
        Occurrence(T0 + 2 * HOUR, 3),
    ]
    assert nominals(hourly.upcoming(Occurrence(T0, 2), 10)) == [T0, T0 + HOUR, T0 + 2 * HOUR]
    assert hourly.upcoming(Occurrence(T0, 5), 10) == []
    assert hourly.upcoming(Occurrence(T0, 1), 0) == []
    rate = Recurrence(every_ms=HOUR, until_ms=T0 + 90 * MINUTE)
    assert nominals(rate.upcoming(Occurrence(T0, 1), 10)) == [T0, T0 + HOUR]
    assert rate.upcoming(Occurrence(T0 + 2 * HOUR, 1), 10) == []


# --- settle: the catch-up policies -------------------------------------------------------


@pytest.mark.parametrize("policy", list(CatchUp))
@pytest.mark.parametrize("late", [-5 * SECOND, 0, 30 * SECOND, DEFAULT_CATCH_UP_WINDOW_MS])
def test_an_occurrence_within_the_window_is_delivered_whatever_the_policy(
    policy: CatchUp, late: int
) -> None:
    for recurrence in (
        Recurrence(every_ms=MINUTE, catch_up=policy),
        Recurrence(cron="* * * * *", catch_up=policy),
    ):
        assert recurrence.settle(Occurrence(T0, 3), T0 + late) == Settled(
            Occurrence(T0, 3), Occurrence(T0 + MINUTE, 4), 0
        )


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # Five and a half minutes late, a one-minute window: occurrences 1-6 are past.
        (CatchUp.ALL, Settled(Occurrence(T0, 1), Occurrence(T0 + MINUTE, 2), 0)),
        (
            CatchUp.LATEST,
            Settled(Occurrence(T0 + 5 * MINUTE, 6), Occurrence(T0 + 6 * MINUTE, 7), 5),
        ),
        # now - window = T0 + 4.5 min: the first not older is T0 + 5 min, number 6.
        (CatchUp.NONE, Settled(None, Occurrence(T0 + 5 * MINUTE, 6), 5)),
    ],
)
def test_a_missed_occurrence_by_policy(policy: CatchUp, expected: Settled) -> None:
    now = T0 + 5 * MINUTE + 30 * SECOND
    assert Recurrence(every_ms=MINUTE, catch_up=policy).settle(Occurrence(T0, 1), now) == expected
    assert Recurrence(cron="* * * * *", catch_up=policy).settle(Occurrence(T0, 1), now) == expected


def test_one_millisecond_past_the_window_is_missed() -> None:
    rate = Recurrence(every_ms=MINUTE, catch_up=CatchUp.NONE, catch_up_window_ms=10 * SECOND)
    assert rate.settle(Occurrence(T0, 1), T0 + 10 * SECOND).deliver == Occurrence(T0, 1)
    assert rate.settle(Occurrence(T0, 1), T0 + 10 * SECOND + 1) == Settled(
        None, Occurrence(T0 + MINUTE, 2), 1
    )


def test_none_rearms_to_an_occurrence_exactly_a_window_old() -> None:
    # now - window = T0 + 2 min, an occurrence: it is not missed, it is next.
    now = T0 + 2 * MINUTE + 30 * SECOND
    for recurrence in (
        Recurrence(every_ms=MINUTE, catch_up=CatchUp.NONE, catch_up_window_ms=30 * SECOND),
        Recurrence(cron="* * * * *", catch_up=CatchUp.NONE, catch_up_window_ms=30 * SECOND),
    ):
        assert recurrence.settle(Occurrence(T0, 1), now) == Settled(
            None, Occurrence(T0 + 2 * MINUTE, 3), 2
        )


@pytest.mark.parametrize(
    ("recurrence", "expected"),
    [
        # Hourly from T0, settled at T0 + 3h30: until T0 + 2h30 leaves occurrences 1-3.
        (
            Recurrence(cron="0 * * * *", catch_up=CatchUp.LATEST, until_ms=T0 + 150 * MINUTE),
            Settled(Occurrence(T0 + 2 * HOUR, 3), None, 2),
        ),
        (
            Recurrence(cron="0 * * * *", catch_up=CatchUp.NONE, until_ms=T0 + 150 * MINUTE),
            Settled(None, None, 3),
        ),
        (
            Recurrence(cron="0 * * * *", catch_up=CatchUp.LATEST, max_occurrences=2),
            Settled(Occurrence(T0 + HOUR, 2), None, 1),
        ),
        (
            Recurrence(cron="0 * * * *", catch_up=CatchUp.NONE, max_occurrences=2),
            Settled(None, None, 2),
        ),
        (
            Recurrence(cron="0 * * * *", catch_up=CatchUp.ALL, max_occurrences=1),
            Settled(Occurrence(T0, 1), None, 0),
        ),
        (
            Recurrence(every_ms=HOUR, catch_up=CatchUp.LATEST, until_ms=T0 + 150 * MINUTE),
            Settled(Occurrence(T0 + 2 * HOUR, 3), None, 2),
        ),
        (
            Recurrence(every_ms=HOUR, catch_up=CatchUp.NONE, until_ms=T0 + 150 * MINUTE),
            Settled(None, None, 3),
        ),
        (
            Recurrence(every_ms=HOUR, catch_up=CatchUp.LATEST, max_occurrences=2),
            Settled(Occurrence(T0 + HOUR, 2), None, 1),
        ),
        (
            Recurrence(every_ms=HOUR, catch_up=CatchUp.NONE, max_occurrences=2),
            Settled(None, None, 2),
        ),
        # The bounds leave room: the next is within them.
        (
            Recurrence(cron="0 * * * *", catch_up=CatchUp.LATEST, max_occurrences=5),
            Settled(Occurrence(T0 + 3 * HOUR, 4), Occurrence(T0 + 4 * HOUR, 5), 3),
        ),
        (
            Recurrence(every_ms=HOUR, catch_up=CatchUp.NONE, until_ms=T0 + 4 * HOUR),
            Settled(None, Occurrence(T0 + 4 * HOUR, 5), 4),
        ),
    ],
)
def test_the_bounds_cut_a_missed_series(recurrence: Recurrence, expected: Settled) -> None:
    assert recurrence.settle(Occurrence(T0, 1), T0 + 210 * MINUTE) == expected


def test_latest_delivers_an_occurrence_exactly_at_now() -> None:
    hourly = Recurrence(cron="0 * * * *", catch_up=CatchUp.LATEST)
    assert hourly.settle(Occurrence(T0, 10), T0 + 3 * HOUR) == Settled(
        Occurrence(T0 + 3 * HOUR, 13), Occurrence(T0 + 4 * HOUR, 14), 3
    )


def test_latest_across_a_transition_counts_real_instants() -> None:
    # Hourly in Berlin from 2026-10-25 00:00Z (02:00 CEST): 02:00 CEST, 02:00 CET,
    # 03:00 CET, 04:00 CET; settled at 03:30Z.
    hourly = Recurrence(cron="0 * * * *", time_zone="Europe/Berlin", catch_up=CatchUp.LATEST)
    assert hourly.settle(Occurrence(utc(2026, 10, 25), 1), utc(2026, 10, 25, 3, 30)) == Settled(
        Occurrence(utc(2026, 10, 25, 3), 4), Occurrence(utc(2026, 10, 25, 4), 5), 3
    )


def test_an_occurrence_outside_the_bounds_is_never_delivered() -> None:
    for recurrence in (
        Recurrence(every_ms=MINUTE, until_ms=T0 - 1),
        Recurrence(cron="* * * * *", max_occurrences=2),
    ):
        assert recurrence.settle(Occurrence(T0, 3), T0) == Settled(None, None, 0)


@settings(max_examples=200, deadline=None, derandomize=True, phases=NO_EXPLAIN)
@given(
    policy=st.sampled_from(list(CatchUp)),
    window=st.integers(0, 10 * MINUTE),
    late=st.integers(-MINUTE, 3 * HOUR),
    until=st.one_of(st.none(), st.integers(0, 4 * HOUR)),
    most=st.one_of(st.none(), st.integers(1, 300)),
    number=st.integers(1, 50),
)
def test_a_rate_settles_as_the_same_cron_does(
    policy: CatchUp, window: int, late: int, until: int | None, most: int | None, number: int
) -> None:
    """Every minute as a rate (arithmetic) and as ``* * * * *`` (iterated): the same
    answers, and each is what its policy promises."""
    until_ms = None if until is None else T0 + until
    max_occurrences = None if most is None else number - 1 + most
    current, now = Occurrence(T0, number), T0 + late
    by_rate = Recurrence(
        every_ms=MINUTE,
        until_ms=until_ms,
        max_occurrences=max_occurrences,
        catch_up=policy,
        catch_up_window_ms=window,
    ).settle(current, now)
    by_cron = Recurrence(
        cron="* * * * *",
        until_ms=until_ms,
        max_occurrences=max_occurrences,
        catch_up=policy,
        catch_up_window_ms=window,
    ).settle(current, now)
    assert by_rate == by_cron
    missed = late > window
    if not missed or policy == CatchUp.ALL:
        assert (by_rate.deliver, by_rate.skipped) == (current, 0)
    elif policy == CatchUp.LATEST:
        assert by_rate.deliver is not None
        assert by_rate.deliver.nominal_ms <= now
        assert by_rate.skipped == by_rate.deliver.number - number
    else:
        assert by_rate.deliver is None
        assert by_rate.next is None or by_rate.next.nominal_ms >= now - window
    if by_rate.next is not None:
        assert by_rate.next.nominal_ms == T0 + (by_rate.next.number - number) * MINUTE
        assert by_rate.next.nominal_ms > (now if policy == CatchUp.LATEST and missed else T0)


# --- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "give a cron expression or a rate (every)"),
        (
            {"cron": "* * * * *", "every_ms": MINUTE},
            "give a cron expression or a rate (every), not both",
        ),
        ({"cron": "61 * * * *"}, "cron expression '61 * * * *': bad minute"),
        ({"cron": "0 25 * * *"}, "cron expression '0 25 * * *': bad hour"),
        ({"cron": "0 0 * * * * *"}, "cron expression '0 0 * * * * *': wrong number of fields"),
        ({"cron": ""}, "cron expression '': wrong number of fields"),
        ({"cron": "@daily"}, "cron expression '@daily': wrong number of fields"),
        # cronsim refuses this one as it parses it: no month has a 30 February.
        ({"cron": "0 0 30 2 *"}, "cron expression '0 0 30 2 *': bad day-of-month"),
        # The last weekday of a month that is a Sunday: parsed, never matched.
        ({"cron": "0 0 LW * */7"}, "cron expression '0 0 LW * */7': never matches"),
        ({"cron": "0 0 */30 2 MON#5"}, "cron expression '0 0 */30 2 MON#5': never matches"),
        ({"cron": "* * * * *", "time_zone": "Europe/Berln"}, "unknown time zone 'Europe/Berln'"),
        ({"cron": "* * * * *", "time_zone": "../x"}, "unknown time zone '../x'"),
        ({"cron": "* * * * *", "time_zone": ""}, "unknown time zone ''"),
        ({"cron": "* * * * *", "time_zone": "Europe"}, "unknown time zone 'Europe'"),
        ({"cron": "* * * * *", "time_zone": "/etc/passwd"}, "unknown time zone '/etc/passwd'"),
        (
            {"cron": "* * * * *", "time_zone": "localtime"},
            "time zone 'localtime' depends on the host: name an IANA zone",
        ),
        ({"every_ms": 999}, "rate 999ms is below the minimum of 1s"),
        ({"every_ms": 0}, "rate 0ms is below the minimum of 1s"),
        ({"every_ms": MINUTE, "time_zone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"every_ms": MINUTE, "max_occurrences": 0}, "max occurrences 0 is below 1"),
        ({"every_ms": MINUTE, "catch_up_window_ms": -1}, "catch-up window -1 ms is negative"),
        ({"every_ms": MINUTE, "until_ms": -1}, "until -1 is before 1970"),
        (
            {"every_ms": MINUTE, "catch_up": "sometimes"},
            "unknown catch-up policy 'sometimes': use all, latest or none",
        ),
    ],
)
def test_a_refused_recurrence_says_why(fields: dict[str, object], message: str) -> None:
    with pytest.raises(RecurrenceError) as caught:
        Recurrence(**fields)  # type: ignore[arg-type]
    assert str(caught.value) == message
    assert isinstance(caught.value, InvalidScheduleError)


def test_the_defaults_and_the_accepted_edges() -> None:
    recurrence = Recurrence(
        every_ms=MIN_EVERY_MS, max_occurrences=1, catch_up_window_ms=0, until_ms=0
    )
    assert (recurrence.time_zone, recurrence.catch_up) == ("UTC", CatchUp.LATEST)
    assert DEFAULT_CATCH_UP == CatchUp.LATEST
    assert recurrence.catch_up_window_ms == 0
    assert Recurrence(every_ms=MINUTE).catch_up_window_ms == 60_000
    assert (
        Recurrence(cron="0 9 * * mon-fri", time_zone="America/New_York").cron == "0 9 * * mon-fri"
    )
    assert Recurrence(cron="0 0 29 2 *", every_ms=None).cron == "0 0 29 2 *"
    assert Recurrence(every_ms=MINUTE, catch_up="none").catch_up is CatchUp.NONE  # type: ignore[arg-type]
