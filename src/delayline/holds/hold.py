"""The hold seam: the one interface the pipeline calls, whatever holds the schedules.

A hold keeps each pending schedule until its due time and then hands it to the fire
stage. :mod:`delayline.pipeline.job` calls only what is here; adding a hold means a
new :class:`Hold` subclass and its entry in :data:`delayline.holds.registry.HOLD_KINDS`,
never a change outside ``holds/``.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from delayline.holds.registry import hold_kind

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import TypeAlias

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from delayline.contract.notice import NoticeRules
    from delayline.contract.pacing import TargetRates
    from delayline.contract.topology import Topology

    MakeEvents: TypeAlias = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
    """A partition's hold events made from its records, in its Python task
    (:meth:`Hold.python_events`)."""
    PythonEvents: TypeAlias = tuple[DataFrame, MakeEvents]
    """The frame to map and what makes each partition's events."""


class RunSettings(Protocol):
    """What the holds and the fire stage read of the pipeline's settings
    (:class:`delayline.pipeline.config.PipelineConfig` is one; see it for each field)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def topology(self) -> Topology: ...
    @property
    def checkpoint_dir(self) -> Path: ...
    @property
    def query_name(self) -> str: ...
    @property
    def lead_ms(self) -> int: ...
    @property
    def max_lateness_ms(self) -> int | None: ...
    @property
    def shuffle_partitions(self) -> int: ...
    @property
    def max_offsets_per_trigger(self) -> int: ...
    @property
    def hold(self) -> str: ...
    @property
    def hold_settings(self) -> Any: ...
    @property
    def transactional_id(self) -> str: ...
    @property
    def inflight_topic_name(self) -> str: ...
    @property
    def inflight_partitions(self) -> int: ...
    @property
    def target_rates(self) -> TargetRates: ...


class Deliver(Protocol):
    """The fire stage, for a hold that finishes another run's batch (the Redis hold's
    take-over).

    It delivers ``events`` (an Arrow table of :data:`delayline.contract.events.EVENT_SCHEMA`
    rows) as ``run``'s batch ``batch_id`` of ``partition``, with ``settings`` (that run's
    topics and timing) and that partition's ``transactional_id``, exactly once: a batch
    its run already committed is not written again.

    Returns:
        What was done, for the log.
    """

    def __call__(
        self,
        events: pa.Table,
        settings: RunSettings,
        partition: int,
        batch_id: int,
        run: str,
        transactional_id: str,
    ) -> str: ...


class Hold(abc.ABC):
    """Where pending schedules wait.

    Guarantees every hold gives (the shared hold suite, ``tests/unit/holds``, checks
    the rules against each one):

    - It applies the rules of :mod:`delayline.holds.fold` per (schedules topic,
      schedule id): newer wins, a tombstone cancels, delayline's own tombstones never
      cancel a newer version, a version hidden from compaction is rewritten, due on
      arrival fires, max lateness expires.
    - A schedule is handed to the fire stage (a RAISE or expired DEAD event) only at or
      after its due time, and once per version, unless the batch that did so is
      replayed; a replayed batch yields the same events.
    - :attr:`durable` holds survive a crash or restart with every pending schedule;
      others lose them (tests and trying things out only).

    The pipeline calls, in order: :meth:`stage` once to build the streaming query;
    per micro-batch :meth:`python_events` or, when that gives none, :meth:`batch_events`,
    then the fire stage fires the events on the executors, then (unless the whole batch
    was a replay) :meth:`after_commit`.
    :meth:`pending_due_times` runs once after a start, beside the first batches;
    :meth:`wake_times` after every batch; :meth:`close` once at the stop.
    """

    name: ClassVar[str]
    """What ``delayline run --hold`` calls it."""
    durable: ClassVar[bool]
    """Pending schedules survive a crash of the pipeline."""
    wakes_itself: ClassVar[bool] = False
    """Its own source starts a micro-batch when pending schedules need one (the bucket
    hold's ready copies): the waker is given none of its timers."""
    finished_by_others: ClassVar[bool] = False
    """Another process may commit this pipeline's batches (the Redis hold's take-over):
    a producer new to a partition then reads the markers before writing."""

    def __init__(self, config: RunSettings, deliver: Deliver | None = None) -> None:
        self.config = config
        self.deliver = deliver
        """The fire stage, for a hold that finishes others' batches (given by the
        pipeline; ``None`` in tests of the rules)."""
        self.tombstone_mark: str | None = None
        """Set by a :meth:`stage` that drops before the shuffle delayline's own
        tombstones its start handed over: the mark (new each start) the fire stage puts
        on them (:data:`delayline.contract.headers.PLAN`). Sound because the rules make
        such a tombstone change nothing here: the version it names was raised, so no
        longer held, by a batch of this start (one replayed within the start raises it
        again, the same way); what it could still do, hide from compaction a version of
        its id that landed before it (a newer one, or a copy read back late), the
        committer's watch sees and asks the hold to read
        (:data:`delayline.contract.headers.REVIEW`), and it asks too when it cannot
        tell (the version is older than what it read: a rebuild, a catch-up).
        ``None``: every tombstone is read, none is marked."""
        self.notice: NoticeRules | None = None
        """The notice rules (:mod:`delayline.contract.notice`), set before :meth:`stage`
        by a pipeline whose committers hand short-notice versions over; a hold that
        honours them (memory, JVM) holds none of those. ``None``: every version is held."""

    @abc.abstractmethod
    def stage(self, records: DataFrame) -> DataFrame:
        """The streaming stage between the source and the fire stage.

        Args:
            records: The schedules topics as read (columns ``topic``, ``gkey`` (the key,
                never null), ``key``, ``value``, ``partition``, ``offset``,
                ``timestamp_ms``, ``headers``).

        Returns:
            The stream :meth:`batch_events` receives one micro-batch of.
        """

    @abc.abstractmethod
    def batch_events(self, frame: DataFrame, batch_id: int) -> DataFrame:
        """This micro-batch's hold events, of :data:`delayline.contract.events.EVENT_SCHEMA`.

        The fire stage evaluates the result once, partition by partition on the
        executors, and keys each partition's transaction and marker by its index: a
        replayed batch must yield the same events in the same partition index. So the
        index must follow the content (a hash of (topic, schedule id), as the stateful
        operator's shuffle and the Redis hold's repartition give), never the order in
        which Spark lists the source's partitions, which may change on a replay.
        """

    def python_events(self, frame: DataFrame, batch_id: int) -> PythonEvents | None:
        """This micro-batch's events made by Python on the executors, for the fire stage
        to fire in the same Python task: one Python worker a task instead of two, and the
        events never cross to the JVM and back. When it gives them, the pipeline calls
        this instead of :meth:`batch_events`; the events keep every guarantee
        :meth:`batch_events` states.

        Returns:
            ``None`` (the default), having done nothing (:meth:`batch_events` follows,
            and must be the only one to do the batch's bookkeeping). Or the frame each of
            whose partitions is one task, its index following the content as
            :meth:`batch_events` requires, and the function that makes a partition's
            events (Arrow record batches of
            :data:`delayline.contract.events.EVENT_SCHEMA`) from its records.
        """
        del frame, batch_id
        return None

    def pending_due_times(self, spark: SparkSession) -> list[int]:
        """Raise times (due time less the lead) of every schedule pending after a
        (re)start, for the waker.

        The default knows none: the waker then wakes every trigger interval until
        schedules arrive.
        """
        del spark
        return []

    def after_commit(self, batch_id: int) -> None:  # noqa: B027 - most holds need nothing
        """Called once the fire stage committed ``batch_id``'s output (not for a
        replay it skipped). The default does nothing."""

    def wake_times(self) -> list[int]:
        """Raise times to wake for, asked after each batch, beside the timers the
        batch's events set: for holds that hold schedules other pipelines planned.
        The default knows none."""
        return []

    def close(self) -> None:  # noqa: B027 - most holds hold nothing open
        """Called once when the pipeline stops. The default does nothing."""


def hold_for(config: RunSettings, deliver: Deliver | None = None) -> Hold:
    """The hold ``config.hold`` names (:data:`delayline.holds.registry.HOLD_KINDS`), with
    the fire stage ``deliver``.

    Raises:
        ConfigError: no hold has that name.
    """
    return hold_kind(config.hold).load()(config, deliver)
