"""The committer reads target topics' facts ahead of their deliveries, one lookup at a
time (how far ahead: ``warm_plan``'s tests in test_committer_logic.py)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from delayline.committer.warming import WARM_AHEAD_MS, WARM_COVERS_MS, Warmer
from delayline.core.clock import ManualClock

NOW = 1_000_000


class _Time:
    """The broker's clock ``skew_ms`` ahead of the host's."""

    def __init__(self, clock: ManualClock, skew_ms: int = 0) -> None:
        self.clock = clock
        self._skew_ms = skew_ms

    def host_ms(self, broker_ms: int) -> int:
        return broker_ms - self._skew_ms


class _Lane:
    """Records what it was asked to warm; blocks until released when asked to."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.asked: list[dict[str, int]] = []
        self._gate = gate

    def warm(self, within_ms: dict[str, int]) -> None:
        self.asked.append(dict(within_ms))
        if self._gate is not None:
            self._gate.wait(5)


def test_one_lookup_at_a_time_and_a_far_topic_is_kept_for_the_next() -> None:
    clock = ManualClock(NOW)
    gate = threading.Event()
    lane = _Lane(gate)
    time: Any = _Time(clock, skew_ms=500)
    with ThreadPoolExecutor(1) as lookups:
        warmer = Warmer(time, lookups)
        far_due = NOW + WARM_COVERS_MS + 10_000 + 500  # broker time
        read = {"soon": NOW + 2_500, "far": far_due}
        warmer.warm(read, [lane])  # type: ignore[list-item]
        assert read == {}  # taken
        read["other"] = NOW + 3_000
        warmer.warm(read, [lane])  # type: ignore[list-item]  # the first still runs
        assert read == {"other": NOW + 3_000}
        gate.set()
        lookups.submit(lambda: None).result(5)  # the first lookup is done
        warmer.warm(read, [lane])  # type: ignore[list-item]
        lookups.submit(lambda: None).result(5)
    assert lane.asked[0] == {"soon": WARM_AHEAD_MS, "far": WARM_COVERS_MS}
    # The far topic (host due NOW + WARM_COVERS_MS + 10_000) comes back with the new one.
    assert lane.asked[1] == {"far": WARM_COVERS_MS, "other": WARM_AHEAD_MS}
    assert len(lane.asked) == 2


def test_nothing_is_looked_up_without_a_lane() -> None:
    lookups: Any = None  # submitting would fail
    warmer = Warmer(_Time(ManualClock(NOW)), lookups)  # type: ignore[arg-type]
    read = {"t": NOW + 1_000}
    warmer.warm(read, [])
    assert read == {}
