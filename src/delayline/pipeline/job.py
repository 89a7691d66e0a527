"""Wire the pipeline: Kafka source -> validate + hold -> transactional fire."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka.admin import AdminClient
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from delayline.committer.arrivals import Arrivals
from delayline.committer.checkpoint_log import batch_planned_ms
from delayline.committer.config import RUN_COMMITTER_NAME
from delayline.committer.service import Committer
from delayline.core.identifiers import checkpoint_query_id
from delayline.core.mounts import read_mounts
from delayline.core.units import format_duration_ms
from delayline.errors import DelaylineError
from delayline.fire.report import BatchReport
from delayline.fire.sink import FireSink
from delayline.fire.tasks import deliver_as
from delayline.fire.transactional import end_left_open
from delayline.holds.hold import Hold, hold_for
from delayline.kafka.config import kafka_client_config
from delayline.kafka.reader import acknowledged_ends
from delayline.kafka.topics import (
    ensure_oscillator_topic,
    ensure_wake_topic,
)
from delayline.pipeline.checkpoint_format import claim_format
from delayline.pipeline.committers import committer_config, start_committer
from delayline.pipeline.config import (
    DELIVER_FIRST_MAX_MS,
    DELIVER_FIRST_READY_MS,
    OWN_WAKER,
    PipelineConfig,
    spark_progress_file,
)
from delayline.pipeline.interrupt import stoppable
from delayline.pipeline.lease import QueryLease
from delayline.pipeline.lock import CheckpointLock, clear_checkpoint
from delayline.pipeline.metrics import PipelineMetrics
from delayline.pipeline.metrics_server import MetricsServer, Readiness, batch_age, kafka_probe
from delayline.pipeline.need import Need
from delayline.pipeline.placement import check_checkpoint, check_master
from delayline.pipeline.progress import ProgressFeed, log_batch
from delayline.pipeline.recovery import NO_SPACE, Failure, Recovery, diagnose, no_space_message
from delayline.pipeline.session import build_session
from delayline.pipeline.source import (
    GATE_WAIT_MS,
    gate_opener,
    gate_waiting,
    read_schedules,
    spark_trigger_ms,
)
from delayline.pipeline.wake import Waker

log = logging.getLogger(__name__)

READY_BATCH_AGE_MS = 60_000
"""``/readyz`` on the metrics port fails when a micro-batch the waker needed did not run
for this long, or none ran for this long after a heartbeat interval (without the waker:
none for this long); the API reports such a pipeline as stalled."""


_REBUILD_HINT = (
    "\n\nThe query failed before its first batch, while it read the checkpoint {}. If the "
    "checkpoint is damaged (a disk that filled up, a truncated or edited file), start with "
    "--rebuild: it deletes the checkpoint and rebuilds the pending schedules from the "
    "schedules topics, and nothing already delivered is delivered again."
)


class PipelineError(DelaylineError):
    """The streaming query stopped with an error; restarting resumes from the checkpoint."""

    retriable = True


def _last_batch_id(query: StreamingQuery) -> int:
    progress = query.lastProgress
    return -1 if progress is None else int(progress["batchId"])


class Pipeline:
    """A running pipeline: start it, then :meth:`run_until` a stop is requested.

    Args:
        config: The pipeline settings.
        on_batch: Called with each batch's report; by default the batch's log line
            (and ``--progress-file``).
        log_level: delayline's ``--log-level``: at ``debug`` Spark's own INFO and WARN
            lines show too (see :func:`delayline.pipeline.session.build_session`).
    """

    def __init__(
        self,
        config: PipelineConfig,
        on_batch: Callable[[BatchReport], None] | None = None,
        *,
        log_level: str = "info",
    ) -> None:
        self.config = config
        self.log_level = log_level
        self._on_batch = on_batch or self._report_batch
        self.metrics = PipelineMetrics()
        self._metrics_server: MetricsServer | None = None
        self._spark: SparkSession | None = None
        self._query: StreamingQuery | None = None
        self._waker: Waker | None = None
        self._checkpoint_id: str | None = None
        self._committer: Committer | None = None
        self._progress: ProgressFeed | None = None
        self._sink: FireSink | None = None
        self._arrivals = Arrivals() if config.gated else None
        self._events: DataFrame | None = None
        self.hold: Hold = hold_for(config, deliver_as)
        # A hold with a source of its own is asked in the same trigger: none waits on ours.
        self._gate_wait_ms = 0 if self.hold.wakes_itself else GATE_WAIT_MS
        self._lock = CheckpointLock(config.checkpoint_dir, config.query_name)
        self._lease = QueryLease(
            config.topology.bootstrap_servers, config.query_name, str(config.checkpoint_dir)
        )

    def claim_checkpoint(self) -> None:
        """Check where Spark runs and take the checkpoint's lock, before anything is
        created or written (:meth:`start` does it too, if not done).

        Raises:
            CheckpointLockedError: another pipeline runs on this checkpoint.
            QueryNameInUseError: another pipeline runs with this query name.
            ConfigError: the checkpoint cannot serve the master's executors.
            SparkClusterError: no Spark master answers the master URL.
        """
        config = self.config
        check_master(config.master)
        check_checkpoint(config.master, config.checkpoint_dir, read_mounts())
        self._lock.acquire()
        try:
            self._lease.check()
        except Exception:
            self._lock.release()
            raise

    def start(self, *, rebuild: bool = False) -> None:
        """Start the committer, then Spark and the streaming query (after wiping the
        checkpoint if ``rebuild``). If either fails to start, everything started is
        stopped again, the lease and the checkpoint lock released (a committer that
        started first delivers what is due within the lead)."""
        config = self.config
        self._checkpoint_id = None
        if warning := config.lead_warning():
            log.warning("%s", warning)
        if not self._lock.held:
            self.claim_checkpoint()
        if rebuild:
            log.warning("rebuild: deleting checkpoint %s", config.checkpoint_dir)
            clear_checkpoint(config.checkpoint_dir)
        config.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        try:
            claim_format(config.checkpoint_dir)  # a newer release's checkpoint: stop here
        except DelaylineError:
            self._lock.release()
            raise
        self._lease.hold(config.topology.commits_topic)
        try:
            # Before Spark (4-5 s here): what an earlier run handed over goes out at its
            # due time while the session starts; the committer needs no Spark.
            self._committer, fresh = self._start_committer()
            if config.deliver_first and not fresh:
                self._deliver_first(self._committer)
            if self._committer.failure is not None:  # it stopped (a newer format): say so
                raise self._committer.failure
            self._start_spark()
        except BaseException:
            self.stop()
            raise

    def _start_spark(self) -> None:
        """The Spark session, the metrics server, the waker, the fire sink and the
        streaming query."""
        config = self.config
        self._spark = build_session(config, log_level=self.log_level)
        if config.metrics_port is not None and self._metrics_server is None:
            beat = config.heartbeat_interval_ms
            if config.wake and config.waker == OWN_WAKER:
                batches = batch_age(
                    self.metrics,
                    beat + READY_BATCH_AGE_MS,
                    owed_since=self._batch_owed_since,
                    max_owed_ms=READY_BATCH_AGE_MS,
                )
            else:  # batches every trigger, or every tick of an oscillator
                batches = batch_age(self.metrics, READY_BATCH_AGE_MS)
            readiness = Readiness(
                kafka_probe(config.topology.bootstrap_servers),
                (batches, self._committer_not_ready),
            )
            self._metrics_server = MetricsServer(
                self.metrics,
                config.metrics_host,
                config.metrics_port,
                readiness,
                liveness=(self._committer_not_alive,),
            )
            admin = AdminClient(kafka_client_config(config.topology.bootstrap_servers))
            self.metrics.watch_input_lag(lambda parts: acknowledged_ends(admin, parts, 5.0))
            self._metrics_server.start()
        if self._metrics_server is not None or config.progress_file is not None:
            # Queued in the JVM, handed on every poll of run_until and at the stop.
            spark_file = (
                None if config.progress_file is None else spark_progress_file(config.progress_file)
            )
            metrics = None if self._metrics_server is None else self.metrics
            self._progress = ProgressFeed(self._spark, metrics, spark_file)
        on_batch = self._batch_done
        if config.wake and config.waker == OWN_WAKER:
            self._waker = self._start_waker(self._spark)
            self.metrics.watch_waker(self._waker.stats)
        elif config.wake:  # ticks of an oscillator wake it; nothing of ours is written there
            ensure_oscillator_topic(config.topology.bootstrap_servers, config.wake_topic_name)
        on_timers = None if self._waker is None else self._waker.add
        on_wakes = None if self._waker is None else self._waker.wake_at
        self._sink = FireSink(
            config, self._query_id, on_batch, on_timers, on_wakes=on_wakes, hold=self.hold
        )
        self._events = self.hold.stage(read_schedules(self._spark, config, self._gate_wait_ms))
        self._start_query()
        if self._waker is not None:
            # Read after the first batch so it is not delayed; the waker wakes every
            # trigger interval until the timers are in.
            threading.Thread(
                target=self._load_timers,
                args=(self._spark, self._waker),
                name="delayline-timers",
                daemon=True,
            ).start()
        log.info(
            "pipeline %s started: %s -> %s hold -> fire, checkpoint %s",
            config.query_name,
            ",".join(config.topology.input_topics),
            self.hold.name,
            config.checkpoint_dir,
        )

    def _start_query(self) -> None:
        config = self.config
        if self._events is None or self._sink is None:
            raise PipelineError("pipeline not started")
        trigger_ms = spark_trigger_ms(config, self._gate_wait_ms)
        self._query = (
            self._events.writeStream.queryName(config.query_name)
            .option("checkpointLocation", str(config.checkpoint_dir))
            .trigger(processingTime=f"{trigger_ms} milliseconds")
            .foreachBatch(stoppable(self._sink))
            .start()
        )
        if config.gated and self._spark is not None:
            # A trigger of the query before may have taken an open and failed: the new
            # one reads at once, as a first start does.
            gate_opener(self._spark, config.query_name)()

    def run_until(self, stop: threading.Event, poll_s: int = 1) -> None:
        """Block until ``stop`` is set or the query fails for good; then stop cleanly.

        A failure that waiting may cure (Kafka away) starts the query again, replaying
        the failed batch, for up to ``outage_timeout_ms`` (see
        :mod:`delayline.pipeline.recovery`).

        Raises:
            PipelineError: the query terminated with an error it could not ride out.
        """
        recovery = Recovery(self.config.outage_timeout_ms)
        announced = False
        try:
            while not stop.is_set():
                query = self._require_query()
                progressed = False
                while not stop.is_set():
                    try:
                        if query.awaitTermination(poll_s):
                            break
                    except StreamingQueryException:
                        break  # it failed: query.exception() says why, below
                    finally:
                        if self._progress is not None:
                            self._progress.drain()
                    if (stopped := self._committer_stopped()) is not None:
                        # Handing over to nobody would leave every schedule undelivered.
                        raise PipelineError(
                            f"{stopped}; the pipeline stops with it (a supervisor that "
                            "restarts it restarts the committer)"
                        )
                    if not progressed and query.lastProgress is not None:
                        progressed = True
                        recovery.progressed()
                        if not announced or recovery.restarts:
                            log.info(
                                "pipeline %s %s: first batch done",
                                self.config.query_name,
                                "resumed" if announced else "ready",
                            )
                        announced = True
                exc = query.exception()
                if exc is None:
                    return
                self._recover(recovery, diagnose(str(exc)), announced, stop)
        finally:
            self.stop()

    def _recover(
        self, recovery: Recovery, failure: Failure, announced: bool, stop: threading.Event
    ) -> None:
        """Start the query again after ``failure``, or raise it as a :class:`PipelineError`."""
        pause_ms = recovery.failed(failure, int(time.monotonic() * 1000))
        if pause_ms is None:
            if failure.retriable and self.config.outage_timeout_ms:
                cause = (
                    f"{failure} (still failing after "
                    f"{format_duration_ms(self.config.outage_timeout_ms)} of restarts; "
                    "nothing was lost: start the pipeline again once Kafka answers)"
                )
            elif failure.name == NO_SPACE:
                cause = no_space_message(self.config.checkpoint_dir, failure)
            else:
                cause = str(failure)
            hint = "" if announced else _REBUILD_HINT.format(self.config.checkpoint_dir)
            raise PipelineError(f"streaming query failed: {cause}{hint}")
        log.warning(
            "streaming query failed (%s); nothing is lost: starting it again in %s "
            "(restart %d; giving up after %s of failures)",
            failure,
            format_duration_ms(pause_ms),
            recovery.restarts,
            format_duration_ms(self.config.outage_timeout_ms),
        )
        if not stop.wait(pause_ms / 1000):
            self._start_query()

    def stop(self, drain_timeout_s: float = 60.0) -> None:
        """Let the batch in flight finish, then stop the query and Spark."""
        query = self._query
        if query is not None and query.isActive:
            # When batches take longer than the trigger interval the trigger is never
            # idle, so wait for the batch in flight to end, not for an idle trigger.
            # Gated, an idle trigger waits for the gate (active, to Spark): nothing to end.
            idle = (
                gate_waiting(self._spark, self.config.query_name)
                if self.config.gated and self._gate_wait_ms and self._spark is not None
                else lambda: False
            )
            in_flight = _last_batch_id(query)
            deadline = time.monotonic() + drain_timeout_s
            while (
                query.status.get("isTriggerActive")
                and _last_batch_id(query) == in_flight
                and not idle()
                and time.monotonic() < deadline
            ):
                time.sleep(0.05)
            if self._spark is not None and self.log_level != "debug":
                # Stopping interrupts whatever Spark began meanwhile (the next batch, a
                # broadcast of it: "Store broadcast ... fail" seen here): errors about the
                # interruption, not the data; that batch runs again on the next start.
                self._spark.sparkContext.setLogLevel("OFF")
                # py4j logs the same interruption of a foreachBatch call on our side.
                logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)
            query.stop()
            log.info("pipeline %s stopped", self.config.query_name)
        self._query = None
        if self._committer is not None:
            # What was handed over is due within the lead: deliver it before leaving.
            self._committer.stop(drain_timeout_s=self.config.lead_ms / 1000 + 2)
            self._committer = None
        self.hold.close()
        if self._progress is not None:
            progress, self._progress = self._progress, None
            try:
                progress.close()
            except Exception as exc:  # a broken session: only its last reports are lost
                log.debug("progress reports not taken at the stop: %s", exc)
        if self._spark is not None:
            self._spark.stop()
            self._spark = None
        if self._waker is not None:
            self._waker.stop()
            self._waker = None
        if self._metrics_server is not None:
            self._metrics_server.stop()
            self._metrics_server = None
        self._lease.release()
        self._lock.release()

    def _committer_stopped(self) -> str | None:
        """Why this process's committer stopped for good, if it did (it restarts itself
        after any failure but a namesake in its group)."""
        committer = self._committer
        if committer is None or committer.failure is None:
            return None
        return committer.not_ready()  # says why it stopped

    def _committer_not_ready(self) -> str | None:
        """Why this process's committer is not delivering, if it is not (``/readyz``)."""
        return None if self._committer is None else self._committer.not_ready()

    def _committer_not_alive(self) -> str | None:
        """Why this process's committer is dead, if it is (``/healthz``)."""
        return None if self._committer is None else self._committer.not_alive()

    def _start_committer(self) -> tuple[Committer, bool]:
        """Started whatever the lead: an earlier run may have handed schedules over.
        Returns it, and whether its in-flight topic was just made. A killed run's fire
        transactions are ended first, not when Spark replays its batch: until then the
        committer could not read the in-flight topic to its end."""
        config = self.config
        end_left_open(
            config.topology.bootstrap_servers, config.transactional_id, config.shuffle_partitions
        )
        settings = committer_config(config, RUN_COMMITTER_NAME)
        return start_committer(config, settings, self.metrics, self._arrivals)

    def _deliver_first(self, committer: Committer) -> None:
        """Wait until ``committer`` has delivered what was handed over before this start
        (see :attr:`PipelineConfig.deliver_first`)."""
        started = time.monotonic()
        if not committer.wait_ready(DELIVER_FIRST_READY_MS / 1000):
            log.info("committer not ready in %d ms: starting Spark", DELIVER_FIRST_READY_MS)
            return
        left = committer.status().pending
        if not left:
            return
        wait_ms = min(self.config.lead_ms + 1_000, DELIVER_FIRST_MAX_MS)
        log.info(
            "committer: delivering %d schedule(s) handed over before this start before Spark "
            "starts (waiting %d ms at most)",
            left,
            wait_ms,
        )
        left = committer.wait_caught_up(wait_ms / 1000)
        log.info(
            "starting Spark %.1f s after the committer%s",
            time.monotonic() - started,
            f" ({left} schedule(s) still pending)" if left else "",
        )

    def _start_waker(self, spark: SparkSession) -> Waker:
        config = self.config
        ensure_wake_topic(config.topology.bootstrap_servers, config.wake_topic_name)
        need, open_gate = None, None
        if config.gated:
            need = Need(config.lead_ms, config.batch_wait_ms, config.batch_records)
            open_gate = gate_opener(spark, config.query_name)
        waker = Waker(
            config.topology.bootstrap_servers,
            config.wake_topic_name,
            heartbeat_ms=config.heartbeat_interval_ms,
            poll_ms=config.trigger_interval_ms,
            need=need,
            arrivals=self._arrivals,
            open_gate=open_gate,
        )
        waker.start()
        return waker

    def _load_timers(self, spark: SparkSession, waker: Waker) -> None:
        # After the first batch: reading every stored timer (20 s with 1M pending here)
        # beside the first batch slowed that batch, the one a restart waits for. Until
        # the timers are in, the waker wakes every trigger interval, so nothing is late.
        query = self._query
        while query is not None and query.isActive and query.lastProgress is None:
            if self._waker is not waker:
                return  # stopped meanwhile
            time.sleep(0.2)
        started = time.monotonic()
        try:
            slots = self.hold.pending_due_times(spark)
        except Exception as exc:  # any failure: keep waking every trigger interval
            if self._waker is waker:  # not a read cut short by stop()
                log.warning(
                    "could not read the timers in checkpoint %s (%s); micro-batches keep "
                    "running every trigger interval",
                    self.config.checkpoint_dir,
                    (str(exc).splitlines() or [type(exc).__name__])[0],
                )
            return
        waker.add(slots, complete=True)
        log.info("checkpoint timers read in %.1f s", time.monotonic() - started)

    def _query_id(self) -> str:
        # Fixed for the life of a checkpoint; read the file once, not on every batch.
        if self._checkpoint_id is None:
            self._checkpoint_id = checkpoint_query_id(self.config.checkpoint_dir)
        return self._checkpoint_id

    def _require_query(self) -> StreamingQuery:
        if self._query is None:
            raise PipelineError("pipeline not started")
        return self._query

    def _batch_owed_since(self) -> int | None:
        waker = self._waker
        return None if waker is None else waker.stats().waiting_since_ms

    def _batch_done(self, report: BatchReport) -> None:
        if self._waker is not None:
            planned = batch_planned_ms(self.config.checkpoint_dir, report.batch_id)
            self._waker.batch_done(report.finished_ms, report.raised, planned)
        if self._metrics_server is not None:
            self.metrics.observe_batch(report)
        self._on_batch(report)

    def _report_batch(self, report: BatchReport) -> None:
        log_batch(report)
        if self.config.progress_file is not None:
            with self.config.progress_file.open("a") as out:
                out.write(report.to_json() + "\n")
