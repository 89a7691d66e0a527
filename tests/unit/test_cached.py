"""An answer that stands for a while (pure logic, a manual clock)."""

from __future__ import annotations

from delayline.core.cached import Cached
from delayline.core.clock import ManualClock


def test_an_answer_stands_for_its_period_then_is_asked_again() -> None:
    clock = ManualClock(0)
    answers = iter(range(10))
    cached = Cached(lambda: next(answers), 5_000, clock)
    assert cached() == 0
    clock.advance(4_999)
    assert cached() == 0
    clock.advance(1)
    assert cached() == 1


def test_an_answer_not_kept_is_asked_again_at_once() -> None:
    answers = iter([None, None, 3, 4])
    cached = Cached(lambda: next(answers), 5_000, ManualClock(0), keep=lambda a: a is not None)
    assert [cached(), cached(), cached(), cached()] == [None, None, 3, 3]
