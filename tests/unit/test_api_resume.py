"""Where a paused schedule resumes (the API's rule, pure)."""

from __future__ import annotations

from delayline.api.writes import resume_point
from delayline.catalog import Pending
from delayline.contract import headers as h
from delayline.contract.recurring import own_headers, paused_headers
from delayline.core.model import Headers
from delayline.core.recurrence import Occurrence, Recurrence

MINUTE = 60_000
DUE = 1_893_456_000_000


def paused(headers: Headers, number: int | None = None) -> Pending:
    """A version paused at due time :data:`DUE` (occurrence ``number`` if recurring)."""
    base: Headers = ((h.EPOCH, h.format_epoch(DUE).encode()), (h.TARGET_TOPIC, b"t"), *headers)
    if number is not None:
        base = (*base, (h.OCCURRENCE, str(number).encode()))
    return Pending("x", "s", 0, 7, 0, "t", None, 0, 0, paused_due_ms=DUE,
                   headers=paused_headers(base, DUE))  # fmt: skip


def test_a_one_off_resumes_due_when_it_was_even_if_that_has_passed() -> None:
    assert resume_point(paused(()), [], DUE - MINUTE) == Occurrence(DUE, 1)
    assert resume_point(paused(()), [], DUE + 60 * MINUTE) == Occurrence(DUE, 1)


def test_a_one_off_that_says_none_is_dropped_once_later_than_its_window() -> None:
    stated = ((h.CATCH_UP, b"none"), (h.CATCH_UP_WINDOW, b"5m"))
    assert resume_point(paused(stated), [], DUE + 4 * MINUTE) == Occurrence(DUE, 1)
    assert resume_point(paused(stated), [], DUE + 6 * MINUTE) is None


def test_a_recurring_one_skips_what_was_delivered_before_the_pause_landed() -> None:
    every = own_headers(Recurrence(every_ms=MINUTE), None)
    version = paused(every, number=3)
    assert resume_point(version, [], DUE + 10 * MINUTE) == Occurrence(DUE, 3)
    # Occurrences 3 and 4 went out before the pause (read stale) landed.
    delivered = [DUE - MINUTE, DUE, DUE + MINUTE]
    assert resume_point(version, delivered, DUE + 10 * MINUTE) == Occurrence(DUE + 2 * MINUTE, 5)
