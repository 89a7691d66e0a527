"""The waker's plan: future wake times, one per slot of the clock's granularity, and
when the next wake record is due (:mod:`delayline.pipeline.wake`). Pure logic: no
Kafka, no threads."""

from __future__ import annotations

import bisect
from collections.abc import Mapping

from delayline.core.clock import wake_slot


class WakePlan:
    """The future wake times: distinct slots in time order, each with how many timers
    it holds. Not thread-safe."""

    def __init__(self) -> None:
        self._slots: list[int] = []  # ascending
        self._counts: dict[int, int] = {}
        self.version = 0
        """Changes whenever the plan does: what was computed from it at one version
        holds as long as the version is the same."""

    def __len__(self) -> int:
        return len(self._slots)

    def add(self, due_ms: int, count: int = 1) -> None:
        """Plan a wake at or just after ``due_ms``, for ``count`` timers."""
        self.add_all({due_ms: count})

    def add_all(self, due_ms: Mapping[int, int]) -> None:
        """Plan a wake at or just after each of ``due_ms``, for so many timers."""
        self.version += 1
        new: set[int] = set()
        counts = self._counts
        for due, count in due_ms.items():
            slot = wake_slot(due)
            if slot in counts:
                counts[slot] += count
            else:
                counts[slot] = count
                new.add(slot)
        if len(new) > BULK_SLOTS:  # a checkpoint's timers: sorted once
            self._slots = sorted(counts)
            return
        for slot in new:
            bisect.insort(self._slots, slot)

    def next_ms(self) -> int | None:
        """The earliest planned wake time, or None."""
        return self._slots[0] if self._slots else None

    def window(self, until_ms: int) -> list[tuple[int, int]]:
        """The slots up to ``until_ms``, in time order, with their timers."""
        end = bisect.bisect_right(self._slots, until_ms)
        return [(slot, self._counts[slot]) for slot in self._slots[:end]]

    def take_due(self, now_ms: int) -> int:
        """Remove the wake times at or before ``now_ms``; return how many there were."""
        end = bisect.bisect_right(self._slots, now_ms)
        if end:
            self.version += 1
        for slot in self._slots[:end]:
            del self._counts[slot]
        del self._slots[:end]
        return end


BULK_SLOTS = 64
"""New slots beyond which :meth:`WakePlan.add_all` sorts the plan afresh instead of
inserting each in place."""


def next_wake_ms(
    planned_ms: int | None, now_ms: int, last_wake_ms: int, heartbeat_ms: int, poll_ms: int | None
) -> int:
    """When the waker must write next.

    Args:
        planned_ms: The earliest planned wake time, if any.
        now_ms: The current time.
        last_wake_ms: When the last wake record was written.
        heartbeat_ms: The longest gap between wake records.
        poll_ms: Wake this often regardless of the plan (while the plan is
            incomplete); None to follow the plan.
    """
    deadline = last_wake_ms + heartbeat_ms
    if poll_ms is not None:
        deadline = min(deadline, last_wake_ms + poll_ms)
    if planned_ms is not None:
        deadline = min(deadline, planned_ms)
    return max(deadline, now_ms)
