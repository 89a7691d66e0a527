"""The committer: delivers handed-off schedules at their due time, exactly once.

A Spark micro-batch costs hundreds of milliseconds here, so a batch that starts when
a schedule falls due delivers it that late. With a lead, the hold raises a schedule
early and the fire stage hands it over through the in-flight topic
(:mod:`delayline.fire.inflight`); committers read that topic and deliver each schedule
in a transaction committed at its due time. A committer is a thread: ``delayline run``
keeps one in the pipeline's process, ``delayline committer`` runs one on its own.

* The committers of a pipeline form a consumer group and split the in-flight topic's
  partitions (:mod:`delayline.fire.inflight_reader`). Each partition is delivered by
  producers of its own (:func:`delayline.core.identifiers.committer_transactional_id`):
  a committer that takes a partition over, after a rebalance or a kill, fences the
  producers of the one before, which aborts their open transactions, then reads the
  partition to its end before it delivers anything of it.

* Schedules due within :attr:`CommitterConfig.group_width_ms` of each other share a
  transaction, written once its latest due time has passed by the broker's clock
  (:mod:`delayline.fire.broker_clock`) and committed at once: no reader, whatever its
  isolation level, sees a delivery before its due time, and its record timestamp is
  when it was written, never before the due time. For a target named by
  :attr:`CommitterConfig.write_ahead_topics` it is
  written as long before its first due time as recent writes took (plus
  :attr:`CommitterConfig.write_ahead_ms`) and committed at its latest due time, never
  before: a ``read_committed`` reader sees it that much sooner, a ``read_uncommitted``
  one that much early. An open transaction holds back ``read_committed`` readers of
  the partitions it wrote to, which is why it opens only just before its due time, not
  a lead ahead.
* A burst (more than :attr:`CommitterConfig.max_group_size` schedules due within
  :attr:`CommitterConfig.burst_width_ms`) to a write-ahead target cannot be written at
  its due time: writing takes about 0.15 ms a delivery here. It is written ahead
  instead, in groups that wide, started as long before the earliest is due as writing
  the next ``lanes`` groups is expected to take, one group after another
  (:attr:`_Slot.writing`), each committed at its latest due time, never before.
* A group with a target topic stamped on append (``LogAppendTime``) is written only
  once due, so the broker's stamp is never before the due time.
* Exactly once: the transaction also writes each in-flight record's tombstone. Once a
  second, after a transaction, the committer commits its consumer offset (never past a
  schedule not yet delivered); it only bounds what a restart reads again.
  After a crash, the partition's next owner (the committer restarted, or another)
  fences the old producers, reads the partition from that offset to its end before
  delivering anything of it, and skips what a tombstone shows delivered. What was
  pending is delivered at once if already due.
* A cancel or an update that the committer reads before it writes a delivery
  *withholds* it (:mod:`delayline.fire.watch`): the committer reads the input topics
  beside the hold, and 20 ms before a group is written waits until it has read every
  input record acknowledged by then. A group written ahead whose member is withheld
  while it waits for its due time is aborted and written again without it. A withheld
  schedule's group writes only its in-flight tombstone.
* A failure (Kafka away, a fatal producer error) starts the committer afresh after
  :data:`RETRY_MS`: nothing is lost, deliveries are only late.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from confluent_kafka import TopicPartition

from delayline.contract import OutgoingRecord
from delayline.contract.contracts import InputParser
from delayline.contract.kinds import EXPIRED
from delayline.contract.pacing import (
    WINDOW_REFUSED,
    TargetRates,
    WindowError,
    has_window,
    window_of,
)
from delayline.contract.recurring import is_recurring
from delayline.contract.topics import topic_matches
from delayline.contract.topology import Topology
from delayline.core.clock import Clock, SystemClock
from delayline.core.identifiers import (
    committer_group,
    committer_instance_id,
    committer_transactional_id,
)
from delayline.core.model import Schedule
from delayline.errors import DelaylineError, KafkaUnavailableError
from delayline.fire import broker_clock
from delayline.fire.checkpoint_log import checkpoint_positions, latest_logged_batch
from delayline.fire.due_plan import DuePlan, Group, InLanes, Pending
from delayline.fire.firing import Firing
from delayline.fire.inflight import render_inflight_tombstone
from delayline.fire.inflight_reader import CommitterNameTakenError, InflightReader
from delayline.fire.lanes import Job, Lanes
from delayline.fire.pacing import Pacer, TargetPacing
from delayline.fire.read_barrier import ReadBarrier
from delayline.fire.rearms import RangeReader
from delayline.fire.recurring import take_turn
from delayline.fire.refusals import AdminDescriber, TopicCatalog
from delayline.fire.report import Delivered
from delayline.fire.transactional import FireConfig, Placed, TransactionalFirer
from delayline.fire.watch import (
    MEMORY_MS,
    POLL_MS,
    READ_AHEAD_MS,
    InputWatch,
    has_read,
    later_of,
)

log = logging.getLogger(__name__)

Rearmed = tuple[Pending, OutgoingRecord]
"""A recurring schedule due, and the record that re-arms it."""

RETRY_MS = 1_000
"""How long the committer waits before starting afresh after a failure."""
SUMMARY_MS = 10_000
"""How often the committer logs what it delivered."""
WARM_AHEAD_MS = 20_000
"""Target topic facts are read again when they would expire within this (they live a
minute): a schedule read waits for its due time a lead at most, usually a few seconds."""
TAKEN_LOOK_S = 1.0
"""How often the committer looks for a new batch in the pipeline's checkpoint."""
RESTART_MEMORY_MS = 90_000
"""After a restart, what the watch read of the input since the checkpoint is kept this
long at most, until the replayed batch hands over again (a Spark start and a batch:
12-25 s measured here)."""
CAUGHT_UP_POLL_S = 0.02
"""How often :meth:`Committer.wait_caught_up` looks."""
FENCES_WINDOW_MS = 60_000
"""A committer fenced under its name twice within this stops: another committer runs
under the same name (the two would fence each other at every start). Once is taken for
its own consumer joining again after a broker pause, and it starts afresh."""
RUN_COMMITTER_NAME = "pipeline"
"""The name of the committer ``delayline run`` keeps in its process."""
WRITE_SAMPLES = 50
"""How many recent groups' write times decide how far ahead the next one is written."""
ITEM_MS = 0.3
"""What writing one delivery takes until measured (0.15 ms in a group of 95,000 here)."""
ITEM_MARGIN = 1.5
"""A burst is written ahead by this many times what its writing is expected to take."""
ITEM_SAMPLE_LEAST = 100
"""Groups smaller than this say little about the time per delivery (fixed costs)."""


