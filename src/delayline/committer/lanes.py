"""Delivery lanes: transactional writers that overlap their groups, committing in order.

One transaction takes several milliseconds to write and acknowledge, about as long as
the groups of a busy second are apart; one writer would fall behind. Each lane is a
thread with its own transactional producer (``<id>-<lane>``): while one lane's group
waits for its due time, the next lane writes the next group. Commits stay in due
order: a lane commits only after the group before it did, and a lane whose previous
group failed fails too, so a consumer offset committed after a group never passes a
schedule of an earlier group that was not delivered.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor, wait

from delayline.fire.report import Delivered
from delayline.fire.topic_catalog import TopicCatalog
from delayline.fire.transactional import TransactionalFirer

Job = Callable[[TransactionalFirer, Callable[[], None]], Delivered]
"""Delivers one group with the lane's writer; calls the second argument (which waits
for the group before to commit, and raises if it failed) right before committing."""


class Lanes:
    """Runs jobs on the lanes in turn; reports them in the order submitted.

    Args:
        firers: One writer per lane, sharing one :class:`TopicCatalog`.
        topics: That catalog.
    """

    def __init__(self, firers: list[TransactionalFirer], topics: TopicCatalog) -> None:
        self._firers = firers
        self._topics = topics
        self._pools = [
            ThreadPoolExecutor(1, thread_name_prefix=f"delayline-lane-{i}")
            for i in range(len(firers))
        ]
        self._turn = 0
        self._running: deque[Future[Delivered]] = deque()
        self._current: list[Future[Delivered] | None] = [None] * len(firers)

    def ready(self) -> bool:
        """Whether the next lane is free (a group taken now is written at once)."""
        current = self._current[self._turn]
        return current is None or current.done()

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the next lane is free, at most ``timeout_s``."""
        current = self._current[self._turn]
        if current is not None:
            wait([current], timeout=timeout_s)

    def submit(self, job: Job) -> None:
        """Run ``job`` on the next lane."""
        lane = self._turn
        self._turn = (lane + 1) % len(self._firers)
        before = self._running[-1] if self._running else None

        def after_before() -> None:
            if before is not None:
                before.result()  # raises what failed it: this group must not commit

        future = self._pools[lane].submit(job, self._firers[lane], after_before)
        self._current[lane] = future
        self._running.append(future)

    def finished(self) -> list[Delivered]:
        """The reports of the jobs done, in order, up to the first still running.

        Raises:
            Exception: whatever failed the earliest job that failed.
        """
        out = []
        while self._running and self._running[0].done():
            out.append(self._running.popleft().result())
        return out

    def wait_idle(self, timeout_s: float) -> None:
        """Block until no job runs, at most ``timeout_s``."""
        wait(list(self._running), timeout=timeout_s)

    def busy(self) -> bool:
        """Whether any job is still running."""
        return any(not f.done() for f in self._running)

    @property
    def topics(self) -> TopicCatalog:
        """What the lanes' writers know about target topics."""
        return self._topics

    def load_metadata(self, topics: Collection[str]) -> None:
        """Have every lane's producer look ``topics`` up now. Safe beside running jobs."""
        for firer in self._firers:
            firer.load_metadata(topics)

    def unseen(self, topics: Collection[str]) -> set[str]:
        """Which of ``topics`` some lane's producer has not looked up (a new partition's
        producers, or one replaced after a fatal error, looked up none)."""
        unseen: set[str] = set()
        for firer in self._firers:
            unseen |= firer.unseen(topics)
        return unseen

    def close(self) -> None:
        """Wait for the jobs, then release the writers."""
        for pool in self._pools:
            pool.shutdown(wait=True)
        for firer in self._firers:
            firer.close()
