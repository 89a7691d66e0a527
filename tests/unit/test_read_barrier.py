"""The committer's read barrier: it waits for every transaction open on an input
partition to end, but not for one held open past its bound (another producer's)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from delayline.committer.read_barrier import ReadBarrier, has_read

Place = tuple[str, int]
A, B = ("sched", 0), ("sched", 1)


class Input:
    """Input partitions: their high watermarks, stable ends and the watch's positions;
    a wait succeeds at once when the positions reach the ends, else fails (its time
    spent)."""

    def __init__(self) -> None:
        self.high = {A: 10, B: 20}
        self.stable = {A: 10, B: 20}
        self.read = {A: 10, B: 20}
        self.waits: list[tuple[dict[Place, int], float]] = []

    def acknowledged_ends(self) -> dict[Place, int]:
        return dict(self.high)

    def stable_ends(self, places: Iterable[Place]) -> dict[Place, int]:
        return {p: self.stable[p] for p in places}

    def wait_read(self, ends: Mapping[Place, int], timeout_s: float) -> bool:
        self.waits.append((dict(ends), timeout_s))
        return has_read(self.read, ends)

    def barrier(self) -> ReadBarrier:
        return ReadBarrier(
            self.acknowledged_ends, self.stable_ends, self.wait_read, lambda: self.read
        )


def test_it_passes_once_the_watch_has_read_to_the_high_watermarks() -> None:
    kafka = Input()
    assert kafka.barrier().wait()
    assert kafka.waits == [({A: 10, B: 20}, 2.0)]


def test_a_transaction_held_open_is_read_to_its_stable_end_until_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kafka = Input()
    barrier = kafka.barrier()
    # Another producer's transaction open on B from offset 15: the watch stops there.
    kafka.high[B], kafka.stable[B], kafka.read[B] = 25, 15, 15
    assert barrier.wait()
    assert [ends for ends, _ in kafka.waits] == [{A: 10, B: 25}, {A: 10, B: 15}]
    assert "a transaction has been open on input partition sched[1]" in caplog.text
    # While it stays open, B is read to its stable end at once: no wait for it.
    kafka.waits.clear()
    kafka.high[B] = 30
    assert barrier.wait()
    assert [ends for ends, _ in kafka.waits] == [{A: 10, B: 15}]
    # Once it ended, the high watermark counts again.
    kafka.waits.clear()
    kafka.stable[B], kafka.read[B] = 30, 30
    assert barrier.wait()
    assert [ends for ends, _ in kafka.waits] == [{A: 10, B: 30}]


def test_a_watch_that_does_not_read_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    kafka = Input()
    kafka.high[A] = kafka.stable[A] = 12  # committed, but the watch stays at 10
    assert not kafka.barrier().wait()
    assert "has not read the input to its end" in caplog.text
