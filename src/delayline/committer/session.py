"""One life of a committer: join the group, catch up, deliver until stopped or failed.

Each step reads what arrived on the in-flight topic and the input topics, then takes
the next group of each partition whose write time came into one of its lanes
(:class:`~delayline.committer.writing.GroupWriter`); the groups' reports are taken on
this thread, which also commits the consumer offsets (a commit from a lane's thread
stalled the reader's consumer for 90 s here).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

from delayline.committer.arrivals import Arrivals
from delayline.committer.broker_clock import BrokerTime
from delayline.committer.config import CommitterConfig
from delayline.committer.due_plan import DuePlan, burst_start_ms, group_width_ms
from delayline.committer.inflight_reader import InflightReader
from delayline.committer.ownership import Slot, Slots
from delayline.committer.pacing import Pacer
from delayline.committer.reviews import ReviewCounts
from delayline.committer.short_intake import ShortIntake
from delayline.committer.tally import Tally
from delayline.committer.turns import windowed
from delayline.committer.warming import Warmer
from delayline.committer.watch import POLL_MS
from delayline.committer.withholding import Withholding
from delayline.committer.writing import GroupWriter, may_write_ahead
from delayline.core.identifiers import committer_group, committer_instance_id
from delayline.fire.topic_catalog import AdminDescriber, TopicCatalog
from delayline.kafka.notice_store import NoticeFollower

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Stopping:
    """Whether the committer was asked to stop, and until when it drains."""

    asked: threading.Event = field(default_factory=threading.Event)
    drain_until: float = 0.0
    """Monotonic seconds: what was handed over is delivered until then."""

    def drained_out(self) -> bool:
        """Stopped, and the time to drain what was handed over is up."""
        return self.asked.is_set() and time.monotonic() >= self.drain_until


@dataclass(frozen=True, slots=True)
class Kept:
    """What a committer keeps across its sessions."""

    time: BrokerTime
    pacer: Pacer
    tally: Tally
    stopping: Stopping
    ready: threading.Event
    """Set once a session has read its partitions to their ends."""
    fences: ThreadPoolExecutor
    lookups: ThreadPoolExecutor
    notices: ThreadPoolExecutor
    """Asks the notice rules (:mod:`delayline.committer.short_intake`), one at a time."""
    arrivals: Arrivals | None = None
    """Told what the watch reads that the pipeline must read (the pipeline's waker asks)."""
    reviews: ReviewCounts = field(default_factory=ReviewCounts)
    """What became of the reviews its watches sent (:mod:`delayline.committer.reviews`)."""


class Session:
    """One life of a committer (:meth:`run`); the in-flight reader's owner.

    Args:
        config: The committer's settings.
        kept: What its sessions share.
    """

    def __init__(self, config: CommitterConfig, kept: Kept) -> None:
        self._config = config
        self._kept = kept
        self._time = kept.time
        kept.pacer.reset()
        self.plan = DuePlan(kept.pacer, lambda s: windowed(config.topology, s))
        topics = TopicCatalog(
            AdminDescriber(config.bootstrap_servers, 30_000), allowed=config.allowed_targets
        )
        self.slots = Slots(config, topics, kept.fences)
        stopping = kept.stopping
        shorts = None
        if config.notice_topic is not None and config.topology is not None:
            notice = NoticeFollower(config.bootstrap_servers, config.notice_topic)
            shorts = ShortIntake(notice, self.plan, kept.time.clock, kept.notices)
        self.withholding = Withholding(
            config, kept.time.clock, self.plan, self.slots, stopping.drained_out, kept.arrivals,
            kept.reviews, shorts,
        )  # fmt: skip
        self._writer = GroupWriter(config, kept.time, kept.pacer, self.withholding)
        self._warmer = Warmer(kept.time, kept.lookups, topics)
        try:
            self._reader = InflightReader(
                config.bootstrap_servers,
                config.inflight_topic,
                committer_group(config.transactional_id),
                committer_instance_id(config.transactional_id, config.name),
                config.session_timeout_ms,
                self.plan,
                kept.time.clock,
                self,
            )
        except Exception:
            self.withholding.close()  # the notice follower's consumer
            raise

    def run(self) -> None:
        """Deliver until stopped (raises what failed: the committer starts afresh)."""
        config, reader, stopping = self._config, self._reader, self._kept.stopping
        try:
            if not reader.wait_for_partitions(
                stopping.drained_out, config.first_assignment_timeout_s, self._take_fenced
            ):
                return  # stopped before it knew what was delivered: the next start will
            if not self.withholding.start(reader):
                return
            if not self.slots.partitions() and not self.slots.fencing():
                log.warning(
                    "committer %s: the group gave it no in-flight partition (%s has %d; "
                    "start the pipeline and its committers with --inflight-partitions set "
                    "to their number): it waits as a standby",
                    config.name,
                    config.inflight_topic,
                    reader.partitions,
                )
            log.info(
                "committer %s ready: partition(s) %s, %d schedule(s) pending",
                config.name,
                ",".join(map(str, sorted(self.slots.partitions()))) or "none yet",
                len(self.plan),
            )
            self._kept.ready.set()
            while not self._finished():
                self._step()
            self._close_slots(report=True)  # the last groups, done while closing
        finally:
            self._kept.ready.clear()  # not delivering any more (closing may take seconds)
            self._close_slots(report=False)
            try:
                reader.close()
            finally:
                self.withholding.close()

    def assigned(self, partitions: list[int]) -> None:
        """Start opening the producers of ``partitions`` in the background (which fences
        those of their earlier owner, aborting its open transactions); the partitions
        already owned keep being delivered meanwhile (:meth:`_take_fenced`)."""
        self.withholding.assigned(partitions)
        self.slots.assign(partitions)

    def revoked(self, partitions: list[int], *, lost: bool) -> bool:
        """Finish what is being delivered of ``partitions`` and close their producers;
        returns whether every group of theirs was delivered (their offsets may then be
        committed). Called by the reader; the plan forgets their pending schedules."""
        complete = True
        for partition in partitions:
            if self.slots.drop_fencing(partition):
                continue  # not delivered from yet
            if partition not in self.slots:
                complete = False
                continue
            slot = self.slots[partition]
            try:
                self._finish(slot)  # still a slot: a cancel read meanwhile withholds
                self._report_slot(slot, commit=False)
            except Exception as exc:
                slot.lanes.close()  # the groups still end, then close
                if not lost:
                    raise
                complete = False
                log.warning(
                    "committer: partition %d lost while delivering (%s); its next owner "
                    "delivers what was not committed",
                    partition,
                    exc,
                )
            finally:
                self.slots.remove(partition)
                self.withholding.given_up(partition)
        return complete and not lost

    def _take_fenced(self) -> None:
        """Make a slot of each partition whose fence is done, and have the reader read it
        to its end from here (raises what failed a fence: the session starts afresh)."""
        reader = self._reader
        for partition in self.slots.take_fenced(lambda p: p in reader.owned):
            reader.fenced(partition)

    def _close_slots(self, *, report: bool) -> None:
        """Close every partition's lanes (waiting for their groups); with ``report``,
        report what they delivered and commit the offsets that went with it."""
        slots = list(self.slots)
        failure: Exception | None = None
        for slot in slots:  # still slots: a cancel read meanwhile withholds
            try:
                self._finish(slot)
            except Exception as exc:  # the watch failed too: the groups still end, then close
                slot.lanes.close()
                failure = failure or exc
        self.slots.clear()
        if failure is not None and report:
            raise failure
        if report:
            for slot in slots:
                self._report_slot(slot)

    def _finish(self, slot: Slot) -> None:
        """Wait for ``slot``'s groups, then close its producers. The watch is read
        meanwhile: a group waits for it to read the input to its end before it commits."""
        while slot.lanes.busy():
            self.withholding.poll()
            slot.lanes.wait_idle(POLL_MS / 1000)
        slot.lanes.close()

    def _finished(self) -> bool:
        """Stopped, and (until the drain time is up) everything handed over until the
        stop delivered: read to the end offsets as of the stop, nothing pending."""
        stopping = self._kept.stopping
        if not stopping.asked.is_set():
            return False
        if stopping.drained_out():
            return True
        busy = any(slot.lanes.busy() for slot in self.slots)
        return self._reader.read_to_stop() and not len(self.plan) and not busy

    def _step(self) -> None:
        """Read what arrived, then deliver the next group of each partition whose write
        time came."""
        reader, time_ = self._reader, self._time
        self._kept.pacer.partitions = reader.partitions
        deliverable = self._deliverable()
        self.plan.release(time_.broker_ms(time_.clock.now_ms()), deliverable)
        reader.poll(self._wait_ms(deliverable) / 1000)
        self._take_fenced()
        self.withholding.gained(reader)
        self.withholding.take_shorts(self.slots.partitions())
        self.withholding.check_new()
        self.withholding.follow_pipeline(reader)
        self.withholding.poll()
        self._warmer.warm(self._reader.targets, (slot.lanes for slot in self.slots))
        for slot in self.slots:
            self._report_slot(slot)
        blocked = self._take_groups(self._deliverable())
        if blocked is not None:
            # The watch is read again meanwhile: a group in a lane may be withheld from.
            watching = self.withholding.watch is not None
            blocked.lanes.wait_ready((POLL_MS if watching else self._config.poll_ms) / 1000)

    def _wait_ms(self, deliverable: list[int]) -> int:
        """How long to wait for in-flight records before the next step: until the next
        group's write time, at most :attr:`CommitterConfig.poll_ms`; :data:`POLL_MS` while
        a group waits in a lane for the watch to read the input, a burst may start ahead
        of its time, a partition is being fenced or the notice rules were asked."""
        time_, config = self._time, self._config
        now = time_.clock.now_ms()
        due = self.plan.next_release_ms(deliverable)
        wait_ms = config.poll_ms
        if due is not None:
            wait_ms = time_.host_ms(due) - self._kept.tally.write_ahead_ms() - now
        writing = any(slot.in_lanes for slot in self.slots)
        shorts = self.withholding.shorts
        if (
            (writing and self.withholding.watch is not None)
            or (due is not None and config.write_ahead_topics is not None)
            or self.slots.fencing()
            or (shorts is not None and shorts.asking)
        ):
            wait_ms = min(wait_ms, POLL_MS)
        return min(max(wait_ms, 0), config.poll_ms)

    def _take_groups(self, deliverable: list[int]) -> Slot | None:
        """Take the next group of each partition of ``deliverable`` whose write time came
        into one of its lanes; returns a partition whose lanes were all busy when its group
        was due."""
        time_, config, tally, plan = self._time, self._config, self._kept.tally, self.plan
        now = time_.clock.now_ms()
        blocked: Slot | None = None
        for partition in deliverable:
            slot = self.slots[partition]
            due = plan.next_release_ms((partition,))
            if due is None:
                continue
            burst = self._burst_size(slot, due, now)
            if burst is None and time_.host_ms(due) - tally.write_ahead_ms() > now:
                continue
            if not slot.lanes.ready():
                # Taken later, the group only grows: nothing would be written sooner.
                blocked = blocked or slot
                continue
            broker_now = time_.broker_ms(now)
            if burst is None:
                width = group_width_ms(
                    plan, partition, max(due, broker_now), config.group_width_ms,
                    config.busy_group_width_ms, config.busy_group_size,
                )  # fmt: skip
            else:
                width = config.burst_width_ms
            group = plan.take(
                broker_now,
                width,
                config.max_group_size if burst is None else burst,
                partition,
                # A rated target: one step of its rate a group (no rate: no cap to ask).
                self._kept.pacer.step_size if self._kept.pacer.rates else None,
            )
            if group is not None:
                offsets = (
                    self._reader.offsets({partition}) if self.slots.offsets_due(slot) else None
                )
                self.slots.submit(slot, group, self._writer.job(group, slot), offsets)
                blocked = None
        return blocked

    def _burst_size(self, slot: Slot, due: int, now: int) -> int | None:
        """The most schedules of ``slot``'s partition to take into a burst group now
        (its next schedule due at ``due``), or ``None``: no burst group starts now."""
        config, time_, tally, pacer = self._config, self._time, self._kept.tally, self._kept.pacer
        if slot.writing or not slot.lanes.ready():
            return None
        ahead_ms = time_.host_ms(due) - now
        if ahead_ms <= tally.write_ahead_ms():
            return None  # due: small groups go out sooner
        item_ms = tally.item_ms()
        start = burst_start_ms(
            self.plan,
            slot.partition,
            due,
            item_ms,
            config.burst_width_ms,
            config.lanes,
            config.max_group_size,
        )
        if start is None or time_.host_ms(max(start, due - config.max_burst_ahead_ms)) > now:
            return None
        first = self.plan.next_pending(slot.partition)
        if first is None or not may_write_ahead(
            first.schedule.target_topic, config.write_ahead_topics, slot.lanes.topics
        ):
            return None  # its group would be written only once due
        if first.paced_ms is not None or pacer.rated(first.schedule.target_topic):
            return None  # paced: each step's deliveries make a group, visible together
        most = int(ahead_ms / item_ms)  # what is written before the first is due
        return min(most, config.max_burst_group) if most > config.max_group_size else None

    def _deliverable(self) -> list[int]:
        """The partitions owned, caught up and read for by the watch
        (:meth:`Withholding.gained`): their schedules may be delivered."""
        reader, withholding = self._reader, self.withholding
        return [
            p for p in self.slots.partitions() if reader.caught_up(p) and withholding.read_for(p)
        ]

    def _report_slot(self, slot: Slot, *, commit: bool = True) -> None:
        """Take the reports of ``slot``'s groups done (raises what failed one), and
        commit the consumer offsets that went with them."""
        offsets: list[TopicPartition] | None = None
        for group, delivered, after in self.slots.finished(slot):
            offsets = after or offsets
            for p in group.items:
                self.withholding.forget(p)
            self._kept.tally.add(delivered, len(group.items), len(self.plan))
        if offsets is not None and commit:
            self._reader.commit(offsets)
