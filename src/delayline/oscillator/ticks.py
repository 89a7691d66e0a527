"""Which seconds an oscillator writes: pure logic, the clock passed in.

A tick is one record per Unix second: key the second as a decimal string of ASCII
digits, value ``1`` (the durable Kafka timers design). The plan writes every second
from the one after the newest tick the topic holds up to the current one, so a pause
(a restart, Kafka away) is caught up second by second, as the original loop does,
and no second the topic already holds is written again by this oscillator. Another
oscillator writing the same topic may still write a second twice; a duplicate tick
is harmless (it wakes a micro-batch that finds nothing more due).
"""

from __future__ import annotations

import re

TICK_VALUE = b"1"
_SECOND = re.compile(rb"[0-9]{1,12}")


def tick_key(second: int) -> bytes:
    """The record key of the tick of ``second``."""
    return str(second).encode()


def tick_second(key: bytes | None) -> int | None:
    """The second a tick's key names; ``None`` for a record that is not a tick."""
    if key is None or not _SECOND.fullmatch(key):
        return None
    return int(key)


MAX_AHEAD_S = 5
"""A tick more than this ahead of the clock is not believed (a stray record keyed like
one, or an oscillator whose clock runs fast): taken as written, it would stop this
oscillator until the clock caught up."""


class TickPlan:
    """The newest second known written, and the seconds still to write.

    Args:
        newest: The newest tick the topic held at start; ``None`` when it held none.
    """

    def __init__(self, newest: int | None = None) -> None:
        self.newest = newest

    def seen(self, second: int, now_ms: int) -> bool:
        """A tick of ``second`` is in the topic (ours, or another oscillator's), read at
        ``now_ms``. False (and nothing changes) for one too far ahead of the clock."""
        if second > now_ms // 1000 + MAX_AHEAD_S:
            return False
        if self.newest is None or second > self.newest:
            self.newest = second
        return True

    def due(self, now_ms: int) -> range:
        """The seconds to write at ``now_ms``, oldest first (empty when up to date).

        With nothing written yet, the current second alone: an oscillator's history
        starts when it first runs.
        """
        now_s = now_ms // 1000
        first = now_s if self.newest is None else self.newest + 1
        return range(first, now_s + 1)

    def next_ms(self, now_ms: int) -> int:
        """When the next second to write begins (``now_ms`` itself if one is due)."""
        due = self.due(now_ms)
        return now_ms if due else (now_ms // 1000 + 1) * 1000
