"""The Redis hold: pending schedules in a Redis sorted set, fired exactly once by any
number of pipelines sharing it.

Per micro-batch, on the driver: a heartbeat, the release of this run's task records
that Spark will never replay (batches before this one), and the take-over of task
records left by a pipeline that went silent. Then every Spark task runs one script in
Redis (:meth:`.store.RedisStore.run_task`): its records applied, the due schedules
claimed, its decision recorded for a replay. The events go through the same fire
stage as every hold's: one Kafka transaction per task with its marker.

Taking over a silent pipeline's task record (lease ended, no heartbeat for a lease):
the record is finished *as its owner*: the same events, the owner's run, batch and
partition marker on the owner's commits topic, and the owner's transactional id, whose
initialisation fences every producer the owner had. If the owner had committed the
batch, the marker says so and nothing is written; if not, it can never commit it
afterwards. The record is then marked done, so the owner's replay (if it comes back) writes nothing.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from delayline.contract import ConsumedRecord
from delayline.contract.contracts import InputParser
from delayline.core.clock import SystemClock
from delayline.core.timing import warn_if_slow
from delayline.core.topology import Topology
from delayline.errors import ConfigError
from delayline.stores.fold import raise_ms
from delayline.stores.hold import Hold
from delayline.stores.redis.config import RedisHoldConfig
from delayline.stores.redis.store import RedisStore

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from delayline.pipeline.config import PipelineConfig

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

    def __init__(self, config: PipelineConfig) -> None:
        super().__init__(config)
        self._store: RedisStore | None = None
        self._run: str | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    @property
    def store(self) -> RedisStore:
        """The driver's store (connected on first use)."""
        if self._store is None:
            config = self.config
            self._store = RedisStore(
                config.redis, InputParser(config.topology), config.lead_ms, config.max_lateness_ms
            )
        return self._store

    def stage(self, records: DataFrame) -> DataFrame:
        self.store.ping()  # a clear error at start when Redis is away
        return records

    def batch_events(self, frame: DataFrame, batch_id: int) -> DataFrame:
        config = self.config
        store = self.store
        run = self._start_run()
        now = SystemClock().now_ms()
        with warn_if_slow(log, f"batch {batch_id}: Redis bookkeeping on the driver", 1.0):
            store.heartbeat(run, now)
            released = store.release(run, batch_id)
            if released:
                log.debug("released %d task records of run %s", released, run)
            self._take_over(store, run, now)
        job = TaskJob(
            config.redis,
            config.topology,
            config.lead_ms,
            config.max_lateness_ms,
            run,
            _owner(config),
            batch_id,
            SystemClock().now_ms(),
        )

        def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            yield from _run_task(job, batches)

        return _with_claimers(frame, config.shuffle_partitions).mapInArrow(task, EVENT_DDL)

    def pending_due_times(self, spark: SparkSession) -> list[int]:
        del spark
        lead = self.config.lead_ms
        times = [raise_ms(due, lead) for due in self.store.due_times(WAKE_AHEAD)]
        lease_end = self.store.next_lease_end_ms()
        return times + ([] if lease_end is None else [lease_end])

    def wake_times(self) -> list[int]:
        """The next due schedule (whichever pipeline planned it) and the next lease to
        end (a silent pipeline's claims to take over)."""
        store = self.store
        due = store.next_due_ms()
        lease_end = store.next_lease_end_ms()
        out = [] if due is None else [raise_ms(due, self.config.lead_ms)]
        return out + ([] if lease_end is None else [lease_end])

    def close(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
            self._beat = None
        if self._run is not None and self._store is not None:
            try:
                self._store.forget_run(self._run)
            except Exception as exc:  # stopping anyway; the heartbeat just ages out
                log.warning("could not deregister run %s from Redis: %s", self._run, exc)
        if self._store is not None:
            self._store.client.close()
            self._store = None

    def _start_run(self) -> str:
        """This run's id; on the first batch, registers it as its topics' reader."""
        if self._run is not None:
            return self._run
        from delayline.fire.sink import checkpoint_query_id  # noqa: PLC0415

        config = self.config
        run = f"{config.query_name}@{checkpoint_query_id(config.checkpoint_dir)}"
        now = SystemClock().now_ms()
        # Topic names have no ':': the transactional id is registered beside them, as
        # two pipelines of one query name would fence each other's producers.
        names = (*config.topology.input_topics, f"txn:{config.transactional_id}")
        taken = self.store.own(run, names, now)
        if taken is not None and taken[0].startswith("txn:"):
            raise TopicTakenError(
                f"pipeline {taken[1]} (heartbeat {now - taken[2]} ms ago) runs under query "
                f"name {config.query_name!r} too, through Redis {config.redis.safe_url} prefix "
                f"{config.redis.prefix!r}: the two would fence each other's Kafka "
                "transactions; give each pipeline its own --query-name"
            )
        if taken is not None:
            topic, other, seen = taken
            raise TopicTakenError(
                f"topic {topic!r} is read by pipeline {other} (heartbeat {now - seen} ms ago) "
                f"through Redis {config.redis.safe_url} prefix {config.redis.prefix!r}; one "
                "pipeline per topic. If that pipeline is gone, it is released "
                f"{config.redis.lease_ms} ms after its last heartbeat"
            )
        self._run = run
        self._beat = threading.Thread(target=self._heartbeats, name="delayline-redis", daemon=True)
        self._beat.start()
        return run

    def _heartbeats(self) -> None:
        interval = self.config.redis.lease_ms / 4000
        while not self._stop.wait(interval):
            run = self._run
            if run is None:
                continue
            try:
                self.store.heartbeat(run, SystemClock().now_ms())
            except Exception as exc:  # Redis away: batches fail and say so; keep beating
                log.warning("Redis heartbeat failed: %s", exc)

    def _take_over(self, store: RedisStore, run: str, now: int) -> None:
        seen = store.last_seen()
        lease = self.config.redis.lease_ms
        for key in store.expired_tasks(now):
            owner = key.split(":t:", 1)[1].rsplit(":", 2)[0]
            if owner == run:
                continue  # ours: released once Spark is past it
            beat = seen.get(owner)
            if beat is not None and beat > now - lease:
                continue  # alive (an idle pipeline releases on its next batch)
            record = store.seize(key, now)
            if record is None:
                continue
            self._finish_for(store, record)
            store.finish(key)

    def _finish_for(self, store: RedisStore, record: Any) -> None:
        from delayline.fire.partition import fire_rows  # noqa: PLC0415 - driver side
        from delayline.fire.tasks import new_firer, split_events  # noqa: PLC0415

        rows, _counts, _timers = split_events(store.record_events(record), self.config.lead_ms)
        written = "nothing to write"
        if rows:
            # The owner's markers, dead letters and history; our in-flight topic (our
            # committer delivers what is handed over) and our lead.
            owner = json.loads(record.owner)
            config = replace(
                self.config,
                topology=replace(
                    self.config.topology,
                    commits_topic=owner["commits"],
                    dead_letter_topic=owner["dead_letters"],
                    history_topic=owner["history"],
                ),
            )
            firer = new_firer(config, f"{owner['txn']}-p{record.partition}")
            try:
                report = fire_rows(
                    rows,
                    record.partition,
                    record.batch_id,
                    record.run,
                    config,
                    firer,
                    SystemClock(),
                    refresh=True,
                )
            finally:
                firer.close()
            written = "already committed by it" if report.replay else f"wrote {dict(report.counts)}"
        log.warning(
            "took over batch %d partition %d of silent run %s: %s",
            record.batch_id,
            record.partition,
            record.run,
            written,
        )


def _with_claimers(frame: DataFrame, count: int) -> DataFrame:
    """``frame`` and ``count`` more, empty, partitions: each task claims due schedules,
    and a batch woken only by the waker has a single source task otherwise (Spark plans
    no task for a Kafka partition without new records)."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark's convention

    empty = (
        frame.sparkSession.range(0, count, 1, count)
        .where(F.col("id") < 0)
        .select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in frame.schema.fields])
    )
    return frame.union(empty)


def _owner(config: PipelineConfig) -> str:
    """What another pipeline needs to finish one of our tasks as us (JSON)."""
    topology = config.topology
    return json.dumps(
        {
            "txn": config.transactional_id,
            "commits": topology.commits_topic,
            "dead_letters": topology.dead_letter_topic,
            "history": topology.history_topic,
        }
    )


_STORES: dict[tuple[Any, ...], RedisStore] = {}
"""This worker process's stores (connections), by settings."""


def _run_task(job: TaskJob, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext  # noqa: PLC0415 - executor side

    from delayline.fire.tasks import log_to_stderr  # noqa: PLC0415

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
    with warn_if_slow(log, f"batch {job.batch_id} task {partition}: Redis, {len(records)} records"):
        result = store.run_task(job.run, job.owner, job.batch_id, partition, records, job.now_ms)
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
