"""A committer's settings and what it tells of itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from delayline.committer.later import HOT_RECORDS, MEMORY_MS
from delayline.committer.pacing import TargetPacing
from delayline.contract.pacing import TargetRates
from delayline.contract.topology import Topology

RUN_COMMITTER_NAME = "pipeline"
"""The name of the committer ``delayline run`` keeps in its process."""


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
            transaction (and wait for its latest due time), unless the partition is
            busy (``busy_group_width_ms``).
        busy_group_width_ms: The width of an in-flight partition's groups instead,
            while at least ``busy_group_size`` of its schedules are released within it
            of the first (counted in 10 ms buckets: within 10-20 ms by default, about
            200-400 a second and more): fewer transactions, each of which costs the
            broker about 2 ms of CPU (1,000 deliveries a second took 46-52% of a broker
            core in groups of 5 ms, 17% in groups of 20 ms); a schedule waits at most
            this for the latest of its group. At most ``group_width_ms``: off.
        busy_group_size: See ``busy_group_width_ms``.
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
            (:mod:`delayline.committer.lanes`).
        max_lateness_ms: Later than this, a schedule is dead-lettered as ``expired``
            instead of delivered (as the hold does); ``None``: never.
        allowed_targets: ``--allowed-target-topics``: deliveries to other topics are
            dead-lettered.
        topology: The input topics and their contracts: a later cancel or update read
            there withholds a handed-over schedule (:mod:`delayline.committer.watch`).
            ``None`` reads none: every handed-over schedule is delivered.
        checkpoint_dir: The pipeline's checkpoint: after a restart the watch reads the
            input from where the batches that may hand over again stopped reading, and
            it forgets a record only once the pipeline has read it.
        watch_memory_ms: The least time the watch remembers a record that ends a
            version (:data:`delayline.committer.later.MEMORY_MS`).
        watch_hot_records: How many of those it keeps as objects at most; the rest
            in columns (:data:`delayline.committer.later.HOT_RECORDS`).
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
            a slot of it (:mod:`delayline.committer.pacing`); every committer of the
            pipeline must be given the same.
        write_ahead_topics: ``--write-ahead``: a regular expression of the target topics
            (matched as a whole) whose groups may be written before they are due and
            committed at the due time: bursts on time, small groups a few milliseconds
            sooner. A ``read_uncommitted`` reader of such a topic sees a delivery up to
            that much early (a burst: seconds), and sees what a cancel read after the
            write withholds (its transaction is aborted and written again). ``None``:
            every group is written once due, after the watch has read the input to
            20 ms before it, so no reader sees anything early or cancelled.
        notice_topic: The pipeline's notice rules topic
            (:func:`~delayline.core.identifiers.notice_topic`): the committer delivers
            itself the short-notice versions of its in-flight partitions, which the hold
            never holds (:mod:`delayline.committer.short_intake`); needs ``topology``.
            ``None``: it takes none (every committer of a pipeline whose rules give a
            notice must take them).
    """

    bootstrap_servers: str
    inflight_topic: str
    commits_topic: str
    transactional_id: str
    dead_letter_topic: str
    history_topic: str | None = None
    group_width_ms: int = 5
    busy_group_width_ms: int = 10
    busy_group_size: int = 4
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
    watch_hot_records: int = HOT_RECORDS
    name: str = RUN_COMMITTER_NAME
    session_timeout_ms: int = 10_000
    first_assignment_timeout_s: float = 15.0
    target_rates: TargetRates = field(default_factory=TargetRates)
    write_ahead_topics: str | None = None
    notice_topic: str | None = None


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
        remembered: Input records (cancels, versions) its watch remembers
            (:mod:`delayline.committer.watch`): what it read of the input lately, and
            everything the pipeline has not read yet.
        reviews_written: Review tombstones its watch wrote since it started
            (:mod:`delayline.committer.reviews`).
        reviews_dropped: Review tombstones Kafka refused for good since it started.
    """

    name: str
    partitions: tuple[int, ...]
    pending: int
    delivered: int
    pacing: tuple[tuple[str, TargetPacing], ...] = ()
    remembered: int = 0
    reviews_written: int = 0
    reviews_dropped: int = 0
