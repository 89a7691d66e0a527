"""Pacing: when the committer releases a schedule that must not go out at its due time.

Two settings spread deliveries out, to protect the consumers of a target topic from a
burst (a campaign due at 09:00, retries after an outage):

* **A rate per target topic** (:class:`delayline.contract.pacing.TargetRates`,
  ``--target-rate TOPIC=N/s``): deliveries to that topic beyond the rate wait, in the
  order they are ready, and go out as the rate allows. Never dropped, never early.
  Each in-flight partition is paced on its own at its share of the rate (the rate
  divided by the number of in-flight partitions): every version of a schedule goes to
  one partition, so the committers of a pipeline, however they split the partitions,
  together never pass the rate, with no coordination between them. Schedules spread
  over the partitions by a hash of their id, so a pipeline with several partitions
  reaches the rate only when its schedules spread evenly.
* **A flexible window per schedule** (``delayline-window``,
  :mod:`delayline.contract.pacing`): the schedule is *ready* at a point of [due, due +
  window) chosen by a low-discrepancy sequence (the k-th windowed schedule read from an
  in-flight partition at the fraction ``frac(k / golden ratio)`` of its window): a burst
  of n such schedules with one due time and window is spread so that any stretch L of
  the window holds n * L / window of them, within a few.

A schedule held back by a rate, and every windowed one, is released on a boundary of
:data:`STEP_MS` (so one transaction writes a step's deliveries, not one each); the rate
holds over every whole second. Pure logic: the caller passes the time; nothing here
reads a clock.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from delayline.contract.pacing import TargetRates, WindowError, window_of
from delayline.core.model import Schedule

STEP_MS = 100
"""Paced releases fall on multiples of this: at 2,000/s, 200 deliveries a transaction."""
RELEASE_AHEAD_MS = 1_000
"""How far ahead of its slot a rated schedule is given one (and becomes an ordinary
pending schedule of the plan, written a little before its release)."""
_GOLDEN = (math.sqrt(5) - 1) / 2


@dataclass(slots=True)
class TargetPacing:
    """What pacing did to one target topic, since the committer started.

    Attributes:
        rate_per_s: Its rate (``None``: only windows pace it).
        held: Deliveries held back by the rate (released later than they were ready).
        delay_ms: The delay that added, in total.
        max_delay_ms: The longest of those delays.
        queued: Deliveries waiting for a slot of the rate now.
    """

    rate_per_s: float | None
    held: int = 0
    delay_ms: int = 0
    max_delay_ms: int = 0
    queued: int = 0


@dataclass(slots=True)
class Pacer:
    """Release times of paced schedules.

    Args:
        rates: The target topics' rates.
        partitions: How many in-flight partitions the rates are shared between (each is
            paced at its share; set it when the topic's partitions are known).
    """

    rates: TargetRates = field(default_factory=TargetRates)
    partitions: int = 1
    _free: dict[tuple[int, str], float] = field(default_factory=dict)
    _last: dict[tuple[int, str], int] = field(default_factory=dict)
    """(partition, topic): the last release given (releases never go back: due order)."""
    _windowed: dict[int, int] = field(default_factory=dict)
    stats: dict[str, TargetPacing] = field(default_factory=dict)
    _committed: dict[tuple[int, str], float] = field(default_factory=dict)
    """(partition, topic): when its next delivery may be committed (the lanes' side)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def rated(self, topic: str) -> bool:
        """Whether deliveries to ``topic`` are paced by a rate."""
        if not self.rates:
            return False  # no rate set (the usual case): asked of every schedule read
        return self.rates.of(topic) is not None

    def ready_ms(self, partition: int, schedule: Schedule, windowed: bool) -> int:
        """When ``schedule`` (read from in-flight ``partition``) is ready: its due time, or
        with a window (``windowed``: it came in by the header contract) the next point of
        the partition's sequence within it. A refused window is ready at the due time
        (the committer dead-letters it then)."""
        if not windowed:
            return schedule.due_ms
        try:
            window_ms = window_of(schedule.headers)
        except WindowError:
            return schedule.due_ms
        if window_ms is None:
            return schedule.due_ms
        k = self._windowed.get(partition, 0) + 1
        self._windowed[partition] = k
        return spread_ms(schedule.due_ms, window_ms, k)

    def slot(
        self, partition: int, topic: str, ready_ms: int, now_ms: int, until_ms: int
    ) -> int | None:
        """The release time of the next delivery to ``topic`` from ``partition``, ready
        at ``ready_ms``, if it is at most ``until_ms`` (the slot is then taken); ``None``:
        not yet. Slots come in the order asked (ask in ready order), one rate interval
        apart, and never before ``now_ms``: a backlog past due (read after a restart)
        goes out at the rate from now, not at once. A slot later than both ``ready_ms``
        and ``now_ms`` counts as held back, by its distance from ``ready_ms``."""
        rate = self.rates.of(topic)
        if rate is None:
            return ready_ms
        key = (partition, topic)
        base = max(ready_ms, now_ms)
        at = max(float(base), self._free.get(key, -math.inf))
        if at > until_ms:
            return None
        self._free[key] = at + 1000.0 * max(self.partitions, 1) / rate
        # Never before the one given before: a rounded-up slot stays ahead of the next.
        last = self._last.get(key, ready_ms)
        if at <= base and ready_ms >= last:
            self._last[key] = ready_ms
            return ready_ms  # the rate holds nothing back (past due: released at once)
        release = max(ceil_step(math.ceil(at)), last)
        self._last[key] = release
        stats = self.of(topic)
        stats.held += 1
        stats.delay_ms += release - ready_ms
        stats.max_delay_ms = max(stats.max_delay_ms, release - ready_ms)
        return release

    def step_size(self, topic: str) -> int | None:
        """The most deliveries to ``topic`` one transaction of a partition carries (a
        step of its share of the rate), ``None`` without a rate: a committer behind
        its slots then commits step by step, each spaced by :meth:`commit_at`, instead
        of in larger groups that readers would see as bursts."""
        rate = self.rates.of(topic)
        if rate is None:
            return None
        return max(1, math.ceil(rate * STEP_MS / 1000 / max(self.partitions, 1)))

    def commit_at(self, partition: int, counts: Mapping[str, int], now_ms: int) -> int:
        """When a transaction of ``partition`` delivering ``counts`` (target topic:
        deliveries) may commit, at ``now_ms`` or later, and take that time: each rated
        topic's transactions are spaced by what they deliver at its share of the rate.
        The slots already space the releases; this holds the rate at the commits too
        when writing falls behind (on a busy host) and late groups would otherwise
        commit back to back. Thread-safe (the lanes call it)."""
        with self._lock:
            at = float(now_ms)
            intervals: dict[tuple[int, str], float] = {}
            for topic, n in counts.items():
                rate = self.rates.of(topic)
                if rate is None or n <= 0:
                    continue
                key = (partition, topic)
                intervals[key] = n * 1000.0 * max(self.partitions, 1) / rate
                # A step's tolerance: a commit a little late does not push every later
                # one (the rate then holds over a second to within a step).
                at = max(at, self._committed.get(key, -math.inf) - STEP_MS)
            for key, span in intervals.items():
                self._committed[key] = max(at, self._committed.get(key, -math.inf)) + span
            return math.ceil(at)

    def of(self, topic: str) -> TargetPacing:
        """The figures of ``topic`` (made on first use)."""
        stats = self.stats.get(topic)
        if stats is None:
            stats = self.stats[topic] = TargetPacing(self.rates.of(topic))
        return stats

    def reset(self) -> None:
        """Start afresh (a new session of the committer: nothing is queued, no slot
        taken); the figures are kept."""
        self._free.clear()
        self._last.clear()
        self._windowed.clear()
        with self._lock:
            self._committed.clear()
        for stats in self.stats.values():
            stats.queued = 0

    def forget(self, partition: int) -> None:
        """Forget ``partition``'s slots (another committer paces it now)."""
        for key in [k for k in self._free if k[0] == partition]:
            del self._free[key]
        for key in [k for k in self._last if k[0] == partition]:
            del self._last[key]
        with self._lock:
            for key in [k for k in self._committed if k[0] == partition]:
                del self._committed[key]
        self._windowed.pop(partition, None)


def spread_ms(due_ms: int, window_ms: int, k: int) -> int:
    """The ready time of the ``k``-th windowed schedule of a sequence: a point of [due,
    due + window) at the fraction ``frac(k * 0.618...)`` of it, rounded down to a whole
    :data:`STEP_MS` after the due time when the window spans two steps or more (a
    burst's schedules then share steps, each step as likely as any other)."""
    offset = int((k * _GOLDEN) % 1.0 * window_ms)
    if window_ms < 2 * STEP_MS:
        return due_ms + offset
    return due_ms + offset // STEP_MS * STEP_MS


def ceil_step(ms: int) -> int:
    """``ms`` rounded up to a multiple of :data:`STEP_MS`."""
    return -(-ms // STEP_MS) * STEP_MS
