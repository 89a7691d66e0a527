"""What arrived at the input that the pipeline must read: the committer's watch tells.

The committer's watch (:mod:`delayline.committer.watch`) reads every input record as it
lands, and parses it. The pipeline runs a micro-batch only when the work needs one
(:mod:`delayline.pipeline.wake`), and most records do not need one soon: delayline's
own tombstones never do, and a schedule due in an hour only has to be read before its
lead starts. So the watch counts what does need reading, once per poll: records other
than delayline's own tombstones, the earliest due time among the schedules, and when the
first of them was read. The waker takes that (:meth:`Arrivals.take`) each time it wakes
the pipeline: the batch it wakes reads everything the watch had read.

Thread-safe: the committer's thread adds, the waker's thread takes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from delayline.core.clock import earliest_ms

STALE_MS = 2_000
"""A feed not told anything for this long is down (its committer between sessions, or
stuck): the waker then wakes the pipeline every trigger interval, as without a feed. The
watch reports every poll, at least every :attr:`CommitterConfig.poll_ms` (100 ms)."""


@dataclass(frozen=True, slots=True)
class Arrived:
    """Input records read by the watch since the waker last woke the pipeline.

    Attributes:
        count: How many (delayline's own tombstones not counted).
        first_read_ms: When the watch read the first of them.
        earliest_due_ms: The earliest due time among the schedules, if any.
    """

    count: int
    first_read_ms: int
    earliest_due_ms: int | None


class Arrivals:
    """The watch's count of input records the pipeline has not read yet."""

    def __init__(self) -> None:
        self._on_change: Callable[[], None] = lambda: None
        self._lock = threading.Lock()
        self._arrived: Arrived | None = None
        self._fed_ms: int | None = None

    def listen(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` (without a lock held) after the watch added records: the
        waker plans its next wake again."""
        self._on_change = on_change

    def add(self, count: int, earliest_due_ms: int | None, read_ms: int) -> None:
        """The watch read ``count`` records (0: none, it polled) at ``read_ms``."""
        with self._lock:
            self._fed_ms = read_ms
            if count <= 0:
                return
            was = self._arrived
            if was is None:
                self._arrived = Arrived(count, read_ms, earliest_due_ms)
            else:
                due = earliest_ms(was.earliest_due_ms, earliest_due_ms)
                self._arrived = Arrived(was.count + count, was.first_read_ms, due)
        self._on_change()

    def stop(self) -> None:
        """The watch stopped (its session ended): the feed is down until it reads again."""
        with self._lock:
            self._fed_ms = None

    def peek(self) -> Arrived | None:
        """What arrived since the last :meth:`take`, if anything."""
        with self._lock:
            return self._arrived

    def take(self) -> Arrived | None:
        """What arrived since the last call, forgotten here: the batch about to be woken
        reads it."""
        with self._lock:
            arrived, self._arrived = self._arrived, None
            return arrived

    def live(self, now_ms: int) -> bool:
        """Whether the watch reported within :data:`STALE_MS`."""
        with self._lock:
            return self._fed_ms is not None and now_ms - self._fed_ms <= STALE_MS

    def fed_ms(self) -> int | None:
        """When the watch last reported, if it has since it (re)started."""
        with self._lock:
            return self._fed_ms
