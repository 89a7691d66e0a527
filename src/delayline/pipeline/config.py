"""Settings of the Spark pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delayline.contract.pacing import TargetRates
from delayline.contract.topics import allowed_targets_problem
from delayline.contract.topology import Topology
from delayline.core.identifiers import (
    inflight_topic,
    notice_topic,
    transactional_id,
    wake_topic,
)
from delayline.errors import ConfigError
from delayline.holds.registry import hold_kind
from delayline.pipeline.need import DEFAULT_RECORDS, DEFAULT_WAIT_MS

JIT_OPTIONS = {"c1": "-XX:TieredStopAtLevel=1", "full": ""}
"""Spark JVM options of the two JIT settings delayline measures: the first tier only
(C1), and the JVM's own tiered JIT (C1, then the optimising C2)."""
DEFAULT_JAVA_OPTIONS = JIT_OPTIONS["full"]
"""See :attr:`PipelineConfig.java_options`: the JVM's own tiered JIT, for a service that
runs for weeks."""
DEFAULT_LEAD_MS = 5_000
"""See :attr:`PipelineConfig.lead_ms`. Chosen by measurement (trickle bench, 2 cores): a
schedule is handed over at most two batches after its raise time (the batch running
then, and its own), and batches took up to 2.6 s; with 3 s, 9 of 600 were handed over
late; with 5 s, none."""
MAX_LEAD_MS = 60_000
DEFAULT_INFLIGHT_PARTITIONS = 1
"""See :attr:`PipelineConfig.inflight_partitions`: one, so a single machine delivers as
before; a cluster sets it to its number of committers. Each partition is delivered with
its own producers and transactions, and on this machine one committer owning more
partitions was less precise (``bench --scenario committer``, 1,000 and 2,000/s: p99
176-196 and 117-182 ms with one partition, 250 and 250 ms with two, 350 and 433 ms with
four) and cost more idle CPU (4.2% of a core with one, 8.4% with four)."""
MAX_INFLIGHT_PARTITIONS = 256
DELIVER_FIRST_READY_MS = 10_000
"""See :attr:`PipelineConfig.deliver_first`: how long Spark's start waits for the committer
to read its partitions and, with a watch, the input since the hand-overs (3.7 s from its
start after a SIGKILL here, alone; under a full test suite's load, deliveries due 5.8 s
after a kill came up to 435 ms late, as when Spark starts beside them) before it starts
anyway."""
DELIVER_FIRST_MAX_MS = 10_000
"""See :attr:`PipelineConfig.deliver_first`: the longest Spark's start waits for the
committer's deliveries (a longer lead leaves the rest to be delivered beside Spark)."""
BATCH_ALLOWANCE_MS = 2_000
"""What a batch at a trickle takes here (0.6-2.6 s measured): a raise waits for the next
trigger and then for its batch, so a lead shorter than the trigger interval plus this
hands schedules over late."""
OWN_SPARK_SETTINGS = {
    "spark.master": "--master",
    "spark.sql.shuffle.partitions": "--shuffle-partitions (frozen in the checkpoint)",
    "spark.driver.memory": "--driver-memory-mb",
    "spark.executor.memory": "--executor-memory-mb",
    "spark.sql.streaming.stateStore.providerClass": "nothing: the holds need RocksDB",
    "spark.sql.streaming.checkpointFileManagerClass": "nothing: delayline relies on it",
}
"""Spark settings ``--spark-conf`` may not change, and what does instead."""
OWN_WAKER = "own"
OSCILLATOR_WAKER = "oscillator"
WAKERS = (OWN_WAKER, OSCILLATOR_WAKER)
DEFAULT_OSCILLATOR_TOPIC = "oscillator"


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """What ``delayline run`` runs.

    Attributes:
        topology: The cluster and the topics read (schedules) and written (dead
            letters, history, commit markers).
        checkpoint_dir: Spark checkpoint: offsets, state, commit log.
        master: Spark master URL: ``local[N]`` runs everything in the driver's JVM;
            ``spark://host:port`` (a standalone cluster, see :mod:`delayline.pipeline.placement`)
            runs the state and the fire tasks on its executors.
        trigger_interval_ms: Micro-batch interval. Timers fire at batch
            boundaries, so this bounds lateness; smaller costs idle CPU.
        shuffle_partitions: Partitions of the state, each fired by its own task; about
            one per core (a batch's tasks then run in one wave). Frozen in the checkpoint.
        max_lateness_ms: Dead-letter schedules later than this; ``None`` fires all.
        query_name: Name of the streaming query; part of the transactional id.
        driver_memory_mb: JVM heap of the Spark driver (local mode runs all there).
        executor_memory_mb: JVM heap of each executor (a cluster master only).
        progress_file: Append one JSON line per micro-batch here (for tools); ``None``: off.
        metrics_port: Serve Prometheus ``/metrics`` and JSON ``/progress`` on this port
            (0: any free port); ``None``: off.
        metrics_host: Address the metrics server listens on.
        wake: Run a micro-batch only when a timer is due, a record arrives or a
            heartbeat passes (:mod:`delayline.pipeline.wake`); False runs one every
            trigger interval, as Spark does by default (costs idle CPU).
        wake_topic: Topic of the wake records; ``None``: ``<query_name>-wake``, or
            ``oscillator`` with the oscillator waker.
        waker: Who writes the wake records: ``own`` (the pipeline, when a timer is due)
            or ``oscillator`` (``delayline oscillator``, or the durable timers design's
            own, ticking ``wake_topic`` every second; the pipeline writes nothing there).
            With an oscillator a micro-batch runs every second whatever is due, and
            timers are raised at the next tick after their raise time (up to a second
            later; within the lead, so deliveries stay on time).
        heartbeat_interval_ms: With ``wake``, the longest time without a micro-batch (a
            backstop: readiness follows the batches the waker needs, not this).
        hold: Where pending schedules wait: the name of an entry of
            :data:`delayline.holds.registry.HOLD_KINDS` (each says what it is).
        hold_settings: The hold's own settings, of its entry's ``settings`` class;
            ``None``: its defaults.
        max_offsets_per_trigger: Cap on records read per micro-batch. Timers fire only
            between batches, so a cap bounds lateness while a backlog is read.
        lead_ms: The hold hands a schedule to the fire stage this long before its due
            time; the committer (:mod:`delayline.committer.service`) delivers it at the due
            time itself. It must cover two micro-batches (the one running at the raise
            time, then the one that raises it): a schedule handed over later than its due
            time is late by the difference. 0 fires when due,
            in the batch that finds it due. A cancel must arrive before the lead starts.
        inflight_partitions: Partitions of the in-flight topic (created with them, grown
            to them at the start, never shrunk): the committers of the pipeline's group
            split them, so this is how many committers can share precise delivery.
        engine_nice: Added to the niceness of Spark's JVM and its Python workers: when
            the engine keeps the cores busy, the committer's deliveries (this process)
            and a broker on the same host still get the CPU on time (trickle p99 96 and
            122 ms without, 68 ms with, measured here). 0 leaves it as this process's.
        deliver_first: Start Spark only once the committer of this process has delivered
            what was handed over before the start (everything it holds is due within the
            lead, so this waits the lead at most, and :data:`DELIVER_FIRST_MAX_MS`, after
            up to :data:`DELIVER_FIRST_READY_MS` for the committer to read it): Spark's
            start on the same cores made those deliveries 173-364 ms late here, against
            27 ms at most with it after them. New schedules wait as long for the
            pipeline to read them.
        spark_conf: Further Spark settings of the session, as (key, value) pairs,
            applied over delayline's own (:data:`OWN_SPARK_SETTINGS` excepted).
        java_options: Extra options of Spark's JVM. The default (none) keeps the JVM's
            tiered JIT, the cheaper one once warm: after five minutes of work the steady
            scenario took 3,862 schedules/s at 323 us of CPU each (the JVM 156) with it,
            against 3,642/s at 351 us (the JVM 198) with the first tier only
            (``-XX:TieredStopAtLevel=1``); the hold alone ran 2.4 times as fast
            (``delayline bench --scenario ladder``). Its optimising compiler costs CPU
            in a JVM's first minutes: a fresh pipeline's trickle took 43.2% of a core
            against 30.7% with the first tier only, and a restart with 1,000 pending was
            ready after 22.9 s against 15.9-18.6 (its first batch 8.4 s against 6.0-7.6).
            ``--java-options=-XX:TieredStopAtLevel=1`` suits pipelines that live minutes
            (the test suite's) or restart often.
        target_rates: Deliveries to a target topic beyond its rate wait, in the order
            they are due (:mod:`delayline.committer.pacing`); a schedule to a rated topic goes
            through the committer whatever the lead.
        outage_timeout_ms: How long the pipeline rides out a failure that waiting may
            cure (Kafka away: a fire task's transaction or Spark's Kafka source timed
            out) by starting the streaming query again, before it exits with the error.
            Timed from the first failure after a completed batch; 0 exits at once.
            Nothing is lost either way: the failed batch is replayed.
        write_ahead_topics: ``--write-ahead``: a regular expression (matched against
            the whole name) of the target topics whose deliveries a committer may write
            before their due time, in a transaction it commits at the due time (bursts
            on time; see
            :attr:`delayline.committer.config.CommitterConfig.write_ahead_topics`).
            Only for targets whose every consumer reads ``read_committed``: a
            ``read_uncommitted`` reader sees such a delivery early. ``None`` (the
            default): every delivery is written once due.
        batch_on_input: Run a micro-batch whenever the input moves (each of delayline's
            own tombstones included), as Spark does, instead of only when the work needs
            one (:mod:`delayline.pipeline.need`: a timer to raise, a new schedule to read
            before its due time, ``batch_records`` unread, one waiting ``batch_wait_ms``).
            Batching on need takes the waker of this pipeline (``wake``, ``own``).
        batch_wait_ms: The longest a new input record (a cancel, a schedule due later)
            waits for a micro-batch when batching on need.
        batch_records: New input records that call for a micro-batch at once when
            batching on need.
    """

    topology: Topology = field(default_factory=Topology)
    checkpoint_dir: Path = field(default_factory=lambda: Path(".delayline/checkpoint"))
    master: str = "local[2]"
    trigger_interval_ms: int = 1000
    shuffle_partitions: int = 2
    max_lateness_ms: int | None = None
    query_name: str = "delayline"
    driver_memory_mb: int = 1024
    executor_memory_mb: int = 1024
    progress_file: Path | None = None
    max_offsets_per_trigger: int = 20_000
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    wake: bool = True
    wake_topic: str | None = None
    heartbeat_interval_ms: int = 300_000
    hold: str = "jvm"
    java_options: str = DEFAULT_JAVA_OPTIONS
    spark_conf: tuple[tuple[str, str], ...] = ()
    lead_ms: int = DEFAULT_LEAD_MS
    inflight_partitions: int = DEFAULT_INFLIGHT_PARTITIONS
    engine_nice: int = 10
    deliver_first: bool = True
    waker: str = OWN_WAKER
    hold_settings: Any = None
    outage_timeout_ms: int = 300_000
    target_rates: TargetRates = field(default_factory=TargetRates)
    write_ahead_topics: str | None = None
    batch_on_input: bool = False
    batch_wait_ms: int = DEFAULT_WAIT_MS
    batch_records: int = DEFAULT_RECORDS

    def __post_init__(self) -> None:
        if not 0 <= self.lead_ms <= MAX_LEAD_MS:
            raise ConfigError(
                f"lead {self.lead_ms} ms is outside 0..{MAX_LEAD_MS} ms: a schedule is handed "
                "to the committer that long before it is due, after which a cancel no longer "
                "stops it and it waits in the committer's memory; a batch rarely takes more "
                "than a few seconds, so a longer lead buys nothing"
            )
        _check_spark_conf(self.spark_conf)
        if self.waker not in WAKERS:
            raise ConfigError(f"unknown waker {self.waker!r}: choose one of {', '.join(WAKERS)}")
        if self.waker == OSCILLATOR_WAKER and not self.wake:
            raise ConfigError(
                "--no-wake runs a batch every trigger interval: drop --waker oscillator"
            )
        if not 1 <= self.inflight_partitions <= MAX_INFLIGHT_PARTITIONS:
            raise ConfigError(
                f"in-flight partitions must be within 1..{MAX_INFLIGHT_PARTITIONS}, "
                f"not {self.inflight_partitions}"
            )
        if self.trigger_interval_ms < 0 or self.shuffle_partitions < 1:
            raise ConfigError("trigger interval must be >= 0 and shuffle partitions >= 1")
        if self.max_lateness_ms is not None and self.max_lateness_ms < 0:
            raise ConfigError("max lateness must not be negative")
        self._check_intervals()
        self._check_hold()
        self._check_write_ahead()
        if self.wake and self.wake_topic_name in self.topology.input_topics:
            raise ConfigError(
                "the wake topic must not be a schedules, envelope or timer-request topic"
            )

    def _check_intervals(self) -> None:
        if self.heartbeat_interval_ms < 1_000:
            raise ConfigError("heartbeat interval must be at least 1 s")
        if self.outage_timeout_ms < 0:
            raise ConfigError("outage timeout must not be negative")
        if self.batch_wait_ms < 0 or self.batch_records < 1:
            raise ConfigError("batch wait must be >= 0 and batch records >= 1")

    def _check_write_ahead(self) -> None:
        pattern = self.write_ahead_topics
        if pattern is not None and (problem := allowed_targets_problem(pattern)):
            raise ConfigError(f"--write-ahead {pattern!r}: {problem}")

    def _check_hold(self) -> None:
        kind = hold_kind(self.hold)
        if self.hold_settings is None:
            object.__setattr__(self, "hold_settings", kind.default_settings())
        elif kind.settings is None or not isinstance(self.hold_settings, kind.settings):
            raise ConfigError(
                f"the {self.hold} hold takes no {type(self.hold_settings).__name__} settings"
            )
        if kind.needs_waker and not self.wake:
            # Its query keeps no Spark state, so Spark runs no batch without input.
            raise ConfigError(f"the {self.hold} hold needs the waker: drop --no-wake")

    def lead_warning(self) -> str | None:
        """Why deliveries may be late with this lead and trigger interval, if they may."""
        needed = self.trigger_interval_ms + BATCH_ALLOWANCE_MS
        if self.lead_ms == 0 or self.lead_ms >= needed:
            return None
        return (
            f"the lead ({self.lead_ms} ms) is shorter than the trigger interval "
            f"({self.trigger_interval_ms} ms) plus a batch's time ({BATCH_ALLOWANCE_MS} ms "
            f"allowed): a schedule can be handed over after its due time; set --lead to "
            f"{needed} ms or more"
        )

    @property
    def gated(self) -> bool:
        """Whether micro-batches run only when the work needs one (the source is gated,
        :mod:`delayline.pipeline.need`)."""
        return self.wake and self.waker == OWN_WAKER and not self.batch_on_input

    @property
    def wake_topic_name(self) -> str:
        """The topic wake records go to (an oscillator's, with that waker)."""
        if self.wake_topic:
            return self.wake_topic
        if self.waker == OSCILLATOR_WAKER:
            return DEFAULT_OSCILLATOR_TOPIC
        return wake_topic(self.query_name)

    @property
    def inflight_topic_name(self) -> str:
        """The topic schedules handed to the committer go to (:mod:`delayline.fire.inflight`)."""
        return inflight_topic(self.query_name)

    @property
    def notice_topic_name(self) -> str:
        """The topic of the notice rules (:mod:`delayline.kafka.notice_store`)."""
        return notice_topic(self.query_name)

    @property
    def source_topics(self) -> tuple[str, ...]:
        """Every topic the streaming query reads: the input topics (every contract's),
        the wake topic."""
        if not self.wake:
            return self.topology.input_topics
        return (*self.topology.input_topics, self.wake_topic_name)

    @property
    def transactional_id(self) -> str:
        """Stable across restarts of this pipeline, distinct between pipelines."""
        return transactional_id(self.query_name)


