"""Negative durations parse only where a time in the past makes sense (``--in``)."""

from __future__ import annotations

import pytest

from delayline.core.units import parse_duration_ms


@pytest.mark.parametrize(
    ("text", "ms"),
    [("-5m", -300_000), ("-1h30m", -5_400_000), ("-90", -90_000), (" - 500ms", -500), ("-0", 0)],
)
def test_a_negative_duration_parses_where_allowed(text: str, ms: int) -> None:
    assert parse_duration_ms(text, allow_negative=True) == ms


@pytest.mark.parametrize("text", ["5m", "1h30m", "90", "0"])
def test_allowing_negatives_changes_nothing_else(text: str) -> None:
    assert parse_duration_ms(text, allow_negative=True) == parse_duration_ms(text)


@pytest.mark.parametrize("text", ["-5m", "-1", " -0.5s"])
def test_a_negative_duration_is_refused_by_default(text: str) -> None:
    with pytest.raises(ValueError, match=f"bad duration {text!r}: must not be negative"):
        parse_duration_ms(text)


@pytest.mark.parametrize("text", ["--5m", "-", "-soon", "-5x", "5m-"])
def test_junk_after_the_sign_is_still_a_bad_duration(text: str) -> None:
    with pytest.raises(ValueError, match=f"bad duration {text!r}: use seconds or units"):
        parse_duration_ms(text, allow_negative=True)
