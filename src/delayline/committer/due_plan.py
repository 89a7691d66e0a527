"""What the committer has yet to deliver, in release order: pure logic, no Kafka.

Times are integer epoch milliseconds; the caller passes ``now_ms``.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator

from delayline.committer.pacing import RELEASE_AHEAD_MS, Pacer
from delayline.committer.pending import Group, Pending, id_of
from delayline.core.model import Schedule

BUCKET_MS = 10
"""The plan counts its schedules by due time in buckets this wide
(:meth:`DuePlan.due_within`)."""


class DuePlan:
    """Pending schedules by release time, and the consumer offsets that are safe to commit.

    A schedule's release time is its due time unless it is paced (``pacer``): a windowed
    one is released at its point of the window; one to a rated target waits in its
    target's queue, in ready order, until :meth:`release` gives it a slot of the rate.

    A committed offset must never pass a schedule not yet delivered, so per in-flight
    partition it is the lowest pending offset (or, with none pending, the next offset
    to read). Schedules delivered above it are recognised after a restart by their
    tombstones, which follow them in the topic. Not thread-safe.

    Args:
        pacer: Paces windowed schedules and rated targets; ``None``: nothing is paced.
        windowed: Whether a schedule's window header counts (it came in by the header
            contract); ``None``: never.
    """

    def __init__(
        self,
        pacer: Pacer | None = None,
        windowed: Callable[[Schedule], bool] | None = None,
    ) -> None:
        self.pacer = pacer
        self._windowed = windowed
        self._queues: dict[tuple[int, str], list[tuple[int, int]]] = {}
        """(partition, target): [(ready, offset)] of schedules waiting for a rate's slot."""
        self._waiting: set[tuple[int, int]] = set()  # (partition, offset) in a queue
        self._heaps: dict[int, list[tuple[int, int, int]]] = {}
        """partition: [(release, due, offset)]: one release time goes out in due order."""
        self._pending: dict[tuple[int, int], Pending] = {}
        self._by_key: dict[bytes, tuple[int, int]] = {}
        self._by_id: dict[tuple[str, str], set[tuple[int, int]]] = {}
        self._read_to: dict[int, int] = {}
        self._new: list[Pending] = []
        self._counts: dict[int, dict[int, int]] = {}  # partition: {release bucket: pending}

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, pending: Pending) -> None:
        """Take a schedule read (one read again, after a rewind, stays where it is); a
        short-notice one (:attr:`Pending.short`) has no in-flight offset to pass."""
        partition, offset = pending.partition, pending.offset
        if pending.short is None:
            self.passed(partition, offset)
        at = (partition, offset)
        if at in self._pending:
            return
        schedule = pending.schedule
        pacer = self.pacer
        if pacer is not None:
            windowed = self._windowed is not None and self._windowed(schedule)
            ready = pacer.ready_ms(partition, schedule, windowed)
            if ready > schedule.due_ms:
                pending.paced_ms = ready
        self._pending[at] = pending
        self._by_key[pending.key] = at
        self._by_id.setdefault(id_of(schedule), set()).add(at)
        if pacer is not None and pacer.rated(schedule.target_topic):
            queue = self._queues.setdefault((partition, schedule.target_topic), [])
            heapq.heappush(queue, (pending.release_ms, offset))
            self._waiting.add(at)
            pacer.of(schedule.target_topic).queued += 1
        else:
            self._push(pending)
        self._new.append(pending)

    def tombstone(self, partition: int, offset: int, key: bytes | None) -> bool:
        """Account for an in-flight tombstone read: one of a pending schedule means it was
        delivered before a restart, and it is dropped. Returns whether one was."""
        self.passed(partition, offset)
        at = self._by_key.pop(key or b"", None)
        if at is None:
            return False
        self._forget(self._pending.pop(at, None))
        return True

    def passed(self, partition: int, offset: int) -> None:
        """Note that ``partition`` was read past ``offset`` (a record that is no schedule)."""
        read_to = self._read_to
        if read_to.get(partition, 0) <= offset:
            read_to[partition] = offset + 1

    def release(self, now_ms: int, partitions: Iterable[int] | None = None) -> int:
        """Give each schedule waiting for its target's rate whose slot comes within
        :data:`delayline.committer.pacing.RELEASE_AHEAD_MS` of ``now_ms`` that slot, in ready
        order per (partition, target); it is then pending like any other, released at
        its slot. Only in ``partitions``, if given (those being delivered: a partition
        still catching up takes no slots). Returns how many were given one."""
        pacer = self.pacer
        if pacer is None or not self._queues:
            return 0
        until = now_ms + RELEASE_AHEAD_MS
        given = 0
        wanted = None if partitions is None else set(partitions)
        for (partition, topic), queue in self._queues.items():
            if wanted is not None and partition not in wanted:
                continue
            stats = pacer.of(topic)
            while queue:
                ready, offset = queue[0]
                at = (partition, offset)
                if at not in self._waiting:  # gone meanwhile (withheld, dropped)
                    heapq.heappop(queue)
                    continue
                # Read past its ready time (after a restart): held back from its reading on.
                read_ms = self._pending[at].read_ms
                since = max(ready, read_ms)
                slot = pacer.slot(partition, topic, since, now_ms, until)
                if slot is None:
                    break
                heapq.heappop(queue)
                self._waiting.discard(at)
                stats.queued -= 1
                pending = self._pending[at]
                if slot > max(pending.release_ms, now_ms):  # held back by the rate
                    pending.paced_ms, pending.late_ms = slot, max(0, read_ms - ready)
                self._push(pending)
                given += 1
        return given

    def _push(self, pending: Pending) -> None:
        """Make ``pending`` one to take at its release time."""
        partition = pending.partition
        release = pending.release_ms
        counts = self._counts.get(partition)
        if counts is None:
            counts = self._counts[partition] = {}
        bucket = release // BUCKET_MS
        counts[bucket] = counts.get(bucket, 0) + 1
        heap = self._heaps.get(partition)
        if heap is None:
            heap = self._heaps[partition] = []
        heapq.heappush(heap, (release, pending.schedule.due_ms, pending.offset))

    def take_new(self) -> list[Pending]:
        """The schedules read since the last call (some may be gone again)."""
        new, self._new = self._new, []
        return new

    def pending_of(self, topic: str, schedule_id: str) -> list[Pending]:
        """The pending versions of ``schedule_id`` read from ``topic``."""
        places = self._by_id.get((topic, schedule_id), ())
        return [self._pending[at] for at in places if at in self._pending]

    def earliest_handed_batch(self, partitions: Collection[int] | None = None) -> int | None:
        """The earliest Spark batch that handed over a schedule pending (of those whose
        in-flight record says), in ``partitions`` only if given."""
        batches = [p.batch for p in self._pending_in(partitions) if p.batch is not None]
        return min(batches, default=None)

    def earliest_handed_ms(self, partitions: Collection[int] | None = None) -> int | None:
        """The earliest in-flight record time (its hand-over, stamped on append) of the
        schedules pending, in ``partitions`` only if given."""
        return min((p.handed_ms for p in self._pending_in(partitions)), default=None)

    def _pending_in(self, partitions: Collection[int] | None) -> Iterator[Pending]:
        if partitions is None:
            return iter(self._pending.values())
        return (p for (part, _), p in self._pending.items() if part in partitions)

    def next_release_ms(self, partitions: Iterable[int] | None = None) -> int | None:
        """The earliest release time pending (in ``partitions`` only, if given), if any."""
        chosen = self._heaps if partitions is None else partitions
        dues = [heap[0][0] for p in chosen if (heap := self._live_heap(p))]
        return min(dues, default=None)

    def next_pending(self, partition: int) -> Pending | None:
        """The schedule of ``partition`` due first, if any."""
        heap = self._live_heap(partition)
        return self._pending[(partition, heap[0][2])] if heap else None

    def take(
        self,
        now_ms: int,
        width_ms: int,
        max_items: int | None = None,
        partition: int | None = None,
        cap: Callable[[str], int | None] | None = None,
    ) -> Group | None:
        """The next group of one in-flight partition (``partition``, or the one due
        first): everything there released within ``width_ms`` of its earliest pending
        schedule (or of ``now_ms``, when behind), in release order; at most ``max_items``
        (if given), and at most ``cap(topic)`` to a target topic (if it says): the rest
        make the next groups. ``None`` when nothing is pending there.

        One partition per group: its transaction is written by that partition's
        producer, the one a committer taking the partition over fences."""
        if partition is None:
            firsts = [(h[0][0], p) for p in self._heaps if (h := self._live_heap(p))]
            if not firsts:
                return None
            partition = min(firsts)[1]
        heap = self._live_heap(partition)
        if not heap:
            return None
        until = max(heap[0][0], now_ms) + max(width_ms, 1) - 1
        items: list[Pending] = []
        per_topic: Counter[str] = Counter()
        while heap and heap[0][0] <= until:
            if max_items is not None and len(items) >= max_items:
                break
            at = (partition, heap[0][2])
            item = self._pending.get(at)
            if item is None:
                heapq.heappop(heap)
                continue
            if cap is not None:
                topic = item.schedule.target_topic
                most = cap(topic)
                if most is not None and per_topic[topic] >= most:
                    break  # not skipped: what follows stays behind it
                per_topic[topic] += 1
            heapq.heappop(heap)
            del self._pending[at]
            self._by_key.pop(item.key, None)
            self._forget(item)
            items.append(item)
        if not items:
            return None
        return Group(tuple(items), max(i.release_ms for i in items))

    def due_within(self, partition: int, from_ms: int, until_ms: int) -> int:
        """How many schedules of ``partition`` are pending due in [``from_ms``,
        ``until_ms``), counted in whole :data:`BUCKET_MS` buckets: those due up to a bucket
        either side may count too."""
        counts = self._counts.get(partition)
        if not counts:
            return 0
        first, last = from_ms // BUCKET_MS, -(-until_ms // BUCKET_MS)
        if last - first > len(counts):
            return sum(n for b, n in counts.items() if first <= b < last)
        return sum(counts.get(b, 0) for b in range(first, last))

    def pending_in(self, partition: int) -> int:
        """How many schedules of ``partition`` are pending."""
        return sum(1 for p, _ in self._pending if p == partition)

    def drop_partition(self, partition: int) -> int:
        """Forget everything read from ``partition`` (another committer owns it now);
        returns how many pending schedules were dropped."""
        gone = [at for at in self._pending if at[0] == partition]
        for at in gone:
            item = self._pending.pop(at)
            self._by_key.pop(item.key, None)
            self._forget(item)
        self._heaps.pop(partition, None)
        self._counts.pop(partition, None)
        for key in [k for k in self._queues if k[0] == partition]:
            del self._queues[key]
        if self.pacer is not None:
            self.pacer.forget(partition)
        self._read_to.pop(partition, None)
        self._new = [p for p in self._new if p.partition != partition]
        return len(gone)

    def offsets(self, partitions: Iterable[int] | None = None) -> dict[int, int]:
        """Per in-flight partition read (of ``partitions``, if given), the offset a
        restart may resume from (short-notice versions pending have none: their input
        positions say where a restart reads them again)."""
        safe = dict(self._read_to)
        for (partition, offset), pending in self._pending.items():
            if pending.short is None:
                safe[partition] = min(safe.get(partition, offset), offset)
        if partitions is not None:
            wanted = set(partitions)
            safe = {p: o for p, o in safe.items() if p in wanted}
        return safe

    def _forget(self, item: Pending | None) -> None:
        if item is None:
            return
        at = (item.partition, item.offset)
        if at in self._waiting:
            self._waiting.discard(at)
            if self.pacer is not None:
                self.pacer.of(item.schedule.target_topic).queued -= 1
        else:
            counts = self._counts.get(item.partition)
            if counts is not None:
                bucket = item.release_ms // BUCKET_MS
                left = counts.get(bucket, 0) - 1
                if left > 0:
                    counts[bucket] = left
                else:
                    counts.pop(bucket, None)
        ident = id_of(item.schedule)
        places = self._by_id.get(ident)
        if places is not None:
            places.discard(at)
            if not places:
                del self._by_id[ident]

    def _live_heap(self, partition: int) -> list[tuple[int, int, int]]:
        """``partition``'s heap, its top a schedule still pending (empty if none)."""
        heap = self._heaps.get(partition, [])
        while heap and (partition, heap[0][2]) not in self._pending:
            heapq.heappop(heap)
        return heap