def _check_spark_conf(pairs: tuple[tuple[str, str], ...]) -> None:
    for key, _ in pairs:
        if key in OWN_SPARK_SETTINGS:
            raise ConfigError(f"--spark-conf {key}: set it with {OWN_SPARK_SETTINGS[key]}")


def spark_conf_from(flags: list[str] | None, env: str) -> tuple[tuple[str, str], ...]:
    """``--spark-conf KEY=VALUE`` flags (or, without any, the comma-separated variable's
    items) as pairs.

    Raises:
        ConfigError: an item without ``=`` or with an empty key.
    """
    items = flags if flags else [item for item in env.split(",") if item.strip()]
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--spark-conf {item!r}: write KEY=VALUE")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


def spark_progress_file(progress_file: Path) -> Path:
    """Where Spark's own progress of each batch goes beside ``--progress-file``: one JSON
    line per batch, with ``durationMs`` (Spark's breakdown of the batch time) and the
    state operators' figures (rows, commit and update times)."""
    return progress_file.with_name(progress_file.name + ".spark")


def batch_work_ms(duration_ms: dict[str, int]) -> int | None:
    """What a micro-batch took (Spark's ``durationMs`` of its progress report): its
    ``triggerExecution`` less the source's ``latestOffset``, where the gated source waits
    up to :data:`~delayline.pipeline.source.GATE_WAIT_MS` for the waker to open its gate
    (a trigger that began waiting before the gate opened would count that wait).
    ``None`` when Spark gave no time."""
    total = duration_ms.get("triggerExecution")
    if total is None:
        return None
    return max(total - duration_ms.get("latestOffset", 0), 0)
