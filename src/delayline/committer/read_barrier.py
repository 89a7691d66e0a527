"""How far the committer's watch must have read the input before a group is written.

A cancel or update acknowledged 20 ms before a due time must win
(:mod:`delayline.committer.watch`). So 20 ms before a group is written, the committer asks
the input partitions' high watermarks (every record acknowledged by then lies below
them, in open transactions too) and waits until its watch, a ``read_committed`` reader,
has read up to them: a record behind a transaction open then is read once that
transaction ends. delayline's own transactions hold an input partition for their last
milliseconds only (:attr:`delayline.fire.transactional.FireConfig.last_topics`).

Another producer may keep a transaction open on an input partition for long (a stream
processor's checkpoint, a producer that hangs until its transaction times out). A
delivery waits :data:`HELD_OPEN_S` for it at most; past that, the partition is read to
its stable end instead, with a warning, until that transaction has ended: a cancel
written behind it may then lose, as it would to the pipeline itself, which cannot read
past it either.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

log = logging.getLogger(__name__)

HELD_OPEN_S = 2.0
"""How long a delivery waits for a transaction open on an input partition to end (the
pipeline's own hold one for milliseconds)."""
READ_WAIT_S = 10.0
"""How long a delivery waits for the watch to read the input to its end before it is
written anyway (with a warning)."""

Place = tuple[str, int]
Ends = Callable[[Iterable[Place]], dict[Place, int]]


class ReadBarrier:
    """Waits until the watch has read every input record acknowledged by now.

    Args:
        acknowledged_ends: The high watermark of every input partition, asked now.
        stable_ends: The last stable offset of the given input partitions, asked now.
        wait_read: Waits up to the given seconds until the watch's published positions
            reach the given ends; whether they did.
        read_to: The watch's published positions.

    Thread-safe: the lanes of every partition pass it at once.
    """

    def __init__(
        self,
        acknowledged_ends: Callable[[], dict[Place, int]],
        stable_ends: Ends,
        wait_read: Callable[[Mapping[Place, int], float], bool],
        read_to: Callable[[], Mapping[Place, int]],
    ) -> None:
        self._acknowledged_ends = acknowledged_ends
        self._stable_ends = stable_ends
        self._wait_read = wait_read
        self._read_to = read_to
        self._lock = threading.Lock()
        self._held_open: dict[Place, int] = {}
        """Input partitions with a transaction open past :data:`HELD_OPEN_S`, to the
        high watermark then: read to their stable end until it is passed."""

    def wait(self) -> bool:
        """Wait until the watch has read, and withheld by, every input record
        acknowledged by now (one behind a transaction held open for long excepted);
        whether it did within :data:`READ_WAIT_S` (else a warning is logged).

        Raises:
            KafkaUnavailableError: the offsets could not be read.
        """
        ends = self._acknowledged_ends()
        self._skip_held(ends)
        if self._wait_read(ends, HELD_OPEN_S):
            return True
        read_to = self._read_to()
        behind = [place for place, end in ends.items() if read_to.get(place, 0) < end]
        stable = self._stable_ends(behind)
        for place in behind:
            if stable[place] < ends[place]:
                with self._lock:
                    self._held_open[place] = ends[place]
                log.warning(
                    "committer: a transaction has been open on input partition %s[%d] for "
                    "over %.0f s; until it ends, deliveries do not wait for it (a cancel "
                    "written behind it may lose)",
                    *place,
                    HELD_OPEN_S,
                )
            ends[place] = stable[place]
        if self._wait_read(ends, READ_WAIT_S):
            return True
        log.warning(
            "committer: the watch has not read the input to its end in %.0f s; "
            "delivering without it (a cancel written meanwhile may lose)",
            READ_WAIT_S,
        )
        return False

    def _skip_held(self, ends: dict[Place, int]) -> None:
        """Lower ``ends`` to the stable end of each partition still held open; forget
        those whose transaction has ended."""
        with self._lock:
            held = dict(self._held_open)
        if not held:
            return
        for place, end in self._stable_ends(held).items():
            if end >= held[place]:
                with self._lock:
                    self._held_open.pop(place, None)
                log.info("committer: the transaction held open on %s[%d] ended", *place)
            else:
                ends[place] = min(ends.get(place, end), end)


def has_read(positions: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int]) -> bool:
    """Everything before ``ends`` (the watch's ``acknowledged_ends``) is read, by
    ``positions`` (the watch's, as published after what they passed was noted)."""
    return all(positions.get(place, 0) >= end for place, end in ends.items())
