"""The committer's watch fetches all the time while a delivery is near, a moment every
quarter second while none is."""

from __future__ import annotations

from delayline.committer.watch_pace import WatchPace


def test_a_watch_that_is_not_relaxed_is_never_paused() -> None:
    pace = WatchPace(every_ms=250, look_ms=40)
    assert [pace.step(t) for t in range(0, 1_000, 10)] == [None] * 100
    assert pace.wait_ms(0) is None


def test_a_relaxed_watch_looks_for_a_moment_every_so_often() -> None:
    pace = WatchPace(every_ms=250, look_ms=40)
    pace.relaxed = True
    assert pace.step(1_000) is True  # paused at once: it was just read
    assert pace.wait_ms(1_000) == 250
    assert pace.step(1_249) is None
    assert pace.step(1_250) is False  # resumed to look
    assert pace.wait_ms(1_250) == 40
    assert pace.step(1_289) is None
    assert pace.step(1_290) is True  # paused again
    assert pace.step(1_540) is False


def test_a_delivery_near_again_resumes_the_watch_at_once() -> None:
    pace = WatchPace(every_ms=250, look_ms=40)
    pace.relaxed = True
    assert pace.step(0) is True
    pace.relaxed = False
    assert pace.step(1) is False
    assert not pace.paused
    assert pace.step(2) is None
