"""The Redis hold: pending schedules in a Redis sorted set, fired exactly once by any
number of pipelines sharing it.

Per micro-batch, on the driver: a heartbeat, the release of this run's task records
that Spark will never replay (batches before this one), and the take-over of task
records left by a pipeline that went silent. Then the batch's records are
hash-partitioned by (topic, schedule id) into the run's fixed number of tasks, and
every task runs one script in Redis (:meth:`.store.RedisStore.run_task`): its records
applied, the due schedules claimed, its decision recorded for a replay. The events go
through the same fire stage as every hold's: one Kafka transaction per task with its
marker.

The task record and the fire marker are both keyed by the task's partition index, so
a replayed batch must put each record in the same index. The Kafka source does not
promise that (after a restart it may list the topic-partitions in another order); a
hash of the record's own (topic, schedule id) does.

A silent pipeline's open task records (lease ended, no heartbeat for a lease) are
finished by another pipeline *as their owner*: see :mod:`.takeover`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from delayline.contract import ConsumedRecord
from delayline.contract.contracts import InputParser
from delayline.contract.topology import Topology
from delayline.core.arrow_workers import refuse_pandas
from delayline.core.clock import SystemClock
from delayline.core.faults import REDIS_AFTER_RECORD, REDIS_BEFORE_RECORD, pause_at
from delayline.core.identifiers import checkpoint_query_id, redis_txn_claim, run_id
from delayline.core.logs import log_to_stderr
from delayline.core.timing import warn_if_slow
from delayline.errors import ConfigError
from delayline.holds.fold import raise_ms
from delayline.holds.hold import Deliver, Hold, RunSettings
from delayline.holds.redis.config import RedisHoldConfig
from delayline.holds.redis.store import RedisStore
from delayline.holds.redis.takeover import owner_json, take_over
from delayline.holds.registry import settings_of

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from delayline.holds.hold import PythonEvents


log = logging.getLogger(__name__)

EVENT_DDL = (
    "kind STRING, id STRING, src_topic STRING, src_partition INT, src_offset BIGINT, "
    "src_timestamp_ms BIGINT, key BINARY, value BINARY, headers BINARY, target_topic STRING, "
    "target_key BINARY, due_ms BIGINT, reason STRING, at_ms BIGINT"
)
WAKE_AHEAD = 1_000
"""Due times read at a start for the waker (the next ones come after each batch)."""


class TopicTakenError(ConfigError):
    """Another live pipeline reads one of this pipeline's input topics, or runs under
    its query name, through the same Redis prefix: two readers would apply every record
    twice; two pipelines of one query name fence each other's transactions."""


@dataclass(frozen=True, slots=True)
class TaskJob:
    """What each Spark task of one batch needs (shipped with the task)."""

    redis: RedisHoldConfig
    topology: Topology
    lead_ms: int
    max_lateness_ms: int | None
    run: str
    owner: str
    batch_id: int
    now_ms: int


