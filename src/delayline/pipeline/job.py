"""Wire the pipeline: Kafka source -> validate + hold -> transactional fire."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from delayline.committer.arrivals import Arrivals
from delayline.committer.checkpoint_log import batch_planned_ms
from delayline.committer.service import Committer
from delayline.core.identifiers import checkpoint_query_id
from delayline.core.mounts import read_mounts
from delayline.core.units import format_duration_ms
from delayline.errors import DelaylineError
from delayline.fire.report import BatchReport
from delayline.fire.sink import FireSink
from delayline.fire.tasks import deliver_as
from delayline.holds.hold import Hold, hold_for
from delayline.kafka.topics import ensure_oscillator_topic
from delayline.pipeline.checkpoint_format import claim_format
from delayline.pipeline.committers import deliver_first, start_run_committer
from delayline.pipeline.config import (
    OWN_WAKER,
    PipelineConfig,
    spark_progress_file,
)
from delayline.pipeline.interrupt import stop_query, stoppable
from delayline.pipeline.lease import QueryLease
from delayline.pipeline.lock import CheckpointLock, clear_checkpoint
from delayline.pipeline.metrics import PipelineMetrics
from delayline.pipeline.metrics_server import MetricsServer
from delayline.pipeline.notice import run_notice
from delayline.pipeline.placement import check_checkpoint, check_master
from delayline.pipeline.progress import ProgressFeed, log_batch
from delayline.pipeline.recovery import (
    Failure,
    Recovery,
    diagnose,
    given_up,
    rebuild_hint,
)
from delayline.pipeline.serving import serve_metrics
from delayline.pipeline.session import build_session
from delayline.pipeline.source import (
    GATE_WAIT_MS,
    gate_opener,
    gate_waiting,
    read_schedules,
    spark_trigger_ms,
)
from delayline.pipeline.timers import load_timers, start_waker
from delayline.pipeline.wake import Waker

log = logging.getLogger(__name__)


class PipelineError(DelaylineError):
    """The streaming query stopped with an error; restarting resumes from the checkpoint."""

    retriable = True


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
            self.hold.notice = run_notice(config)  # with the lease: its only writer
            # Before Spark (4-5 s here): what an earlier run handed over goes out at its
            # due time while the session starts; the committer needs no Spark.
            self._committer, fresh = self._start_committer()
            if config.deliver_first and not fresh:
                deliver_first(self._committer, config.lead_ms)
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
            self._metrics_server = serve_metrics(
                config,
                config.metrics_port,
                self.metrics,
                owed_since=self._batch_owed_since,
                committer_not_ready=self._committer_not_ready,
                committer_not_alive=self._committer_not_alive,
            )
        if self._metrics_server is not None or config.progress_file is not None:
            # Queued in the JVM, handed on every poll of run_until and at the stop.
            spark_file = (
                None if config.progress_file is None else spark_progress_file(config.progress_file)
            )
            metrics = None if self._metrics_server is None else self.metrics
            self._progress = ProgressFeed(self._spark, metrics, spark_file)
        on_batch = self._batch_done
        if config.wake and config.waker == OWN_WAKER:
            open_gate = gate_opener(self._spark, config.query_name) if config.gated else None
            self._waker = start_waker(config, open_gate, self._arrivals)
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
            spark, where = self._spark, f"checkpoint {config.checkpoint_dir}"
            threading.Thread(
                target=load_timers,
                args=(
                    self._waker,
                    lambda: self.hold.pending_due_times(spark),
                    self._first_batch_done,
                    where,
                ),
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
            why = given_up(failure, self.config.outage_timeout_ms, self.config.checkpoint_dir)
            hint = "" if announced else rebuild_hint(self.config.checkpoint_dir)
            raise PipelineError(f"streaming query failed: {why}{hint}")
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
            idle = (
                gate_waiting(self._spark, self.config.query_name)
                if self.config.gated and self._gate_wait_ms and self._spark is not None
                else lambda: False
            )
            stop_query(
                query,
                self._spark,
                idle=idle,
                drain_timeout_s=drain_timeout_s,
                quiet=self.log_level != "debug",
            )
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
        """:func:`start_run_committer` for this pipeline (a seam the unit tests replace)."""
        return start_run_committer(self.config, self.metrics, self._arrivals)

    def _first_batch_done(self) -> bool:
        """Whether the first batch is over, or none is coming (the query stopped or failed)."""
        query = self._query
        return query is None or not query.isActive or query.lastProgress is not None

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
            self._waker.batch_done(report.finished_ms, report.raised, planned, report.read)
        if self._metrics_server is not None:
            self.metrics.observe_batch(report)
        self._on_batch(report)

    def _report_batch(self, report: BatchReport) -> None:
        log_batch(report)
        if self.config.progress_file is not None:
            with self.config.progress_file.open("a") as out:
                out.write(report.to_json() + "\n")
