from datetime import UTC, datetime, timedelta, timezone

import pytest

from delayline.client._core import resolve_due_ms
from delayline.core.clock import ManualClock, SystemClock, datetime_to_ms, ms_to_datetime
from delayline.core.units import format_duration_ms, parse_duration_ms, parse_instant_ms
from delayline.errors import InvalidScheduleError


def test_datetime_round_trip_and_offsets() -> None:
    at = datetime(2030, 1, 1, 12, 0, 0, 250_000, tzinfo=UTC)
    assert datetime_to_ms(at) == 1_893_499_200_250
    assert ms_to_datetime(1_893_499_200_250) == at
    plus_one = datetime(2030, 1, 1, 13, 0, 0, 250_000, tzinfo=timezone(timedelta(hours=1)))
    assert datetime_to_ms(plus_one) == 1_893_499_200_250


def test_sub_millisecond_rounds_up_and_naive_is_refused() -> None:
    assert datetime_to_ms(datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC)) == 1
    with pytest.raises(ValueError, match="no timezone"):
        datetime_to_ms(datetime(2030, 1, 1))


def test_clocks() -> None:
    clock = ManualClock(100)
    clock.advance(50)
    assert clock.now_ms() == 150
    assert abs(SystemClock().now_ms() - datetime_to_ms(datetime.now(UTC))) < 1000


def test_resolve_due_ms() -> None:
    now = 1_000_000
    assert resolve_due_ms(None, 1.5, now) == 1_001_500
    assert resolve_due_ms(None, timedelta(minutes=1), now) == 1_060_000
    assert resolve_due_ms(None, 0, now) == now
    assert resolve_due_ms(ms_to_datetime(5), None, now) == 5
    for at, delay, message in [
        (None, None, "exactly one"),
        (ms_to_datetime(5), 1, "exactly one"),
        (None, -1, "zero or more"),
        (None, float("nan"), "zero or more"),
        (datetime(2030, 1, 1), None, "no timezone"),
        (12345, None, "must be a datetime"),
    ]:
        with pytest.raises(InvalidScheduleError, match=message):
            resolve_due_ms(at, delay, now)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("90", 90_000),
        ("90s", 90_000),
        ("1.5s", 1500),
        ("500ms", 500),
        ("5m", 300_000),
        ("1h30m", 5_400_000),
        ("2d", 172_800_000),
        ("1H 5S", 3_605_000),
    ],
)
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "soon", "5x", "1h-5m", "s"])
def test_bad_durations_say_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match="use seconds or units"):
        parse_duration_ms(text)


def test_instants() -> None:
    assert parse_instant_ms("2030-01-01T12:00:00.250Z") == 1_893_499_200_250
    assert parse_instant_ms("2030-01-01T13:00:00.250+01:00") == 1_893_499_200_250
    with pytest.raises(ValueError, match="no timezone"):
        parse_instant_ms("2030-01-01T12:00:00")
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_instant_ms("tomorrow")


@pytest.mark.parametrize(
    ("ms", "text"),
    [(250, "250ms"), (90_000, "1m30s"), (86_400_000, "1d"), (-5000, "-5s"), (0, "0ms")],
)
def test_format_duration(ms: int, text: str) -> None:
    assert format_duration_ms(ms) == text
