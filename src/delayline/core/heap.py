"""The garbage collector of a long-running process: a pipeline driver, a committer.

CPython's full collection walks every object it tracks while holding the interpreter
lock: every thread stops, the committer's among them, and deliveries due meanwhile go
out together after it. A pipeline driver holds about 140,000 such objects once Spark,
pandas and pyarrow are imported and the session is up; on two busy cores a full
collection of them took 60-450 ms. Nearly all of them live as long as the process:
:func:`settle` moves them out of the collector's walk (:func:`gc.freeze`), so a full
collection walks only what the process made since (the pending schedules), 20-50 ms
there. :class:`GcPauses` times every collection, for ``/metrics``.
"""

from __future__ import annotations

import gc
import logging
import time
from bisect import bisect_left
from typing import Any

log = logging.getLogger(__name__)

YOUNG_OBJECTS = 10_000
"""How many objects a settled process makes (less those it frees) before the collector
walks the youngest of them: 700 by default, which a committer at 8,000 deliveries a
second reaches about every hundred deliveries. At 10,000 its own Python path costs
4-8% less a delivery (``benchmarks/committer_path.py``), and the older generations,
counted in walks of the youngest, are walked that much less often."""
PAUSE_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
"""Upper bounds of :class:`GcPauses`'s buckets, seconds."""


def settle() -> int:
    """Collect once, then leave everything alive now out of every later collection:
    for a service once it has started (imports, the Spark session, its threads).
    Objects made later are collected, the youngest once :data:`YOUNG_OBJECTS` were
    made; what was settled is never freed (a reference cycle among it stays), which
    is what start-up state is for.

    Returns:
        How many objects were settled.
    """
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, oldest)
    settled = gc.get_freeze_count()
    log.info("garbage collector: %d objects of the start-up left out of collections", settled)
    return settled


class GcPauses:
    """How long each garbage collection of this process took, by generation (0-2),
    counted into :data:`PAUSE_BUCKETS_S`. One per process (:meth:`install`).

    The collector's callback only adds to lists of numbers: it runs inside a collection,
    where taking a lock a collecting thread may hold (a metrics library's) would
    deadlock. Readers get a copy (:meth:`snapshot`); a count read while a collection
    ends may lag it by one.
    """

    def __init__(self) -> None:
        self.counts = [[0] * (len(PAUSE_BUCKETS_S) + 1) for _ in range(3)]
        """Per generation, collections per bucket (the last: longer than every bound)."""
        self.sums_s = [0.0, 0.0, 0.0]
        """Per generation, the seconds all its collections took."""
        self.longest_s = 0.0
        """The longest collection seen."""
        self._started = 0.0

    def install(self) -> GcPauses:
        """Time every collection from now on; returns ``self``."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)
        return self

    def uninstall(self) -> None:
        """Stop timing collections."""
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def observe(self, generation: int, pause_s: float) -> None:
        """Count one collection of ``generation`` that took ``pause_s``."""
        self.counts[generation][bisect_left(PAUSE_BUCKETS_S, pause_s)] += 1
        self.sums_s[generation] += pause_s
        self.longest_s = max(self.longest_s, pause_s)

    def snapshot(self) -> list[tuple[list[int], float]]:
        """Per generation, its bucket counts and seconds (copies)."""
        return [(list(c), s) for c, s in zip(self.counts, self.sums_s, strict=True)]

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.observe(int(info["generation"]), time.perf_counter() - self._started)


PAUSES = GcPauses()
"""This process's: installed by a service that exports it."""
