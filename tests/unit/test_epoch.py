import random
from decimal import Decimal, InvalidOperation

import pytest

from delayline.contract.headers import EpochError, format_epoch, parse_epoch_ms
from delayline.core.model import MAX_EPOCH_MS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1893456000", 1_893_456_000_000),
        ("1893456000.250", 1_893_456_000_250),
        ("1893456000.25", 1_893_456_000_250),
        ("1893456000.", 1_893_456_000_000),
        (" 1893456000 ", 1_893_456_000_000),
        ("0", 0),
        (".5", 500),
        # Sub-millisecond digits round up: never fire before the written instant.
        ("1893456000.0001", 1_893_456_000_001),
        ("253402300799.999", MAX_EPOCH_MS),
    ],
)
def test_accepts_decimal_seconds(text: str, expected: int) -> None:
    assert parse_epoch_ms(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("abc", "not a decimal number"),
        ("1e9", "not a decimal number"),
        ("0x10", "not a decimal number"),
        ("12:00", "not a decimal number"),
        ("-1", "negative"),
        ("-0.001", "negative"),
        ("NaN", "not a finite number"),
        ("inf", "not a finite number"),
        ("-Infinity", "not a finite number"),
        ("253402300800", "beyond year 9999"),
        ("99999999999999999999999", "beyond year 9999"),
    ],
)
def test_rejects_with_reason(text: str, reason: str) -> None:
    with pytest.raises(EpochError, match=reason):
        parse_epoch_ms(text)


def test_reason_does_not_grow_with_input() -> None:
    with pytest.raises(EpochError) as info:
        parse_epoch_ms("x" * 10_000)
    assert len(str(info.value)) < 100


@pytest.mark.parametrize("ms", [0, 1, 999, 1000, 1_893_456_000_250, MAX_EPOCH_MS])
def test_format_round_trips(ms: int) -> None:
    assert parse_epoch_ms(format_epoch(ms)) == ms


def test_format_whole_seconds_has_no_fraction() -> None:
    assert format_epoch(1_893_456_000_000) == "1893456000"
    assert format_epoch(1_893_456_000_050) == "1893456000.050"


def test_every_decimal_form_reads_as_the_exact_decimal_rounded_up() -> None:
    """Plain seconds to the millisecond are read in integers, the rest by ``Decimal``:
    both give the written instant rounded up to the millisecond, or the same refusal."""
    rng = random.Random(11)
    for _ in range(20_000):
        whole = "".join(rng.choice("0123456789") for _ in range(rng.randrange(0, 17)))
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(0, 6)))
        text = rng.choice(["", " ", "\t"]) + whole + rng.choice(["", "."]) + digits
        text += rng.choice(["", " "])
        try:
            exact = Decimal(text.strip(" \t")) * 1000
        except InvalidOperation:
            with pytest.raises(EpochError):
                parse_epoch_ms(text)
            continue
        expected = int(exact.to_integral_value(rounding="ROUND_CEILING"))
        if expected > MAX_EPOCH_MS:
            with pytest.raises(EpochError, match="beyond year 9999"):
                parse_epoch_ms(text)
        else:
            assert parse_epoch_ms(text) == expected, text