class RedisHold(Hold):
    """Pending schedules in Redis: durable, shared by every pipeline of one prefix."""

    name: ClassVar[str] = "redis"
    durable: ClassVar[bool] = True
    finished_by_others: ClassVar[bool] = True

    def __init__(self, config: RunSettings, deliver: Deliver | None = None) -> None:
        if deliver is None:
            raise ConfigError("the Redis hold needs the fire stage, to take over batches")
        super().__init__(config, deliver)
        self.deliver: Deliver = deliver
        self.settings = settings_of(config, RedisHoldConfig)
        self._store: RedisStore | None = None
        self._run: str | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._told_claimers = False

    @property
    def store(self) -> RedisStore:
        """The driver's store (connected on first use)."""
        if self._store is None:
            config = self.config
            self._store = RedisStore(
                self.settings, InputParser(config.topology), config.lead_ms, config.max_lateness_ms
            )
        return self._store

    def stage(self, records: DataFrame) -> DataFrame:
        self.store.ping()  # a clear error at start when Redis is away
        return records

    def batch_events(self, frame: DataFrame, batch_id: int) -> DataFrame:
        partitioned, make_events = self.python_events(frame, batch_id)
        return partitioned.mapInArrow(make_events, EVENT_DDL)

    def python_events(self, frame: DataFrame, batch_id: int) -> PythonEvents:
        config = self.config
        store = self.store
        run = self._start_run()
        now = SystemClock().now_ms()
        with warn_if_slow(log, f"batch {batch_id}: Redis bookkeeping on the driver", 1.0):
            store.heartbeat(run, now)
            released = store.release(run, batch_id)
            if released:
                log.debug("released %d task records of run %s", released, run)
            take_over(store, config, run, now, self.deliver)
        job = TaskJob(
            self.settings,
            config.topology,
            config.lead_ms,
            config.max_lateness_ms,
            run,
            owner_json(config),
            batch_id,
            SystemClock().now_ms(),
        )

        def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            refuse_pandas()  # mapped alone (batch_events); in the fire task it is done
            yield from _run_task(job, batches)

        claimers = store.claimers(run, config.shuffle_partitions)
        if claimers != config.shuffle_partitions and not self._told_claimers:
            self._told_claimers = True
            log.warning(
                "run %s keeps %d tasks per batch, as on its first batch (a replay must put "
                "each record in the same task); --shuffle-partitions %d applies after "
                "--rebuild",
                run,
                claimers,
                config.shuffle_partitions,
            )
        return _by_schedule(frame, claimers), task

    def pending_due_times(self, spark: SparkSession) -> list[int]:
        del spark
        lead = self.config.lead_ms
        times = [raise_ms(due, lead) for due in self.store.due_times(WAKE_AHEAD)]
        return times + self._lease_wake()

    def wake_times(self) -> list[int]:
        """The next due schedule (whichever pipeline planned it) and the next lease to
        end (a silent pipeline's claims to take over); a lease from now at the latest."""
        due = self.store.next_release_ms()
        out = [] if due is None else [raise_ms(due, self.config.lead_ms)]
        return out + self._lease_wake()

    def _lease_wake(self) -> list[int]:
        # Within a lease at the latest, whatever the store holds now: another pipeline
        # may claim schedules and die after this batch, and its claims are taken over
        # only by a batch (an idle pipeline's heartbeat is minutes). On a grid of leases,
        # so the batches of one lease ask for one wake, not one each (each such wake's
        # batch would ask for the next: as many batches a lease as there ever were).
        now = SystemClock().now_ms()
        lease = self.settings.lease_ms
        later = (now // lease + 1) * lease
        # Another run's (ours are released by our next batch, and a wake at each of their
        # lease ends would keep our last busy minute's batches going).
        lease_end = self.store.next_lease_end_ms(other_than=self._run)
        # Ended already: its owner is alive (it releases on its next batch) or was just
        # taken; look again a lease later instead of waking at once, batch after batch.
        return [lease_end if lease_end is not None and now < lease_end < later else later]

    def close(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=self.settings.timeout_ms / 1000 + 5)
            self._beat = None
        if self._run is not None and self._store is not None:
            try:
                self._store.forget_run(self._run)
            except Exception as exc:  # stopping anyway; the heartbeat just ages out
                log.warning("could not deregister run %s from Redis: %s", self._run, exc)
        if self._store is not None:
            self._store.client.close()
            self._store = None
        self._run = None  # a start after this registers afresh
        self._stop = threading.Event()

    def _start_run(self) -> str:
        """This run's id; on the first batch, registers it as its topics' reader."""
        if self._run is not None:
            return self._run
        config = self.config
        run = run_id(config.query_name, checkpoint_query_id(config.checkpoint_dir))
        now = SystemClock().now_ms()
        # Topic names have no ':': the transactional id is registered beside them, as
        # two pipelines of one query name would fence each other's producers.
        names = (*config.topology.input_topics, redis_txn_claim(config.transactional_id))
        taken = self.store.own(run, names, now)
        if taken is not None and taken[0] == redis_txn_claim(config.transactional_id):
            raise TopicTakenError(
                f"pipeline {taken[1]} (heartbeat {now - taken[2]} ms ago) runs under query "
                f"name {config.query_name!r} too, through Redis {self.settings.safe_url} prefix "
                f"{self.settings.prefix!r}: the two would fence each other's Kafka "
                "transactions; give each pipeline its own --query-name"
            )
        if taken is not None:
            topic, other, seen = taken
            raise TopicTakenError(
                f"topic {topic!r} is read by pipeline {other} (heartbeat {now - seen} ms ago) "
                f"through Redis {self.settings.safe_url} prefix {self.settings.prefix!r}; one "
                "pipeline per topic. If that pipeline is gone, it is released "
                f"{self.settings.lease_ms} ms after its last heartbeat"
            )
        self._run = run
        self._beat = threading.Thread(
            target=self._heartbeats,
            args=(self.store, run, self._stop),
            name="delayline-redis",
            daemon=True,
        )
        self._beat.start()
        return run

    def _heartbeats(self, store: RedisStore, run: str, stop: threading.Event) -> None:
        interval = self.settings.lease_ms / 4000
        while not stop.wait(interval):
            try:
                store.heartbeat(run, SystemClock().now_ms())
            except Exception as exc:  # Redis away: batches fail and say so; keep beating
                log.warning("Redis heartbeat failed: %s", exc)


def _by_schedule(frame: DataFrame, tasks: int) -> DataFrame:
    """``frame`` in exactly ``tasks`` partitions, each record in the one its (topic,
    schedule id) hashes to: every version of an id in one task, and the same records in
    the same partition index whenever the batch is replayed, in whatever order Spark
    lists the source's partitions. The order within a partition may differ (the task
    record's fingerprint and the fold do not depend on it).

    Every partition is a task that claims due schedules, with or without records (a
    batch woken only by the waker has none): a repartition to a number plans that many
    tasks even when the input is empty, unless the optimizer sees an empty input in the
    plan itself, which a ``foreachBatch`` frame (an RDD underneath) never shows.
    Adaptive execution, which could change a shuffle's partitions, is off for the
    pipeline's session (:func:`delayline.pipeline.session.build_session`).
    """
    return frame.repartition(tasks, "topic", "gkey")


_STORES: dict[tuple[Any, ...], RedisStore] = {}
"""This worker process's stores (connections), by settings."""


def _run_task(job: TaskJob, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext  # noqa: PLC0415 - executor side

    log_to_stderr()
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    records = [_record(row) for batch in batches for row in batch.to_pylist()]
    settings = (job.redis, job.topology, job.lead_ms, job.max_lateness_ms)
    store = _STORES.get(settings)
    if store is None:
        store = _STORES[settings] = RedisStore(
            job.redis, InputParser(job.topology), job.lead_ms, job.max_lateness_ms
        )
    pause_at(REDIS_BEFORE_RECORD)
    with warn_if_slow(log, f"batch {job.batch_id} task {partition}: Redis, {len(records)} records"):
        result = store.run_task(job.run, job.owner, job.batch_id, partition, records, job.now_ms)
    pause_at(REDIS_AFTER_RECORD)
    yield from result.events.to_batches()


def _record(row: dict[str, Any]) -> ConsumedRecord:
    return ConsumedRecord(
        topic=row["topic"],
        partition=int(row["partition"]),
        offset=int(row["offset"]),
        timestamp_ms=int(row["timestamp_ms"]),
        key=row["key"],
        value=row["value"],
        headers=tuple((h["key"], h["value"]) for h in row["headers"] or ()),
    )
