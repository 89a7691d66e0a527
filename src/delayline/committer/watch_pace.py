"""When the committer's watch fetches the input: all the time while a delivery is near,
a moment now and then while none is.

The watch's consumer asks the broker to hold each fetch at most
:data:`~delayline.committer.watch.FETCH_WAIT_MS` (10 ms): a longer hold delayed the
records of a transaction that ended meanwhile, and a delivery waits for the watch to have
read them. But the broker then answers an idle watch 100 times a second: with a committer
alone and nothing due, 11.5% of a core of the broker's and 0.8% of the committer's here.
So while nothing is due within :data:`NEAR_MS` and no group is being written, the watch
is *relaxed*: its partitions are paused, and fetched for :data:`LOOK_MS` every
:data:`EVERY_MS` (what arrived is then counted for the pipeline's waker up to
:data:`EVERY_MS` later). Pure logic: the caller passes the time.
"""

from __future__ import annotations

EVERY_MS = 250
"""How often a relaxed watch fetches its partitions."""
LOOK_MS = 40
"""How long it fetches them each time (a few fetches: one finds what arrived)."""
NEAR_MS = 1_000
"""A delivery due this soon keeps the watch fetching all the time (a group is written at
most :attr:`~delayline.committer.config.CommitterConfig.max_write_ahead_ms` before its
commit, and reads the watch 20 ms before that)."""


class WatchPace:
    """Whether the watch's partitions should be paused, step by step.

    Args:
        every_ms: See :data:`EVERY_MS`.
        look_ms: See :data:`LOOK_MS`.
    """

    def __init__(self, every_ms: int = EVERY_MS, look_ms: int = LOOK_MS) -> None:
        self.every_ms = every_ms
        self.look_ms = look_ms
        self.relaxed = False
        """Set by the committer: nothing is due within :data:`NEAR_MS`, no group is
        being written."""
        self.paused = False
        """Whether the partitions are paused now (after the last :meth:`step`)."""
        self._next_ms = 0

    def wait_ms(self, now_ms: int) -> int | None:
        """How long until the next :meth:`step` changes something, relaxed (``None``:
        not relaxed, nothing to wait for)."""
        return max(self._next_ms - now_ms, 0) if self.relaxed else None

    def step(self, now_ms: int) -> bool | None:
        """What to do with the partitions at ``now_ms``: pause them (True), resume them
        (False), or leave them as they are (``None``). Not relaxed, they are never
        paused; relaxed, they are resumed for :attr:`look_ms` every :attr:`every_ms`."""
        if not self.relaxed:
            if self.paused:
                self.paused = False
                return False
            return None
        if now_ms < self._next_ms:
            return None
        self.paused = not self.paused
        self._next_ms = now_ms + (self.every_ms if self.paused else self.look_ms)
        return self.paused
