"""The timers a checkpoint holds, given to the waker after a (re)start (pure logic: a
waker with its own writer and a manual clock, no Kafka)."""

from __future__ import annotations

import logging

import pytest

from delayline.core.clock import ManualClock
from delayline.pipeline.timers import load_timers
from delayline.pipeline.wake import Waker

HEARTBEAT = 30_000


def _waker(clock: ManualClock) -> Waker:
    return Waker("unused:9092", "wake", HEARTBEAT, poll_ms=500, clock=clock, write=lambda _: True)


def test_the_timers_are_read_after_the_first_batch_and_end_the_polling() -> None:
    clock = ManualClock(1_000_000)
    waker = _waker(clock)
    assert waker.tick() == 1_000_500  # timers not in: every poll interval
    asked: list[bool] = []

    def first_batch_done() -> bool:
        asked.append(True)
        return len(asked) > 1  # not at the first look

    load_timers(waker, lambda: [1_005_050], first_batch_done, "checkpoint /cp")
    assert len(asked) == 2
    clock.advance(500)
    assert waker.tick() == 1_005_100  # the plan is complete: only when due


def test_timers_that_cannot_be_read_leave_the_polling_on(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(1_000_000)
    waker = _waker(clock)
    waker.tick()

    def broken() -> list[int]:
        raise RuntimeError("state store unreadable\nat line 2")

    with caplog.at_level(logging.WARNING):
        load_timers(waker, broken, lambda: True, "checkpoint /cp")
    assert "could not read the timers in checkpoint /cp (state store unreadable)" in caplog.text
    clock.advance(500)
    assert waker.tick() == 1_001_000  # still every poll interval


def test_a_stopped_waker_reads_nothing() -> None:
    waker = _waker(ManualClock(1_000_000))
    waker.stop()
    read: list[bool] = []

    def read_timers() -> list[int]:
        read.append(True)
        return []

    load_timers(waker, read_timers, lambda: False, "checkpoint /cp")
    assert read == []
