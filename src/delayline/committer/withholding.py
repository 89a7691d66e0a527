"""Withholding what a later cancel or update ends: the committer's side of its watch.

The watch (:mod:`delayline.committer.watch`) reads the input topics beside the hold; this
checks what it reads against the schedules pending or being written, and marks a version
*withheld* when a later record ends it (its group then writes only its in-flight
tombstone). It also says when the watch may forget (once the pipeline has read a record:
:meth:`Withholding.follow_pipeline`), reads the input again for partitions taken over
(:meth:`Withholding.gained`), and makes a lane wait until the watch has read every input
record acknowledged by a group's write (:meth:`Withholding.read_to_now`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping

from delayline.committer.arrivals import Arrivals
from delayline.committer.checkpoint_log import checkpoint_positions, latest_logged_batch
from delayline.committer.config import CommitterConfig
from delayline.committer.due_plan import DuePlan
from delayline.committer.following import PipelineFollower
from delayline.committer.inflight_reader import InflightReader
from delayline.committer.later import later_of
from delayline.committer.ownership import Slots
from delayline.committer.pending import Pending
from delayline.committer.read_barrier import ReadBarrier, has_read
from delayline.committer.rearms import RangeReader, rearm_ranges
from delayline.committer.reviews import ReviewCounts
from delayline.committer.short_intake import ShortIntake
from delayline.committer.short_notice import Short
from delayline.committer.turns import Rearmed
from delayline.committer.watch import InputWatch
from delayline.contract.contracts import InputParser
from delayline.core.clock import Clock
from delayline.errors import DelaylineError, KafkaUnavailableError
from delayline.fire.write_attempt import Placed

log = logging.getLogger(__name__)

DELIVERED = "delivered"
"""Why a short-notice version is withheld when delayline's own tombstone of it, read
after it was planned, shows it delivered already (read again after a restart)."""
RESTART_MEMORY_MS = 90_000
"""After a restart, what the watch read of the input since the checkpoint is kept this
long at most, until the replayed batch hands over again (a Spark start and a batch:
12-25 s measured here)."""


class Withdrawn(DelaylineError):  # noqa: N818 - not an error: control flow inside a lane
    """A member of the group being written was withheld before its commit."""


class Withholding:
    """The watch of one session of a committer, and what it withholds. Without a
    topology there is no watch: nothing is withheld.

    Args:
        config: The committer's settings.
        clock: The host's time.
        plan: The session's pending schedules.
        slots: The session's partitions (what their lanes write may be withheld).
        drained_out: Whether the committer is stopped and its drain time is up.
        arrivals: See :class:`~delayline.committer.watch.InputWatch`.
        review_counts: See :class:`~delayline.committer.watch.InputWatch`.
        shorts: Plans the short-notice versions the watch reads
            (:attr:`CommitterConfig.notice_topic`); ``None``: the committer takes none.
    """

    def __init__(
        self,
        config: CommitterConfig,
        clock: Clock,
        plan: DuePlan,
        slots: Slots,
        drained_out: Callable[[], bool],
        arrivals: Arrivals | None = None,
        review_counts: ReviewCounts | None = None,
        shorts: ShortIntake | None = None,
    ) -> None:
        self._config = config
        self.shorts = shorts
        self._arrivals = arrivals
        self._review_counts = review_counts
        self._clock = clock
        self._plan = plan
        self._slots = slots
        self._drained_out = drained_out
        self.watch: InputWatch | None = None
        self._ranges: RangeReader | None = None
        """Reads what lands among a group's re-arms (with the watch)."""
        self._barrier: ReadBarrier | None = None
        """Where the watch must have read before a group is written."""
        self._replayed: int | None = None
        """The newest batch in the checkpoint's log at the start (a restart replays it)."""
        self._watched = threading.Condition()
        self._read_to: dict[tuple[str, int], int] = {}
        """The watch's positions, published (under :attr:`_watched`) once what they read
        is noted and has withheld what it ends."""
        self._positioned: set[int] = set()
        """The in-flight partitions whose short-notice read positions are known: read for
        (at the start or by a take-over's re-read) and not assigned again since."""
        self._read_for: set[int] = set()
        """The in-flight partitions whose pending schedules the watch has read the input
        for: those caught up when it started, and each taken over since (:meth:`gained`)."""
        self._follower = (
            None if config.checkpoint_dir is None else PipelineFollower(config.checkpoint_dir)
        )
        self._withheld: dict[bytes, str] = {}
        """In-flight key of each schedule withheld, not yet written off, to why (read by
        the lanes: a dict's get and set are atomic)."""

    def remembered(self) -> int:
        """Input records (cancels, versions) the watch remembers."""
        return 0 if self.watch is None else len(self.watch.later)

    def withheld(self, pending: Pending) -> bool:
        """Whether ``pending`` is withheld (safe from any thread)."""
        return self._withheld.get(pending.key) is not None

    def forget(self, pending: Pending) -> None:
        """``pending`` was written off (delivered or not): forget it."""
        self._withheld.pop(pending.key, None)
        if self.shorts is not None:
            self.shorts.done(pending)

    def _positions_of(self, partition: int) -> str | None:
        """The short-notice read positions committed with ``partition``'s offset; ``None``
        until the input was read again for it (a partition taken over), and again at
        its release (:meth:`given_up` comes before the last commit)."""
        if self.shorts is None or partition not in self._positioned:
            return None
        return self.shorts.metadata(partition)

    def take_shorts(self, owned: Collection[int]) -> None:
        """Plan the short-notice versions of the in-flight partitions ``owned`` (fenced:
        delivered once caught up and read for) that the rules asked last give
        (:meth:`ShortIntake.step`); :meth:`check_new` then withholds what a remembered
        record ends among them."""
        if self.shorts is not None and self.watch is not None:
            self.shorts.step(owned)

    def read_for(self, partition: int) -> bool:
        """Whether the watch has read the input for ``partition``'s pending schedules
        (always, without a watch)."""
        return self.watch is None or partition in self._read_for

    def assigned(self, partitions: list[int]) -> None:
        """``partitions`` are this committer's again: their short-notice read positions
        are another owner's until the input is read again for them (:meth:`gained`)."""
        self._positioned.difference_update(partitions)

    def given_up(self, partition: int) -> None:
        """``partition`` is no longer owned."""
        self._read_for.discard(partition)

    def start(self, reader: InflightReader) -> bool:
        """Read the input topics from where the earliest batch that handed over a pending
        schedule, or that a restart replays, stopped reading (and at least
        :attr:`CommitterConfig.watch_memory_ms` before), so a cancel written meanwhile,
        even while the pipeline was down, withholds what it ends; False if stopped
        meanwhile."""
        config = self._config
        if config.topology is None:
            return True
        now = self._clock.now_ms()
        watch = self.watch = InputWatch(
            config.bootstrap_servers,
            InputParser(config.topology),
            self._clock.now_ms,
            config.watch_memory_ms,
            self._arrivals,
            config.watch_hot_records,
            self._review_counts,
        )
        self._ranges = RangeReader(config.bootstrap_servers)
        self._barrier = ReadBarrier(
            watch.acknowledged_ends, watch.stable_ends, self._watch_read, self._published
        )
        if config.checkpoint_dir is not None:
            self._replayed = latest_logged_batch(config.checkpoint_dir)
        since, positions = self._watch_from(now, self._replayed, None)
        self._read_for = {p for p in self._slots.partitions() if reader.caught_up(p)}
        if self.shorts is not None:
            # Their short versions not delivered by the last owner are read again.
            found = reader.committed_metadata(self._read_for)
            for place, offset in self.shorts.starts(found, self._read_for).items():
                positions[place] = min(positions.get(place, offset), offset)
            reader.metadata_of = self._positions_of
            self._positioned = set(self._read_for)
        if self._replayed is not None:  # a restart: the replay may hand over again
            watch.later.keep_until = now + RESTART_MEMORY_MS
        if config.checkpoint_dir is not None:
            # Until a logged batch is seen and checked, the pipeline has read nothing the
            # watch may forget: a first batch can take longer than the memory.
            watch.taken = {}
        if self.shorts is not None:
            watch.shorts = self.shorts.versions
        if not watch.start(since, self._drained_out, positions):
            return False
        self.check_new()
        self._publish_read()
        return True

    def close(self) -> None:
        """Release the watch's consumers (and the notice rules' follower)."""
        if self.shorts is not None:
            self.shorts.close()
        if self.watch is not None:
            self.watch.close()
            self.watch = None
        if self._ranges is not None:
            self._ranges.close()
            self._ranges = None

    def _watch_from(
        self, now: int, replayed: int | None, partitions: Collection[int] | None
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """Where the watch reads the input from for the schedules pending (in
        ``partitions`` only, if given): :attr:`CommitterConfig.watch_memory_ms` before the
        earliest hand-over, and from where the earliest batch that handed one over, or
        ``replayed``, stopped reading (:func:`checkpoint_positions`). Returns the time
        and the positions."""
        config = self._config
        positions: dict[tuple[str, int], int] = {}
        if config.checkpoint_dir is not None:
            handed = self._plan.earliest_handed_batch(partitions)
            batches = [b for b in (replayed, handed) if b is not None]
            if batches:
                positions = checkpoint_positions(config.checkpoint_dir, min(batches))
        earliest = self._plan.earliest_handed_ms(partitions)
        return min(now, earliest or now) - config.watch_memory_ms, positions

    def gained(self, reader: InflightReader) -> None:
        """A partition caught up after the watch started (taken over from a committer
        that stopped or died) holds schedules handed over while this watch kept the
        input only for its own: it may have forgotten a cancel of one. Before anything
        of it is delivered, read the input again from where a start would
        (:meth:`_watch_from`) and withhold what that ends."""
        if self.watch is None:
            return
        read_for = self._read_for
        gained = [p for p in self._slots.partitions() if reader.caught_up(p) and p not in read_for]
        if not gained:
            return
        pending = sum(self._plan.pending_in(p) for p in gained)
        if not pending and self.shorts is None:
            read_for.update(gained)
            return
        since, positions = self._watch_from(self._clock.now_ms(), None, gained)
        began = time.monotonic()
        read = self.watch.read
        shorts = None
        if self.shorts is not None:  # and their short versions not delivered yet
            metadata = reader.committed_metadata(gained)
            watch = self.watch
            shorts = self.shorts.reread(metadata, gained, watch.positions, watch.parse)
        also = None if shorts is None else (shorts.ranges, shorts.record)
        noted = self.watch.reread(since, positions, self._drained_out, self.poll, also=also)
        if noted is None:
            return  # stopped meanwhile: not deliverable
        if shorts is not None:
            shorts.done()
            self._positioned.update(gained)
        self._withhold_ended(set(noted))
        read_for.update(gained)
        log.info(
            "committer: in-flight partition(s) %s taken over with %d schedule(s) pending: "
            "%d input record(s) read again in %.1f s",
            ",".join(map(str, gained)),
            pending,
            self.watch.read - read,
            time.monotonic() - began,
        )

    def check_new(self) -> None:
        """Withhold what a remembered record ends among the schedules just read."""
        if self.watch is None:
            return
        later = self.watch.later
        new = self._plan.take_new()
        for pending, kind in zip(new, later.ends_each([p.schedule for p in new]), strict=True):
            if kind is not None:
                self._withhold(pending, kind)
            batch = pending.batch
            replay = self._replayed is not None and batch is not None and batch >= self._replayed
            if replay and later.keep_until is not None:
                # The batch a restart replays has handed over again: what was read of the
                # input since the checkpoint may be forgotten in the usual time.
                later.keep_until = min(
                    later.keep_until, self._clock.now_ms() + self._config.watch_memory_ms
                )

    def follow_pipeline(self, reader: InflightReader) -> None:
        """Let the watch forget what the pipeline has read
        (:class:`~delayline.committer.following.PipelineFollower`); a committer without
        the checkpoint forgets by time alone."""
        if self._follower is not None and self.watch is not None:
            self._follower.follow(reader, self.watch)

    def poll(self) -> None:
        """Read the input topics; withhold what a new record ends, pending or being
        written."""
        if self.watch is None:
            return
        self._withhold_ended(set(self.watch.poll()))
        if self.shorts is not None:
            self._withhold_delivered(self.shorts.delivered())
        self._publish_read()

    def read_to_now(self) -> None:
        """Wait (on a lane's thread) until the watch has read, and withheld by, every
        input record acknowledged by now (:class:`ReadBarrier`): a cancel or update
        written before this wins."""
        if self._barrier is not None:
            self._barrier.wait()

    def check_rearms(self, rearms: list[Rearmed], placed: Placed) -> None:
        """Withhold (on a lane's thread) each re-armed schedule that a cancel or update
        written before its re-arm ends (:mod:`delayline.committer.rearms`): read from
        where the watch has read up to the group's last re-arm in each partition. Raises
        :class:`Withdrawn` (written again) if that cannot be read: nothing is re-armed
        unchecked. Without a watch (no topology) nothing withholds anything."""
        if not rearms or self.watch is None or self._ranges is None:
            return
        ranges, ours = rearm_ranges([r for _, r in rearms], placed, self._published())
        try:
            landed = self._ranges.read(ranges)
        except KafkaUnavailableError as exc:
            log.warning("committer: %s; writing the group again", exc)
            raise Withdrawn from exc
        rearmed = {(p.schedule.require_source().topic, p.schedule.id): p for p, _ in rearms}
        now = self._clock.now_ms()
        for found in landed:
            if (found.topic, found.partition, found.offset) in ours or found.key is None:
                continue
            pending = rearmed.get((found.topic, found.key.decode("utf-8", "replace")))
            if pending is None:
                continue
            ended = later_of(found, self.watch.parse, now)
            kind = None if ended is None else ended[1].ends(pending.schedule)
            if kind is not None:
                self._withhold(pending, kind)

    def _publish_read(self) -> None:
        """Publish the watch's positions: what they read has withheld what it ends."""
        if self.watch is None:
            return
        with self._watched:
            self._read_to = dict(self.watch.positions)
            self._watched.notify_all()

    def _withhold_ended(self, arrived: set[tuple[str, str]]) -> None:
        """Withhold what the records of ``arrived`` (topic, id) end, pending or being
        written."""
        if self.watch is None or not arrived:
            return
        candidates = [p for topic, sid in arrived for p in self._versions_of(topic, sid)]
        kinds = self.watch.later.ends_each([p.schedule for p in candidates])
        for p, kind in zip(candidates, kinds, strict=True):
            if kind is not None:
                self._withhold(p, kind)

    def _withhold_delivered(self, shorts: list[Short]) -> None:
        """Withhold the short versions that delayline's own tombstone showed delivered,
        pending or being written."""
        for short in shorts:
            for p in self._versions_of(short.place[0], short.schedule.id):
                if p.short is short:
                    self._withhold(p, DELIVERED)

    def _versions_of(self, topic: str, schedule_id: str) -> list[Pending]:
        """The versions of ``schedule_id`` read from ``topic``, pending or being written."""
        in_lanes = (p for slot in self._slots for p in slot.in_lanes.of(topic, schedule_id))
        return [*self._plan.pending_of(topic, schedule_id), *in_lanes]

    def _watch_read(self, ends: Mapping[tuple[str, int], int], timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until the watch's published positions reach ``ends``."""
        with self._watched:
            return self._watched.wait_for(lambda: has_read(self._read_to, ends), timeout_s)

    def _published(self) -> dict[tuple[str, int], int]:
        with self._watched:
            return dict(self._read_to)

    def _withhold(self, pending: Pending, kind: str) -> None:
        key = pending.key
        if key in self._withheld:
            return
        self._withheld[key] = kind
        log.debug(
            "committer: schedule %r (from %s) withheld: a later %s",
            pending.schedule.id,
            pending.schedule.require_source().describe(),
            kind,
        )
