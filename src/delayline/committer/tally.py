"""What a committer delivered, and what writing its groups took lately.

The counts feed its status; the write times decide how far ahead of its commit the next
group is written (:meth:`Tally.write_ahead_ms`) and how early a burst starts
(:meth:`Tally.item_ms`); a summary is logged every :data:`SUMMARY_MS`.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

from delayline.fire.report import Delivered

log = logging.getLogger(__name__)

SUMMARY_MS = 10_000
"""How often the committer logs what it delivered."""
WRITE_SAMPLES = 50
"""How many recent groups' write times decide how far ahead the next one is written."""
ITEM_MS = 0.3
"""What writing one delivery takes until measured (0.15 ms in a group of 95,000 here)."""
ITEM_MARGIN = 1.5
"""A burst is written ahead by this many times what its writing is expected to take."""
ITEM_SAMPLE_LEAST = 100
"""Groups smaller than this say little about the time per delivery (fixed costs)."""


class Tally:
    """A committer's figures, kept across its sessions (touched on its thread; read from
    any: :attr:`delivered` is an int).

    Args:
        on_delivered: Called with each group's report, after it is counted.
        write_ahead_ms: The least time a group is written before its commit.
        max_write_ahead_ms: The most.
    """

    def __init__(
        self,
        on_delivered: Callable[[Delivered], None],
        write_ahead_ms: int,
        max_write_ahead_ms: int,
    ) -> None:
        self.on_delivered = on_delivered
        self._least_ahead_ms = write_ahead_ms
        self._most_ahead_ms = max_write_ahead_ms
        self.delivered = 0
        """Schedules delivered since the committer started."""
        self._writes: deque[int] = deque(maxlen=WRITE_SAMPLES)
        self._item_writes: deque[tuple[int, int]] = deque(maxlen=WRITE_SAMPLES)
        """(deliveries, ms) of recent groups large enough to tell the time per delivery."""
        self._lateness: list[int] = []
        self._arrived_due = 0
        self._withheld = 0
        self._summary_at = time.monotonic()

    def add(self, delivered: Delivered, size: int, pending: int) -> None:
        """Count the report of a group of ``size`` schedules (``pending`` are left)."""
        if delivered.write_ms:
            self._writes.append(delivered.write_ms)
            if size >= ITEM_SAMPLE_LEAST:
                self._item_writes.append((size, delivered.write_ms))
        self.delivered += delivered.delivered
        self.on_delivered(delivered)
        self._lateness.extend(delivered.lateness_ms)
        self._arrived_due += delivered.arrived_due
        self._withheld += delivered.withheld
        if time.monotonic() - self._summary_at >= SUMMARY_MS / 1000:
            self._log_summary(pending)

    def write_ahead_ms(self) -> int:
        """How long before its commit the next group is written."""
        if not self._writes:
            # Nothing measured yet, and a fresh producer's first transaction is the
            # slowest (67 ms here, against 4 ms later): the most, until measured.
            return self._most_ahead_ms
        # The slowest recent write: the p90 left one group in ten late on a busy host.
        return min(max(self._writes) + self._least_ahead_ms, self._most_ahead_ms)

    def item_ms(self) -> float:
        """What writing one delivery is expected to take, with a margin."""
        count = sum(n for n, _ in self._item_writes)
        if count == 0:
            return ITEM_MS * ITEM_MARGIN
        return max(sum(ms for _, ms in self._item_writes), 1) / count * ITEM_MARGIN

    def _log_summary(self, pending: int) -> None:
        late = sorted(self._lateness)
        if late or self._withheld:
            log.info(
                "committer: delivered %d in %d s, lateness p50 %d ms, p99 %d ms, max %d ms; "
                "%d withheld by a later cancel or update; %d handed over already due; "
                "%d pending",
                len(late),
                SUMMARY_MS // 1000,
                late[len(late) // 2] if late else 0,
                late[min(len(late) - 1, len(late) * 99 // 100)] if late else 0,
                late[-1] if late else 0,
                self._withheld,
                self._arrived_due,
                pending,
            )
        self._lateness = []
        self._arrived_due = 0
        self._withheld = 0
        self._summary_at = time.monotonic()