def group_width_ms(
    plan: DuePlan, partition: int, from_ms: int, width_ms: int, busy_ms: int, busy_size: int
) -> int:
    """How wide the next group of ``partition`` is, taken from ``from_ms`` (its next
    release time, or now when behind): ``busy_ms`` while at least ``busy_size`` of its
    schedules are released within that of ``from_ms``, else ``width_ms``. Counted in
    whole :data:`BUCKET_MS` buckets (:meth:`DuePlan.due_within`), so ``busy_size``
    within up to a bucket more may count too: never fewer. A ``busy_ms`` of at most
    ``width_ms`` is off."""
    if busy_ms <= width_ms:
        return width_ms
    busy = plan.due_within(partition, from_ms, from_ms + busy_ms) >= busy_size
    return busy_ms if busy else width_ms


def burst_start_ms(
    plan: DuePlan,
    partition: int,
    due: int,
    per_item_ms: float,
    width_ms: int,
    groups: int,
    least: int,
) -> int | None:
    """When writing must start for ``partition``'s next schedules in ``plan``, the
    earliest due at ``due`` (:meth:`DuePlan.next_release_ms`), to be written by their due
    time, if they are a burst; ``None`` if they are not.

    A burst: more than ``least`` schedules due within ``width_ms`` of the earliest
    pending one. The schedules of the next ``groups`` such widths take ``per_item_ms``
    each to write, one after another, before the earliest is due.
    """
    if plan.due_within(partition, due, due + width_ms) <= least:
        return None
    ahead = plan.due_within(partition, due, due + width_ms * max(groups, 1))
    return due - math.ceil(per_item_ms * ahead)
