"""The in-flight partitions a committer owns, each with producers of its own.

A partition assigned to a committer is not delivered from at once: its producers are
opened first, in the background (:meth:`Slots.assign`), which fences the producers of
its earlier owner and aborts their open transactions (their ids are the partition's:
:func:`delayline.core.identifiers.committer_transactional_id`). Once fenced it becomes
a :class:`Slot` (:meth:`Slots.take_fenced`), and the reader reads it to its end before
anything of it is delivered. The partitions already owned keep being delivered meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from confluent_kafka import TopicPartition

from delayline.committer.config import CommitterConfig
from delayline.committer.lanes import Job, Lanes
from delayline.committer.pending import Group, Pending, id_of
from delayline.core.identifiers import committer_transactional_id
from delayline.fire.report import Delivered
from delayline.fire.topic_catalog import TopicCatalog
from delayline.fire.transactional import FireConfig, TransactionalFirer

log = logging.getLogger(__name__)


class Ownership(Protocol):
    """What the committer does when the group moves partitions (called on the reader's
    thread, inside :meth:`delayline.committer.inflight_reader.InflightReader.poll`)."""

    def assigned(self, partitions: list[int]) -> None:
        """``partitions`` are ours now: start fencing their earlier owners' producers (so
        every transaction of theirs is committed or aborted), then call
        :meth:`delayline.committer.inflight_reader.InflightReader.fenced` for each. Must
        not block."""

    def revoked(self, partitions: list[int], *, lost: bool) -> bool:
        """``partitions`` are no longer ours: finish (or, ``lost``, give up) what is
        being delivered of them; their next owner delivers the rest. Returns whether
        everything taken of them was delivered (their offsets may be committed)."""


class InLanes:
    """The groups taken from the plan and not yet reported done, in order, with their
    schedules by (source topic, id): what a later cancel or update is looked up in
    without a scan of every schedule being written. Not thread-safe."""

    def __init__(self) -> None:
        self._groups: deque[Group] = deque()
        self._by_id: dict[tuple[str, str], list[Pending]] = {}

    def __len__(self) -> int:
        return len(self._groups)

    def append(self, group: Group) -> None:
        """A group submitted to a lane."""
        self._groups.append(group)
        for item in group.items:
            self._by_id.setdefault(id_of(item.schedule), []).append(item)

    def popleft(self) -> Group:
        """The oldest group, reported done."""
        group = self._groups.popleft()
        for item in group.items:
            key = id_of(item.schedule)
            kept = [p for p in self._by_id.get(key, ()) if p is not item]
            if kept:
                self._by_id[key] = kept
            else:
                self._by_id.pop(key, None)
        return group

    def of(self, topic: str, schedule_id: str) -> list[Pending]:
        """The schedules of ``schedule_id`` from ``topic`` being written."""
        return list(self._by_id.get((topic, schedule_id), ()))

    def clear(self) -> None:
        """Forget every group (a restart of the committer's session)."""
        self._groups.clear()
        self._by_id.clear()


@dataclass(slots=True)
class Slot:
    """One owned in-flight partition: its lanes (its producers), the groups in them, and
    the offsets to commit after each."""

    partition: int
    lanes: Lanes
    in_lanes: InLanes = field(default_factory=InLanes)
    offsets_after: deque[list[TopicPartition] | None] = field(default_factory=deque)
    offsets_at: float = 0.0
    writing: set[int] = field(default_factory=set)
    """The groups in its lanes still writing (not yet waiting for their commit), by
    ``id``: a burst group starts only when none is, so that its records follow theirs
    in every target partition and its commit is not held back by theirs."""
    settled: threading.Event | None = None
    """Set once the group submitted last has written its records for good (it is about
    to commit, or it ended): a group to a rated topic writes only after the one before
    it did, so that its records follow that group's in every target partition, even
    when a late committer has both in its lanes at once (due order under a rate)."""


class Slots:
    """The partitions one session of a committer owns, and those being fenced (touched
    on the committer's thread; :attr:`owned` and :attr:`in_lanes` are read from any).

    Args:
        config: The committer's settings.
        topics: Target topic facts, shared by every lane.
        fences: Where producers are opened (kept across sessions).
    """

    def __init__(
        self, config: CommitterConfig, topics: TopicCatalog, fences: ThreadPoolExecutor
    ) -> None:
        self._config = config
        self.topics = topics
        self._fences = fences
        self._slots: dict[int, Slot] = {}
        self._fencing: dict[int, Fencing] = {}
        self.owned: tuple[int, ...] = ()
        """The partitions owned, published for the status."""
        self.in_lanes = 0
        """Schedules taken into groups and not yet reported."""

    def __iter__(self) -> Iterator[Slot]:
        return iter(list(self._slots.values()))

    def __contains__(self, partition: int) -> bool:
        return partition in self._slots

    def __getitem__(self, partition: int) -> Slot:
        return self._slots[partition]

    def partitions(self) -> list[int]:
        """The partitions owned."""
        return list(self._slots)

    def fencing(self) -> bool:
        """Whether a partition assigned is still being fenced."""
        return bool(self._fencing)

    def assign(self, partitions: list[int]) -> None:
        """Start opening the producers of ``partitions`` not yet owned nor being opened."""
        for partition in partitions:
            if partition not in self._slots and partition not in self._fencing:
                lanes = [
                    self._fences.submit(self._open_lane, partition, lane)
                    for lane in range(self._config.lanes)
                ]
                self._fencing[partition] = Fencing(lanes, time.monotonic())

    def take_fenced(self, still_ours: Callable[[int], bool]) -> list[int]:
        """Make a slot of each partition whose fence is done and that is ``still_ours``;
        returns them (raises what failed a fence)."""
        taken: list[int] = []
        for partition, fencing in list(self._fencing.items()):
            if not all(lane.done() for lane in fencing.lanes):
                continue
            del self._fencing[partition]
            firers = fencing.opened()
            if not still_ours(partition):  # revoked meanwhile
                for firer in firers:
                    firer.close()
                continue
            fencing.log(partition)
            self._slots[partition] = Slot(partition, Lanes(firers, self.topics))
            taken.append(partition)
        self.owned = tuple(sorted(self._slots))
        return taken

    def drop_fencing(self, partition: int) -> bool:
        """Give up ``partition`` if it is still being fenced (its lanes are closed once
        opened); whether it was."""
        fencing = self._fencing.pop(partition, None)
        if fencing is not None:
            fencing.close_when_opened()
        return fencing is not None

    def remove(self, partition: int) -> None:
        """Forget ``partition``'s slot (its lanes closed by the caller)."""
        self._slots.pop(partition, None)
        self.owned = tuple(sorted(self._slots))

    def clear(self) -> list[Slot]:
        """Forget every slot, and the fences under way (closed once opened); returns the
        slots."""
        slots = list(self._slots.values())
        self._slots = {}
        self.owned = ()
        for fencing in self._fencing.values():
            fencing.close_when_opened()
        self._fencing.clear()
        return slots

    def submit(
        self, slot: Slot, group: Group, job: Job, offsets: list[TopicPartition] | None
    ) -> None:
        """Have ``slot``'s lanes write ``group``, then commit ``offsets`` once reported."""
        slot.writing.add(id(group))
        self.in_lanes += len(group.items)
        slot.lanes.submit(job)
        slot.in_lanes.append(group)
        slot.offsets_after.append(offsets)

    def finished(
        self, slot: Slot
    ) -> Iterator[tuple[Group, Delivered, list[TopicPartition] | None]]:
        """The groups of ``slot`` done, in order, each with its report and the offsets to
        commit after it (raises what failed one)."""
        for delivered in slot.lanes.finished():
            offsets = slot.offsets_after.popleft()
            group = slot.in_lanes.popleft()
            self.in_lanes -= len(group.items)
            yield group, delivered, offsets

    def offsets_due(self, slot: Slot) -> bool:
        """Whether the consumer offsets of ``slot``'s partition are to be committed after
        its next group (now and then: :attr:`CommitterConfig.offsets_interval_ms`)."""
        if time.monotonic() - slot.offsets_at < self._config.offsets_interval_ms / 1000:
            return False
        slot.offsets_at = time.monotonic()
        return True

    def _open_lane(self, partition: int, lane: int) -> TransactionalFirer:
        """The producer of ``partition``'s ``lane``, its transactions initialised (which
        fences its earlier owner's and aborts the transaction it left open)."""
        config = self._config
        inputs = frozenset(() if config.topology is None else config.topology.input_topics)
        txn = committer_transactional_id(config.transactional_id, partition, lane)
        # The default linger: a group's records queue into one request per partition,
        # and the flush before each commit sends them at once (librdkafka's flush does
        # not wait out linger.ms). With none, librdkafka's threads sent as the records
        # came and took a quarter to a half more CPU (bench --scenario committer,
        # 2,000-8,000/s; lateness no worse).
        fire = FireConfig(config.bootstrap_servers, config.commits_topic, txn, last_topics=inputs)
        return TransactionalFirer(fire, topics=self.topics)


@dataclass
class Fencing:
    """A partition's lanes being opened, each in the background at once (one after
    another, each waited for the broker to abort what its earlier owner left open)."""

    lanes: list[Future[TransactionalFirer]]
    began: float
    """When the opening began (monotonic seconds)."""

    def opened(self) -> list[TransactionalFirer]:
        """The lanes' producers, once every one is done (if one failed, the others are
        closed and its error raised)."""
        failed = next((f.exception() for f in self.lanes if f.exception() is not None), None)
        if failed is not None:
            for lane in self.lanes:
                if lane.exception() is None:
                    lane.result().close()
            raise failed
        return [lane.result() for lane in self.lanes]

    def log(self, partition: int) -> None:
        """Say how long the fence took, up to when it was taken (the committer looks
        every turn of its loop)."""
        log.info(
            "committer: in-flight partition %d fenced (%d producer(s)) in %.2f s",
            partition,
            len(self.lanes),
            time.monotonic() - self.began,
        )

    def close_when_opened(self) -> None:
        """Close each lane's producer once opened (the partition is no longer ours)."""
        for lane in self.lanes:
            lane.add_done_callback(_close_opened)


def _close_opened(future: Future[TransactionalFirer]) -> None:
    """Close a lane opened for a partition no longer owned."""
    if future.exception() is None:
        future.result().close()