@dataclass(frozen=True, slots=True)
class CommitterConfig:
    """Settings of the committer.

    Attributes:
        bootstrap_servers: Kafka bootstrap list.
        inflight_topic: Where the fire stage hands schedules over.
        commits_topic: The pipeline's commits topic (for its transactional writer).
        transactional_id: The pipeline's: the committers' consumer group and their
            producers' ids are made from it.
        dead_letter_topic: Where refused deliveries go.
        history_topic: Audit topic of deliveries, if any.
        group_width_ms: Schedules due within this of the first of a group share its
            transaction (and wait for its latest due time).
        max_group_size: The most schedules one transaction delivers: a burst already
            due is split, so both lanes write and the first deliveries go out sooner
            (one group of 95,000 took one lane 14 s here).
        write_ahead_ms: The least time a group is written before it commits; more when
            writing took longer lately (the slowest of the last groups plus this).
        max_write_ahead_ms: The most: an open transaction holds back ``read_committed``
            readers of its partitions.
        burst_width_ms: A burst (more than ``max_group_size`` schedules due within this
            of the earliest pending) is written ahead in groups this wide, started as
            long before the earliest is due as writing the next ``lanes`` groups takes:
            each commits at its latest due time, so its first is up to this late.
        max_burst_ahead_ms: The longest a burst's group is written before it is due
            (below the producers' transaction timeout); deliveries to the same target
            partitions written meanwhile are visible only once it commits.
        max_burst_group: The most schedules one burst group delivers.
        offsets_interval_ms: How often the consumer offset is committed after a
            transaction (a restart re-reads at most this much, skipping what its
            tombstone shows delivered).
        poll_ms: Longest wait for new in-flight records while nothing is due.
        lanes: Transactional writers per partition whose groups overlap
            (:mod:`delayline.fire.lanes`).
        max_lateness_ms: Later than this, a schedule is dead-lettered as ``expired``
            instead of delivered (as the hold does); ``None``: never.
        allowed_targets: ``--allowed-target-topics``: deliveries to other topics are
            dead-lettered.
        topology: The input topics and their contracts: a later cancel or update read
            there withholds a handed-over schedule (:mod:`delayline.fire.watch`).
            ``None`` reads none: every handed-over schedule is delivered.
        checkpoint_dir: The pipeline's checkpoint: after a restart the watch reads the
            input from where the batches that may hand over again stopped reading, and
            it forgets a record only once the pipeline has read it.
        watch_memory_ms: The least time the watch remembers a record that ends a
            version (:data:`delayline.fire.watch.MEMORY_MS`).
        name: This committer's name in the group, unique among the pipeline's
            committers: restarted under it within ``session_timeout_ms``, a committer
            takes its partitions back at once (a second one under the same name fences
            the first).
        session_timeout_ms: How long a committer that died keeps its partitions before
            the group gives them to the others.
        first_assignment_timeout_s: How long a starting committer waits for the group
            to assign it partitions before it reads the input (a committer that gets none,
            more committers than partitions, waits that long).
        target_rates: ``--target-rate``: deliveries to a topic beyond its rate wait for
            a slot of it (:mod:`delayline.fire.pacing`); every committer of the
            pipeline must be given the same.
        write_ahead_topics: ``--write-ahead``: a regular expression of the target topics
            (matched as a whole) whose groups may be written before they are due and
            committed at the due time: bursts on time, small groups a few milliseconds
            sooner. A ``read_uncommitted`` reader of such a topic sees a delivery up to
            that much early (a burst: seconds), and sees what a cancel read after the
            write withholds (its transaction is aborted and written again). ``None``:
            every group is written once due, after the watch has read the input to
            20 ms before it, so no reader sees anything early or cancelled.
    """

    bootstrap_servers: str
    inflight_topic: str
    commits_topic: str
    transactional_id: str
    dead_letter_topic: str
    history_topic: str | None = None
    group_width_ms: int = 5
    max_group_size: int = 2_000
    write_ahead_ms: int = 5
    max_write_ahead_ms: int = 100
    burst_width_ms: int = 500
    max_burst_ahead_ms: int = 30_000
    max_burst_group: int = 100_000
    offsets_interval_ms: int = 1_000
    poll_ms: int = 100
    lanes: int = 2
    max_lateness_ms: int | None = None
    allowed_targets: str | None = None
    topology: Topology | None = None
    checkpoint_dir: Path | None = None
    watch_memory_ms: int = MEMORY_MS
    name: str = RUN_COMMITTER_NAME
    session_timeout_ms: int = 10_000
    first_assignment_timeout_s: float = 15.0
    target_rates: TargetRates = field(default_factory=TargetRates)
    write_ahead_topics: str | None = None


@dataclass(frozen=True, slots=True)
class CommitterStatus:
    """How one committer is doing (for metrics and ``/progress``).

    Attributes:
        name: Its name in the group (:attr:`CommitterConfig.name`).
        partitions: The in-flight partitions it owns.
        pending: Schedules read and not yet delivered (waiting, or in a group being
            written).
        delivered: Schedules it delivered since it started.
        pacing: Per target topic paced (a rate, or windowed schedules), what pacing did.
        remembered: Schedule ids whose later cancel or version its watch remembers
            (:mod:`delayline.fire.watch`): what it read of the input lately, and
            everything the pipeline has not read yet.
    """

    name: str
    partitions: tuple[int, ...]
    pending: int
    delivered: int
    pacing: tuple[tuple[str, TargetPacing], ...] = ()
    remembered: int = 0


@dataclass(slots=True)
class _WatchSession:
    """What a session's watch has made sure of, beyond what it read (reset each session).

    Attributes:
        taken: A batch newly in the checkpoint's offsets log, where it reads its input
            to, and the in-flight topic's stable ends once it was seen: the watch may
            forget what the batch reads once those ends are read
            (:meth:`Committer._follow_pipeline`).
        taken_batch: The batch whose reads the watch may forget.
        looked: When the checkpoint was last looked at (monotonic seconds).
        read_for: The in-flight partitions whose pending schedules the watch has read
            the input for: those caught up when it started, and each taken over since
            (:meth:`Committer._watch_gained`).
    """

    taken: tuple[int, dict[tuple[str, int], int], dict[int, int]] | None = None
    taken_batch: int | None = None
    looked: float = 0.0
    read_for: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Slot:
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


class _Withdrawn(DelaylineError):  # noqa: N818 - not an error: control flow inside a lane
    """A member of the group being written was withheld before its commit."""


