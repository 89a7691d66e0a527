"""The contract is ASCII-strict where Spark SQL checks it too (digits, white space,
the fired offset), so the Python parser and the pipeline's SQL never disagree."""

from __future__ import annotations

import pytest

from delayline.contract import ConsumedRecord, parse_record
from delayline.contract import headers as h
from delayline.core.model import Cancel, Invalid, Schedule


def _schedule(epoch: str) -> ConsumedRecord:
    headers = ((h.EPOCH, epoch.encode()), (h.TARGET_TOPIC, b"t"))
    return ConsumedRecord("s", 0, 1, 0, b"id", b"v", headers)


@pytest.mark.parametrize(
    "epoch", ["\u0661\u0662", "5\xa0", "\x1c5", "\u20035", "1.\u0665", "\u00b2", "1_2"]
)
def test_unicode_digits_and_white_space_are_not_an_epoch(epoch: str) -> None:
    got = parse_record(_schedule(epoch))
    assert isinstance(got, Invalid)
    assert got.reason.startswith(f"header {h.EPOCH} not a decimal number of seconds")


@pytest.mark.parametrize("epoch", [" 5", "5\t", "\n5\x0b", "\f5\r"])
def test_ascii_white_space_around_an_epoch_is_allowed(epoch: str) -> None:
    got = parse_record(_schedule(epoch))
    assert isinstance(got, Schedule)
    assert got.due_ms == 5000


@pytest.mark.parametrize(
    ("raw", "fired"),
    [(b"12", 12), (b"012", 12), (b"9" * 18, int("9" * 18)), (b"+12", None), (b" 12", None),
     (b"1_2", None), (b"9" * 19, None), (b"", None), ("\u0661".encode(), None)],
)  # fmt: skip
def test_the_fired_offset_is_one_to_eighteen_ascii_digits(raw: bytes, fired: int | None) -> None:
    got = parse_record(ConsumedRecord("s", 0, 1, 0, b"id", None, ((h.FIRED_OFFSET, raw),)))
    assert isinstance(got, Cancel)
    assert got.fired_offset == fired


@pytest.mark.parametrize(
    ("headers", "fired"),
    [(((h.FIRED_OFFSET, b"3"), (h.FIRED_OFFSET, b"4")), 3),
     (((h.FIRED_OFFSET, None), (h.FIRED_OFFSET, b"4")), None),
     ((("x", b"1"), (h.FIRED_OFFSET, b"4")), 4)],
)  # fmt: skip
def test_only_the_first_fired_offset_header_counts(
    headers: tuple[tuple[str, bytes | None], ...], fired: int | None
) -> None:
    """As the pipeline's SQL finds it: one array lookup, no lambda per record."""
    got = parse_record(ConsumedRecord("s", 0, 1, 0, b"id", None, headers))
    assert isinstance(got, Cancel)
    assert got.fired_offset == fired