class Committer:
    """Delivers what the in-flight topic holds at its due time (a thread).

    Args:
        config: The committer's settings.
        on_delivered: Called (on the committer's thread) after each committed group.
        clock: The host's time.
    """

    _barrier: ReadBarrier | None = None
    """Where the watch must have read before a group is written (made with the watch)."""

    def __init__(
        self,
        config: CommitterConfig,
        on_delivered: Callable[[Delivered], None] = lambda _d: None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.on_delivered = on_delivered
        self.clock = clock or SystemClock()
        self._stop = threading.Event()
        self._drain_until: float | None = None
        self._thread = threading.Thread(target=self._run, name="delayline-committer", daemon=True)
        self._offset = broker_clock.UNKNOWN
        self._pacer = Pacer(config.target_rates)
        """Kept across sessions: its figures only grow."""
        self._plan = DuePlan()
        self._summary: list[int] = []
        self._arrived_due = 0
        self._summary_at = time.monotonic()
        self._writes: deque[int] = deque(maxlen=WRITE_SAMPLES)
        self._item_writes: deque[tuple[int, int]] = deque(maxlen=WRITE_SAMPLES)
        """(deliveries, ms) of recent groups large enough to tell the time per delivery."""
        self._lookups = ThreadPoolExecutor(1, thread_name_prefix="delayline-lookups")
        self._warming: Future[None] | None = None
        self._slots: dict[int, _Slot] = {}
        """The partitions owned, by number (touched on the committer's thread only)."""
        self._fencing: dict[int, Future[_Slot]] = {}
        """Partitions assigned whose producers are being opened (:meth:`assigned`)."""
        self._fences = ThreadPoolExecutor(4, thread_name_prefix="delayline-fence")
        self._owned: tuple[int, ...] = ()
        """The keys of :attr:`_slots`, published for :meth:`status`."""
        self._topics: TopicCatalog | None = None
        self._reader: InflightReader | None = None
        self._delivered = 0
        self._sessions = 0
        self._fenced_at: float | None = None
        """When the group last fenced this committer's name (monotonic seconds)."""
        self.failure: DelaylineError | None = None
        """Why the committer stopped by itself, if it did (it starts afresh after any
        other failure)."""
        self._watch: InputWatch | None = None
        self._replayed: int | None = None
        """The newest batch in the checkpoint's log at the start (a restart replays it)."""
        self._withheld: dict[bytes, str] = {}
        """In-flight key of each schedule withheld, not yet written off, to why (read by
        the lanes: a dict's get and set are atomic)."""
        self._ranges: RangeReader | None = None
        """Reads what lands among a group's re-arms (with the watch)."""
        self._watched = threading.Condition()
        self._read_to: dict[tuple[str, int], int] = {}
        """The watch's positions, published (under :attr:`_watched`) once what they read
        is noted and has withheld what it ends."""
        self._sure = _WatchSession()
        self._summary_withheld = 0
        self._ready = threading.Event()
        """Set once it has read its partitions to their ends (and again each session)."""
        self._in_lanes = 0
        """Schedules taken into groups and not yet reported (written on its thread)."""

    def start(self) -> None:
        """Measure the broker's clock, then start delivering.

        Raises:
            ClockSkewError: the host's and the broker's clocks disagree too much.
        """
        self._offset = broker_clock.measure(
            self.config.bootstrap_servers, self.config.inflight_topic
        )
        self._thread.start()

    def status(self) -> CommitterStatus:
        """How it is doing (safe from any thread)."""
        pending = len(self._plan) + self._in_lanes
        pacing = tuple(sorted((t, replace(p)) for t, p in list(self._pacer.stats.items())))
        watch = self._watch
        remembered = 0 if watch is None else len(watch.later)
        return CommitterStatus(
            self.config.name, self._owned, pending, self._delivered, pacing, remembered
        )

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait, at most ``timeout_s``, until the committer has read its partitions to
        their ends; whether it has (safe from any thread)."""
        return self._ready.wait(timeout_s)

    def wait_caught_up(self, timeout_s: float) -> int:
        """Wait, at most ``timeout_s``, until the committer is ready and has delivered
        everything it read (what was handed over before it started is due within the
        lead); returns how many schedules remain (safe from any thread)."""
        deadline = time.monotonic() + timeout_s
        self._ready.wait(timeout_s)
        while (left := self.status().pending) and time.monotonic() < deadline:
            time.sleep(CAUGHT_UP_POLL_S)
        return left

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the committer to stop by itself (see
        :attr:`failure`); whether it did."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def stop(self, drain_timeout_s: float = 0.0) -> None:
        """Deliver what is pending for up to ``drain_timeout_s``, then stop. What is left
        is delivered by the next start."""
        self._drain_until = time.monotonic() + drain_timeout_s
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(drain_timeout_s + 30)
        self._lookups.shutdown(wait=False)
        self._fences.shutdown(wait=False)

    def _run(self) -> None:
        while True:
            try:
                self._session()
                return
            except CommitterNameTakenError as exc:
                if self._fenced_again():  # starting afresh would fence the other one
                    self.failure = CommitterNameTakenError(
                        f"{exc} twice within {FENCES_WINDOW_MS // 1000} s: another committer "
                        f"of the group runs under this one's name ({self.config.name}); this "
                        "one stops: give each committer its own --name"
                    )
                    log.error("committer %s stopped: %s", self.config.name, self.failure)
                    return
                log.warning(
                    "committer %s: %s (its own consumer joining again after a broker pause, "
                    "or a namesake: fenced again within %d s, it stops); starting afresh in "
                    "%d ms",
                    self.config.name,
                    exc,
                    FENCES_WINDOW_MS // 1000,
                    RETRY_MS,
                )
            except Exception as exc:  # any failure: start afresh, nothing is lost
                log.warning(
                    "committer failed (%s: %s); starting afresh in %d ms",
                    type(exc).__name__,
                    exc,
                    RETRY_MS,
                )
            if self._stop.wait(RETRY_MS / 1000):
                return

    def _fenced_again(self) -> bool:
        """Note a fence of this committer's name; whether one came within
        :data:`FENCES_WINDOW_MS` before it (a namesake: two committers under one name
        fence each other at every start, its own consumer's new join does not)."""
        now = time.monotonic()
        again = self._fenced_at is not None and now - self._fenced_at < FENCES_WINDOW_MS / 1000
        self._fenced_at = now
        return again

    def _session(self) -> None:
        """One life of the committer: join the group, catch up, deliver until stopped."""
        config = self.config
        if self._sessions:  # measured again: the host's clock may have been stepped
            self._offset = broker_clock.measure(config.bootstrap_servers, config.inflight_topic)
        self._sessions += 1
        self._topics = TopicCatalog(
            AdminDescriber(config.bootstrap_servers, 30_000), allowed=config.allowed_targets
        )
        self._pacer.reset()
        self._plan = DuePlan(self._pacer, self._windowed)
        self._ready.clear()
        self._in_lanes = 0
        self._withheld.clear()
        self._sure = _WatchSession()
        reader = self._reader = InflightReader(
            config.bootstrap_servers,
            config.inflight_topic,
            committer_group(config.transactional_id),
            committer_instance_id(config.transactional_id, config.name),
            config.session_timeout_ms,
            self._plan,
            self.clock,
            self,
        )
        try:
            if not reader.wait_for_partitions(
                self._drained_out, config.first_assignment_timeout_s, self._take_fenced
            ):
                return  # stopped before it knew what was delivered: the next start will
            if not self._start_watch():
                return
            if not self._slots and not self._fencing:
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
                ",".join(map(str, sorted(self._slots))) or "none yet",
                len(self._plan),
            )
            self._ready.set()
            while not self._finished(reader):
                self._step(reader)
            self._close_slots(report=True)  # the last groups, done while closing
        finally:
            self._close_slots(report=False)
            for fencing in self._fencing.values():
                fencing.add_done_callback(_close_opened)
            self._fencing.clear()
            reader.close()
            self._reader = None
            if self._watch is not None:
                self._watch.close()
                self._watch = None
            if self._ranges is not None:
                self._ranges.close()
                self._ranges = None

    def assigned(self, partitions: list[int]) -> None:
        """Start opening the producers of ``partitions`` in the background (which fences
        those of their earlier owner, aborting its open transactions); the partitions
        already owned keep being delivered meanwhile (:meth:`_take_fenced`)."""
        for partition in partitions:
            if partition not in self._slots and partition not in self._fencing:
                self._fencing[partition] = self._fences.submit(self._open_slot, partition)

    def _open_slot(self, partition: int) -> _Slot:
        """The lanes of ``partition``, their producers' transactions initialised."""
        config = self.config
        topics = self._topics
        assert topics is not None  # set before the reader that assigns partitions is made
        firers: list[TransactionalFirer] = []
        inputs = frozenset(() if config.topology is None else config.topology.input_topics)
        try:
            for lane in range(config.lanes):
                txn = committer_transactional_id(config.transactional_id, partition, lane)
                fire = FireConfig(
                    config.bootstrap_servers,
                    config.commits_topic,
                    txn,
                    linger_ms=0,
                    last_topics=inputs,
                )
                firers.append(TransactionalFirer(fire, topics=topics))
        except Exception:
            for firer in firers:
                firer.close()
            raise
        return _Slot(partition, Lanes(firers, topics))

    def _take_fenced(self) -> None:
        """Make a slot of each partition whose fence is done, and have the reader read it
        to its end from here (raises what failed a fence: the session starts afresh)."""
        for partition, future in list(self._fencing.items()):
            if not future.done():
                continue
            del self._fencing[partition]
            slot = future.result()
            reader = self._reader
            if reader is None or partition not in reader.owned:  # revoked meanwhile
                slot.lanes.close()
                continue
            self._slots[partition] = slot
            self._owned = tuple(sorted(self._slots))
            reader.fenced(partition)

    def revoked(self, partitions: list[int], *, lost: bool) -> bool:
        """Finish what is being delivered of ``partitions`` and close their producers;
        returns whether every group of theirs was delivered (their offsets may then be
        committed). Called by the reader; the plan forgets their pending schedules."""
        complete = True
        for partition in partitions:
            fencing = self._fencing.pop(partition, None)
            if fencing is not None:  # not delivered from yet: close it once opened
                fencing.add_done_callback(_close_opened)
                continue
            slot = self._slots.get(partition)
            if slot is None:
                complete = False
                continue
            try:
                self._finish(slot)  # still a slot: a cancel read meanwhile withholds
                self._report_slot(slot, commit=False)
            except Exception as exc:
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
                self._slots.pop(partition, None)
                self._owned = tuple(sorted(self._slots))
                self._sure.read_for.discard(partition)
        return complete and not lost

    def _close_slots(self, *, report: bool) -> None:
        """Close every partition's lanes (waiting for their groups); with ``report``,
        report what they delivered and commit the offsets that went with it."""
        slots = list(self._slots.values())
        failure: Exception | None = None
        for slot in slots:  # still slots: a cancel read meanwhile withholds
            try:
                self._finish(slot)
            except Exception as exc:  # the watch failed too: the groups still end, then close
                slot.lanes.close()
                failure = failure or exc
        self._slots = {}
        self._owned = ()
        if failure is not None and report:
            raise failure
        if report:
            for slot in slots:
                self._report_slot(slot)

    def _start_watch(self) -> bool:
        """Read the input topics from where the earliest batch that handed over a pending
        schedule, or that a restart replays, stopped reading (and at least from
        :data:`MEMORY_MS` ago), so a cancel written meanwhile, even while the pipeline was
        down, withholds what it ends; False if stopped meanwhile."""
        config = self.config
        if config.topology is None:
            return True
        now = self.clock.now_ms()
        self._watch = InputWatch(
            config.bootstrap_servers,
            InputParser(config.topology),
            self.clock.now_ms,
            config.watch_memory_ms,
        )
        self._ranges = RangeReader(config.bootstrap_servers)
        watch = self._watch
        self._barrier = ReadBarrier(
            watch.acknowledged_ends, watch.stable_ends, self._watch_read, self._published
        )
        self._replayed = None
        if config.checkpoint_dir is not None:
            self._replayed = latest_logged_batch(config.checkpoint_dir)
        since, positions = self._watch_from(now, self._replayed, None)
        if self._reader is not None:
            reader = self._reader
            self._sure.read_for = {p for p in self._slots if reader.caught_up(p)}
        if self._replayed is not None:  # a restart: the replay may hand over again
            self._watch.later.keep_until = now + RESTART_MEMORY_MS
        if config.checkpoint_dir is not None:
            # Until a logged batch is seen and checked, the pipeline has read nothing the
            # watch may forget: a first batch can take longer than the memory.
            self._watch.taken = {}
        if not self._watch.start(since, self._drained_out, positions):
            return False
        self._check_new()
        self._publish_read()
        return True

    def _watch_from(
        self, now: int, replayed: int | None, partitions: Collection[int] | None
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """Where the watch reads the input from for the schedules pending (in
        ``partitions`` only, if given): :attr:`CommitterConfig.watch_memory_ms` before the
        earliest hand-over, and from where the earliest batch that handed one over, or
        ``replayed``, stopped reading (:func:`checkpoint_positions`). Returns the time
        and the positions."""
        config = self.config
        positions: dict[tuple[str, int], int] = {}
        if config.checkpoint_dir is not None:
            handed = self._plan.earliest_handed_batch(partitions)
            batches = [b for b in (replayed, handed) if b is not None]
            if batches:
                positions = checkpoint_positions(config.checkpoint_dir, min(batches))
        earliest = self._plan.earliest_handed_ms(partitions)
        return min(now, earliest or now) - config.watch_memory_ms, positions

    def _watch_gained(self, reader: InflightReader) -> None:
        """A partition caught up after the watch started (taken over from a committer
        that stopped or died) holds schedules handed over while this watch kept the
        input only for its own: it may have forgotten a cancel of one. Before anything
        of it is delivered, read the input again from where a start would
        (:meth:`_watch_from`) and withhold what that ends."""
        if self._watch is None:
            return
        read_for = self._sure.read_for
        gained = [p for p in self._slots if reader.caught_up(p) and p not in read_for]
        if not gained:
            return
        pending = sum(self._plan.pending_in(p) for p in gained)
        if not pending:
            read_for.update(gained)
            return
        since, positions = self._watch_from(self.clock.now_ms(), None, gained)
        began = time.monotonic()
        read = self._watch.read
        noted = self._watch.reread(since, positions, self._drained_out, self._watch_input)
        if noted is None:
            return  # stopped meanwhile: not deliverable
        self._withhold_ended(set(noted))
        read_for.update(gained)
        log.info(
            "committer: in-flight partition(s) %s taken over with %d schedule(s) pending: "
            "%d input record(s) read again in %.1f s",
            ",".join(map(str, gained)),
            pending,
            self._watch.read - read,
            time.monotonic() - began,
        )

    def _check_new(self) -> None:
        """Withhold what a remembered record ends among the schedules just read."""
        if self._watch is None:
            return
        later = self._watch.later
        for pending in self._plan.take_new():
            kind = later.ends(pending.schedule)
            if kind is not None:
                self._withhold(pending, kind)
            batch = pending.batch
            replay = self._replayed is not None and batch is not None and batch >= self._replayed
            if replay and later.keep_until is not None:
                # The batch a restart replays has handed over again: what was read of the
                # input since the checkpoint may be forgotten in the usual time.
                later.keep_until = min(
                    later.keep_until, self.clock.now_ms() + self.config.watch_memory_ms
                )

    def _follow_pipeline(self, reader: InflightReader) -> None:
        """Let the watch forget what the pipeline has read (:meth:`LaterRecords.expire`).

        A batch in the checkpoint's offsets log reads its input up to the offsets logged
        there, and Spark logs a batch only once the one before it committed, so every
        version handed over by a batch that did not read a record was committed to the
        in-flight topic before the log named a batch that did. Once the in-flight
        partitions are read up to their stable ends as of then, each such version has
        been checked against what the watch remembers, and the records that batch reads
        are the hold's to fold. Looked at once a second; a committer without the
        checkpoint forgets by time alone."""
        checkpoint = self.config.checkpoint_dir
        if checkpoint is None or self._watch is None:
            return
        sure = self._sure
        if sure.taken is None:
            if time.monotonic() < sure.looked + TAKEN_LOOK_S:
                return
            sure.looked = time.monotonic()
            batch = latest_logged_batch(checkpoint)
            if batch is None or batch == sure.taken_batch:
                return
            positions = checkpoint_positions(checkpoint, batch)
            try:
                ends = reader.stable_ends()
            except KafkaUnavailableError as exc:
                log.debug("committer: in-flight ends unknown (%s); looked at again later", exc)
                return
            sure.taken = (batch, positions, ends)
        batch, positions, ends = sure.taken
        if reader.has_read(ends):
            sure.taken = None
            sure.taken_batch = batch
            self._watch.taken = positions

    def _watch_input(self) -> None:
        """Read the input topics; withhold what a new record ends, pending or being
        written."""
        if self._watch is None:
            return
        self._withhold_ended(set(self._watch.poll()))
        self._publish_read()

    def _publish_read(self) -> None:
        """Publish the watch's positions: what they read has withheld what it ends."""
        if self._watch is None:
            return
        with self._watched:
            self._read_to = dict(self._watch.positions)
            self._watched.notify_all()

    def _withhold_ended(self, arrived: set[tuple[str, str]]) -> None:
        """Withhold what the records of ``arrived`` (topic, id) end, pending or being
        written."""
        if self._watch is None or not arrived:
            return
        candidates = [
            p
            for topic, sid in arrived
            for p in (
                *self._plan.pending_of(topic, sid),
                *(p for slot in self._slots.values() for p in slot.in_lanes.of(topic, sid)),
            )
        ]
        for p in candidates:
            kind = self._watch.later.ends(p.schedule)
            if kind is not None:
                self._withhold(p, kind)

    def _read_input_to_now(self) -> None:
        """Wait (on a lane's thread) until the watch has read, and withheld by, every
        input record acknowledged by now (:class:`ReadBarrier`): a cancel or update
        written before this wins."""
        barrier = self._barrier
        if barrier is not None:
            barrier.wait()

    def _watch_read(self, ends: Mapping[tuple[str, int], int], timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until the watch's published positions reach ``ends``."""
        with self._watched:
            return self._watched.wait_for(lambda: has_read(self._read_to, ends), timeout_s)

    def _published(self) -> dict[tuple[str, int], int]:
        with self._watched:
            return dict(self._read_to)

    def _check_rearms(self, rearms: list[Rearmed], placed: Placed) -> None:
        """Withhold (on a lane's thread) each re-armed schedule that a cancel or update
        written before its re-arm ends (:mod:`delayline.fire.rearms`): read from where the
        watch has read up to the group's last re-arm in each partition. Raises
        :class:`_Withdrawn` (written again) if that cannot be read: nothing is re-armed
        unchecked. Without a watch (no topology) nothing withholds anything."""
        if not rearms or self._watch is None or self._ranges is None:
            return
        with self._watched:
            read_to = dict(self._read_to)
        ranges: dict[tuple[str, int], tuple[int, int]] = {}
        ours: set[tuple[str, int, int]] = set()
        for _, record in rearms:
            partition, offset = placed[record]
            place = (record.topic, partition)
            low, high = ranges.get(place, (read_to.get(place, 0), offset))
            ranges[place] = (min(low, offset), max(high, offset))
            ours.add((record.topic, partition, offset))
        try:
            landed = self._ranges.read(ranges)
        except KafkaUnavailableError as exc:
            log.warning("committer: %s; writing the group again", exc)
            raise _Withdrawn from exc
        rearmed = {(p.schedule.require_source().topic, p.schedule.id): p for p, _ in rearms}
        now = self.clock.now_ms()
        for found in landed:
            if (found.topic, found.partition, found.offset) in ours or found.key is None:
                continue
            pending = rearmed.get((found.topic, found.key.decode("utf-8", "replace")))
            if pending is None:
                continue
            ended = later_of(found, self._watch.parse, now)
            kind = None if ended is None else ended[1].ends(pending.schedule)
            if kind is not None:
                self._withhold(pending, kind)

    def _withhold(self, pending: Pending, kind: str) -> None:
        key = pending.record.key or b""
        if key in self._withheld:
            return
        self._withheld[key] = kind
        log.debug(
            "committer: schedule %r (from %s) withheld: a later %s",
            pending.schedule.id,
            pending.schedule.require_source().describe(),
            kind,
        )

    def _finish(self, slot: _Slot) -> None:
        """Wait for ``slot``'s groups, then close its producers. The watch is read
        meanwhile: a group waits for it to read the input to its end before it commits."""
        while slot.lanes.busy():
            self._watch_input()
            slot.lanes.wait_idle(POLL_MS / 1000)
        slot.lanes.close()

    def _warm(self, reader: InflightReader) -> None:
        """Look up new target topics beside the deliveries (facts expire; a lookup at
        delivery time would make that delivery late)."""
        if self._warming is not None and not self._warming.done():
            return
        targets = set(reader.targets)
        reader.targets.clear()
        if targets and self._slots:
            lanes = [slot.lanes for slot in self._slots.values()]
            self._warming = self._lookups.submit(_warm_all, lanes, targets)

    def _drained_out(self) -> bool:
        """Stopped, and the time to drain what was handed over is up."""
        return self._stop.is_set() and time.monotonic() >= (self._drain_until or 0)

    def _finished(self, reader: InflightReader) -> bool:
        """Stopped, and (until the drain time is up) everything handed over until the
        stop delivered: read to the end offsets as of the stop, nothing pending."""
        if not self._stop.is_set():
            return False
        if time.monotonic() >= (self._drain_until or 0):
            return True
        busy = any(slot.lanes.busy() for slot in self._slots.values())
        return reader.read_to_stop() and not len(self._plan) and not busy

    def _step(self, reader: InflightReader) -> None:
        """Read what arrived, then deliver the next group of each partition whose write
        time came."""
        now = self.clock.now_ms()
        self._pacer.partitions = reader.partitions
        self._plan.release(self._broker_time(now), self._deliverable(reader))
        due = self._plan.next_release_ms(self._deliverable(reader))
        write_at = None if due is None else self._host_time(due) - self._write_ahead_ms()
        wait_ms = self.config.poll_ms if write_at is None else write_at - now
        writing = any(slot.in_lanes for slot in self._slots.values())
        if self._watch is not None and (due is not None or writing):
            wait_ms = min(wait_ms, POLL_MS)  # a cancel must be read before the commit
        if self._fencing:
            wait_ms = min(wait_ms, POLL_MS)  # a fence done makes a partition deliverable
        reader.poll(min(max(wait_ms, 0), self.config.poll_ms) / 1000)
        self._take_fenced()
        self._watch_gained(reader)
        self._check_new()
        self._follow_pipeline(reader)
        self._watch_input()
        self._warm(reader)
        self._report()
        now = self.clock.now_ms()
        blocked: _Slot | None = None
        for partition in self._deliverable(reader):
            slot = self._slots[partition]
            due = self._plan.next_release_ms((partition,))
            if due is None:
                continue
            burst = self._burst_size(slot, due, now)
            if burst is None and self._host_time(due) - self._write_ahead_ms() > now:
                continue
            if not slot.lanes.ready():
                # Taken later, the group only grows: nothing would be written sooner.
                blocked = blocked or slot
                continue
            config = self.config
            group = self._plan.take(
                self._broker_time(now),
                config.group_width_ms if burst is None else config.burst_width_ms,
                config.max_group_size if burst is None else burst,
                partition,
                self._pacer.step_size,  # a rated target: one step of its rate a group
            )
            if group is not None:
                offsets = self._offsets(slot, reader)
                slot.writing.add(id(group))
                self._in_lanes += len(group.items)
                slot.lanes.submit(self._job(group, slot))
                slot.in_lanes.append(group)
                slot.offsets_after.append(offsets)
                blocked = None
        if blocked is not None:
            # The watch is read again meanwhile: a group in a lane may be withheld from.
            wait_ms = self.config.poll_ms if self._watch is None else POLL_MS
            blocked.lanes.wait_ready(wait_ms / 1000)

    def _burst_size(self, slot: _Slot, due: int, now: int) -> int | None:
        """The most schedules of ``slot``'s partition to take into a burst group now
        (its next schedule due at ``due``), or ``None``: no burst group starts now."""
        config = self.config
        if slot.writing or not slot.lanes.ready():
            return None
        ahead_ms = self._host_time(due) - now
        if ahead_ms <= self._write_ahead_ms():
            return None  # due: small groups go out sooner
        item_ms = self._item_ms()
        start = self._plan.burst_start_ms(
            slot.partition, due, item_ms, config.burst_width_ms, config.lanes, config.max_group_size
        )
        if start is None or self._host_time(max(start, due - config.max_burst_ahead_ms)) > now:
            return None
        first = self._plan.next_pending(slot.partition)
        if first is None or not _may_write_ahead(
            first.schedule.target_topic, config.write_ahead_topics, slot.lanes.topics
        ):
            return None  # its group would be written only once due
        if first is not None and (
            first.paced_ms is not None or self._pacer.rated(first.schedule.target_topic)
        ):
            return None  # paced: each step's deliveries make a group, visible together
        most = int(ahead_ms / item_ms)  # what is written before the first is due
        return min(most, config.max_burst_group) if most > config.max_group_size else None

    def _item_ms(self) -> float:
        """What writing one delivery is expected to take, with a margin."""
        count = sum(n for n, _ in self._item_writes)
        if count == 0:
            return ITEM_MS * ITEM_MARGIN
        return max(sum(ms for _, ms in self._item_writes), 1) / count * ITEM_MARGIN

    def _deliverable(self, reader: InflightReader) -> list[int]:
        """The partitions owned, caught up and, with a watch, read for by it
        (:meth:`_watch_gained`): their schedules may be delivered."""
        read_for = None if self._watch is None else self._sure.read_for
        return [
            p for p in self._slots if reader.caught_up(p) and (read_for is None or p in read_for)
        ]

    def _report(self) -> None:
        """Take the reports of the groups done, partition by partition (raises what
        failed one)."""
        for slot in list(self._slots.values()):
            self._report_slot(slot)

    def _report_slot(self, slot: _Slot, *, commit: bool = True) -> None:
        """Take the reports of ``slot``'s groups done (raises what failed one), and
        commit the consumer offsets that went with them (on this thread: the reader's
        consumer is polled here, and a commit from a lane's thread stalled it for 90 s
        here)."""
        offsets = None
        for delivered in slot.lanes.finished():
            offsets = slot.offsets_after.popleft() or offsets
            group = slot.in_lanes.popleft()
            self._in_lanes -= len(group.items)
            for p in group.items:
                self._withheld.pop(p.record.key or b"", None)
            if delivered.write_ms:
                self._writes.append(delivered.write_ms)
                if len(group.items) >= ITEM_SAMPLE_LEAST:
                    self._item_writes.append((len(group.items), delivered.write_ms))
            self._delivered += delivered.delivered
            self.on_delivered(delivered)
            self._log_summary(delivered)
        if offsets is not None and commit and self._reader is not None:
            self._reader.commit(offsets)

    def _offsets(self, slot: _Slot, reader: InflightReader) -> list[TopicPartition] | None:
        """The consumer offsets of ``slot``'s partition to commit after its next group,
        now and then. Groups taken before commit before it, or fail it: these offsets
        pass no schedule that is not delivered by the time they are committed."""
        if time.monotonic() - slot.offsets_at < self.config.offsets_interval_ms / 1000:
            return None
        slot.offsets_at = time.monotonic()
        return reader.offsets({slot.partition})

    def _job(self, group: Group, slot: _Slot) -> Job:
        # A group that writes to an input partition (a re-arm, or a delivery to an input
        # topic): written while the group before waits for the watch to read that
        # partition, its open transaction would hold that wait, and the group before
        # hold its commit.
        ordered = self._paced_group(group) or self._writes_input(group)
        before = slot.settled if ordered else None
        settled = slot.settled = threading.Event()

        def done_writing() -> None:
            slot.writing.discard(id(group))

        def job(firer: TransactionalFirer, after_before: Callable[[], None]) -> Delivered:
            try:
                return self._deliver(group, firer, after_before, done_writing, before, settled)
            finally:
                settled.set()  # ended (failed ones too): the next group may write

        return job

    def _paced_group(self, group: Group) -> bool:
        """Whether ``group`` delivers to a rated topic (its writes wait for the group
        before it: :attr:`_Slot.settled`)."""
        if not self._pacer.rates:
            return False
        return any(self._pacer.rated(p.schedule.target_topic) for p in group.items)

    def _deliver(
        self,
        group: Group,
        firer: TransactionalFirer,
        after_before: Callable[[], None],
        done_writing: Callable[[], None],
        before: threading.Event | None,
        settled: threading.Event,
    ) -> Delivered:
        """Deliver one group (on a lane's thread); with ``before``, write only once it
        is set (the group before written for good), and set ``settled`` once this one
        is."""
        try:
            if before is not None:
                before.wait()  # set by that group's thread, whatever becomes of it
            while True:
                try:
                    return self._write(group, firer, after_before, done_writing, settled.set)
                except _Withdrawn:
                    log.debug("committer group due at %d: written again without what was "
                              "withheld meanwhile", group.commit_ms)  # fmt: skip
        finally:
            done_writing()

    def _write(
        self,
        group: Group,
        firer: TransactionalFirer,
        after_before: Callable[[], None],
        done_writing: Callable[[], None],
        settle: Callable[[], None],
    ) -> Delivered:
        """One attempt at a group: what is withheld by now is left out. Calls ``settle``
        when about to commit (it writes nothing more).

        Unless every target of the group may be written ahead (:meth:`_writes_ahead`),
        the group is written only once due, after the watch has read every input record
        acknowledged 20 ms before: no reader, ``read_uncommitted`` ones included, sees a
        delivery early or one that such a cancel or update ends. A group written ahead
        (or held back by a rate past its due time) reads the watch again 20 ms before
        its commit and raises :class:`_Withdrawn` (the transaction aborted) when more
        is withheld by then."""
        config = self.config
        ahead = self._writes_ahead(group, firer)
        if not ahead:
            self._wait_to_write(group)
        now = self.clock.now_ms()
        live, expired, withheld = self._split(group, now)

        def firing(p: Pending) -> Firing:
            return Firing(
                p.schedule,
                config.dead_letter_topic,
                config.history_topic,
                timestamp_ms=max(p.due_ms, now),
                forget=False,
            )

        # Live firings first: a refusal's position is then its item's in ``delivering``.
        delivering, records, rearms, skipped = self._turns(live, firing, now)

        began = self.clock.now_ms()
        marks: list[int] = [began]

        def written(placed: Placed) -> None:
            marks.append(self.clock.now_ms())
            done_writing()
            after_before()
            marks.append(self.clock.now_ms())
            # Written once due, it commits at once or, held by a rate, at its slot
            # (read the watch again before: a cancel read by then still wins). One that
            # writes to an input topic waited for its slot before the write: a read now
            # would wait for this very transaction.
            inputs = not ahead and self._writes_input(group)
            commit_ms = group.commit_ms if inputs else self._rate_commit_ms(group, live)
            again = ahead or commit_ms > group.commit_ms
            if again:
                self._wait_until(commit_ms - READ_AHEAD_MS)
                self._read_input_to_now()
            self._check_rearms(rearms, placed)
            self._wait_until(commit_ms)
            marks.append(self.clock.now_ms())
            if (again or rearms) and any(
                self._withheld.get(p.record.key or b"") is not None for p in live
            ):
                raise _Withdrawn
            settle()

        for p in expired:  # a recurring one ends: the fire stage wrote no tombstone for it
            records.extend(replace(firing(p), forget=self._recurs(p)).refused(EXPIRED))
        refused = firer.deliver(
            records,
            extra=[render_inflight_tombstone(p.record) for p in group.items],
            label=f"committer group of {len(group.items)} due at {group.commit_ms}",
            before_commit=written,
            track=[record for _, record in rearms],
        )
        done = self.clock.now_ms()
        if skipped:
            log.info("committer group due at %d: %d missed occurrence(s) skipped by their "
                     "catch-up policy", group.commit_ms, skipped)  # fmt: skip
        dead = [*((delivering[i], why) for i, why in sorted(refused.items()))]
        dead += [(p, EXPIRED) for p in expired]
        for p, reason in dead:
            log.info(
                "committer group due at %d: schedule %r (from %s) dead-lettered: %s",
                group.commit_ms,
                p.schedule.id,
                p.schedule.require_source().describe(),
                reason,
            )
        # Missed ones (past due when written) are late by their writer: counted apart.
        # Counted from the release time: what pacing adds is intended (its own figures).
        lateness = [
            done - p.release_ms + p.late_ms
            for i, p in enumerate(delivering)
            if i not in refused and not p.missed
        ]
        missed = sum(1 for i, p in enumerate(delivering) if i not in refused and p.missed)
        arrived_due = sum(1 for p in group.items if p.read_ms >= p.due_ms)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "group of %d due %d: write began %+d, written %+d, previous done %+d, "
                "wait done %+d, committed %+d ms (relative to its commit time)",
                len(group.items),
                group.commit_ms,
                *(m - self._host_time(group.commit_ms) for m in (*marks, done)),
            )
        return Delivered(
            delivered=len(lateness) + missed,
            refused=len(refused) + len(expired),
            lateness_ms=lateness,
            arrived_due=arrived_due,
            write_ms=marks[1] - began if len(marks) > 1 else 0,
            withheld=withheld,
        )

    def _turns(
        self, live: list[Pending], firing: Callable[[Pending], Firing], now: int
    ) -> tuple[list[Pending], list[Firing | OutgoingRecord], list[Rearmed], int]:
        """What ``live`` writes: (the pendings delivered, in the order of their firings,
        which come first in the records; the records; the re-armed pendings with their
        re-arm; missed occurrences skipped). A recurring schedule takes its turn
        (:func:`delayline.fire.recurring.take_turn`)."""
        delivering: list[Pending] = []
        records: list[Firing | OutgoingRecord] = []
        others: list[OutgoingRecord] = []
        rearms: list[Rearmed] = []
        skipped = 0
        for p in live:
            refusal = self._window_refusal(p)
            if refusal is not None:
                source = p.schedule.require_source().describe()
                log.info("committer: schedule %r (from %s) dead-lettered: %s",
                         p.schedule.id, source, refusal)  # fmt: skip
                # A recurring one ends: the fire stage wrote no tombstone for it.
                others.extend(replace(firing(p), forget=self._recurs(p)).refused(refusal))
                continue
            if not self._recurs(p):
                delivering.append(p)
                records.append(firing(p))
                continue
            turn = take_turn(firing(p), self._broker_time(now))
            delivering.extend(p for _ in turn.firings)
            records.extend(turn.firings)
            others.extend(turn.records)
            rearms.extend([(p, turn.rearm)] if turn.rearm is not None else [])
            skipped += turn.skipped
            if turn.reason is not None:
                source = p.schedule.require_source().describe()
                log.info("committer: schedule %r (from %s) dead-lettered: %s",
                         p.schedule.id, source, turn.reason)  # fmt: skip
        return delivering, [*records, *others], rearms, skipped

    def _recurs(self, p: Pending) -> bool:
        """Whether ``p`` is a recurring schedule (the committer re-arms or ends it)."""
        topology = self.config.topology
        if topology is None:
            return is_recurring(p.schedule.headers)
        return topology.recurs(p.schedule)

    def _wait_to_write(self, group: Group) -> None:
        """Wait until ``group`` may be written once due: its due time has passed, the
        watch having read the input 20 ms before. One that writes to an input topic
        (:meth:`_writes_input`) and is held by a rate waits for its slot too (open until
        then, its transaction would hold every group's read of that partition)."""
        self._wait_until(group.commit_ms - READ_AHEAD_MS)
        self._read_input_to_now()
        self._wait_until(group.commit_ms)
        if not self._writes_input(group):
            return  # a rate's slot, if any, is its commit time (:meth:`_write`)
        paced_ms = self._rate_commit_ms(group, self._split(group, self.clock.now_ms())[0])
        if paced_ms > group.commit_ms:
            self._wait_until(paced_ms - READ_AHEAD_MS)
            self._read_input_to_now()
            self._wait_until(paced_ms)

    def _writes_ahead(self, group: Group, firer: TransactionalFirer) -> bool:
        """Whether ``group`` may be written before it is due: every target of it is named
        by :attr:`CommitterConfig.write_ahead_topics` and known not to be stamped on
        append (unknown facts count as stamped: better late than stamped early), and it
        writes to no input topic (:meth:`_writes_input`: held open ahead, such a record
        would hold the watch of every group due before it until its commit)."""
        pattern = self.config.write_ahead_topics
        if pattern is None or self._writes_input(group):
            return False
        return all(
            _may_write_ahead(p.schedule.target_topic, pattern, firer.topics) for p in group.items
        )

    def _writes_input(self, group: Group) -> bool:
        """Whether ``group``'s transaction writes to an input topic (which the watch of
        every group waits to have read): a recurring schedule's re-arm or end, or a
        delivery to an input topic."""
        topology = self.config.topology
        inputs = () if topology is None else topology.input_topics
        return any(self._recurs(p) or p.schedule.target_topic in inputs for p in group.items)

    def _rate_commit_ms(self, group: Group, live: list[Pending]) -> int:
        """When ``group`` commits (broker time): at its commit time, or later when the
        rates of ``live``'s target topics hold it back
        (:meth:`delayline.fire.pacing.Pacer.commit_at`; taken on a lane's thread, before
        the watch's last read, so a cancel written meanwhile still wins)."""
        if not self._pacer.rates:
            return group.commit_ms  # no rate set (the usual case): nothing to count
        counts = Counter(p.schedule.target_topic for p in live)
        if not any(self._pacer.rated(topic) for topic in counts):
            return group.commit_ms
        partition = group.items[0].record.partition
        wanted = max(self.clock.now_ms(), self._host_time(group.commit_ms))
        at = self._pacer.commit_at(partition, counts, wanted)
        return max(group.commit_ms, self._broker_time(at))

    def _windowed(self, schedule: Schedule) -> bool:
        """Whether ``schedule``'s window header counts (it came in by the header contract)."""
        topology = self.config.topology
        if topology is None:
            return has_window(schedule.headers)
        return topology.windowed(schedule)

    def _window_refusal(self, p: Pending) -> str | None:
        """Why ``p``'s window is refused (it is dead-lettered), if it is."""
        if not self._windowed(p.schedule):
            return None
        try:
            window_of(p.schedule.headers)
        except WindowError as exc:
            return f"{WINDOW_REFUSED}: {exc}"
        return None

    def _split(self, group: Group, now_ms: int) -> tuple[list[Pending], list[Pending], int]:
        """(to deliver, expired, how many withheld) of ``group`` at ``now_ms``."""
        limit = self.config.max_lateness_ms
        live: list[Pending] = []
        expired: list[Pending] = []
        withheld = 0
        for p in group.items:
            if self._withheld.get(p.record.key or b"") is not None:
                withheld += 1
            elif limit is not None and now_ms - p.release_ms + p.late_ms > limit:  # pacing: none
                expired.append(p)
            else:
                live.append(p)
        return live, expired, withheld

    def _write_ahead_ms(self) -> int:
        """How long before its commit the next group is written."""
        least = self.config.write_ahead_ms
        if not self._writes:
            # Nothing measured yet, and a fresh producer's first transaction is the
            # slowest (67 ms here, against 4 ms later): the most, until measured.
            return self.config.max_write_ahead_ms
        # The slowest recent write: the p90 left one group in ten late on a busy host.
        return min(max(self._writes) + least, self.config.max_write_ahead_ms)

    def _wait_until(self, due_ms: int) -> None:
        """Sleep until ``due_ms`` has passed by the broker's clock."""
        remaining = self._host_time(due_ms) - self.clock.now_ms()
        if remaining > 0:
            time.sleep(remaining / 1000)

    def _host_time(self, broker_ms: int) -> int:
        """The host time by which ``broker_ms`` has surely passed on the broker."""
        return broker_ms - self._offset.low_ms

    def _broker_time(self, host_ms: int) -> int:
        return host_ms + self._offset.low_ms

    def _log_summary(self, delivered: Delivered) -> None:
        self._summary.extend(delivered.lateness_ms)
        self._arrived_due += delivered.arrived_due
        self._summary_withheld += delivered.withheld
        if time.monotonic() - self._summary_at < SUMMARY_MS / 1000:
            return
        late = sorted(self._summary)
        if late or self._summary_withheld:
            log.info(
                "committer: delivered %d in %d s, lateness p50 %d ms, p99 %d ms, max %d ms; "
                "%d withheld by a later cancel or update; %d handed over already due; "
                "%d pending",
                len(late),
                SUMMARY_MS // 1000,
                late[len(late) // 2] if late else 0,
                late[min(len(late) - 1, len(late) * 99 // 100)] if late else 0,
                late[-1] if late else 0,
                self._summary_withheld,
                self._arrived_due,
                len(self._plan),
            )
        self._summary = []
        self._arrived_due = 0
        self._summary_withheld = 0
        self._summary_at = time.monotonic()


def _may_write_ahead(topic: str, pattern: str | None, topics: TopicCatalog) -> bool:
    """Whether deliveries to ``topic`` may be written before they are due: ``pattern``
    (``--write-ahead``) names it and the broker is known not to stamp it on append."""
    if not topic_matches(topic, pattern):
        return False
    facts = topics.cached(topic)
    return facts is not None and not facts.log_append_time


def _warm_all(lanes: list[Lanes], targets: set[str]) -> None:
    """Warm ``targets`` in every partition's producers (on the lookups thread: a lane
    closed meanwhile, its partition revoked, fails only this lookup)."""
    for lane in lanes:
        lane.warm(targets, WARM_AHEAD_MS)


def _close_opened(future: Future[_Slot]) -> None:
    """Close the lanes of a slot opened for a partition no longer owned."""
    if future.exception() is None:
        future.result().lanes.close()
