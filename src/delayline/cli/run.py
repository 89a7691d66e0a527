"""``delayline run``: the Spark pipeline that delivers schedules."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from delayline.cli._common import (
    add_topology,
    duration_arg,
    env_bool,
    env_flag,
    env_switch_off,
    one_of,
    stop_on_signals,
    topology_from,
)
from delayline.cli._holds import add_hold_flags, hold_settings_from
from delayline.cli._serving import add_log_format, add_metrics_address
from delayline.cli.extras import require_extras
from delayline.contract.pacing import TargetRates
from delayline.core.heap import PAUSES
from delayline.core.heap import settle as settle_heap
from delayline.core.units import parse_duration_ms
from delayline.holds.registry import hold_kind
from delayline.kafka.topics import TopicsConfig, ensure_topics
from delayline.pipeline.config import (
    DEFAULT_INFLIGHT_PARTITIONS,
    DEFAULT_JAVA_OPTIONS,
    DEFAULT_LEAD_MS,
    MAX_LEAD_MS,
    OWN_WAKER,
    WAKERS,
    PipelineConfig,
    spark_conf_from,
)

LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
"""What ``--log-level`` accepts: delayline's own level (Spark's follows it, see
:func:`delayline.pipeline.session.spark_log_level`)."""

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run``."""
    p = sub.add_parser(
        "run",
        help="run the pipeline that delivers schedules (Spark Structured Streaming)",
        description="Read schedules, hold them where --hold says, deliver each at its due time "
        "exactly once. Stops cleanly on SIGTERM/SIGINT after the batch in flight.",
    )
    add_topology(p, "schedules topic to read; repeat for several")
    env_flag(
        p,
        "--checkpoint-dir",
        env="DELAYLINE_CHECKPOINT_DIR",
        default=".delayline/checkpoint",
        type=Path,
        help="Spark checkpoint directory (state, offsets)",
    )
    env_flag(
        p,
        "--master",
        env="DELAYLINE_SPARK_MASTER",
        default="local[2]",
        help="Spark master URL: local[N], or spark://HOST:PORT of a standalone cluster "
        "(`delayline cluster start` runs one here; see docs/deployment.md)",
    )
    env_flag(
        p,
        "--trigger-interval",
        env="DELAYLINE_TRIGGER_INTERVAL",
        default="1s",
        type=duration_arg(parse_duration_ms),
        dest="trigger_interval_ms",
        metavar="DURATION",
        help="micro-batch interval; bounds lateness, costs idle CPU",
    )
    env_flag(
        p,
        "--shuffle-partitions",
        env="DELAYLINE_SHUFFLE_PARTITIONS",
        default=2,
        type=int,
        help="state partitions, each fired by its own task: about one per core "
        "(frozen in the checkpoint)",
    )
    env_flag(
        p,
        "--lead",
        env="DELAYLINE_LEAD",
        default=f"{DEFAULT_LEAD_MS}ms",
        type=duration_arg(parse_duration_ms),
        dest="lead_ms",
        metavar="DURATION",
        help="raise schedules this long before their due time and commit each delivery "
        "at the due time itself; must cover two micro-batches (0: fire when due, in the "
        f"batch that finds it due; at most {MAX_LEAD_MS // 1000}s)",
    )
    env_flag(
        p,
        "--engine-nice",
        env="DELAYLINE_ENGINE_NICE",
        default=10,
        type=int,
        help="added to the niceness of Spark's JVM and Python workers, so the committer's "
        "deliveries get the CPU first (0: as this process)",
    )
    env_switch_off(
        p,
        "--no-deliver-first",
        dest="deliver_first",
        env="DELAYLINE_NO_DELIVER_FIRST",
        help="start Spark at once instead of after the committer has delivered what was "
        "handed over before the start (10 s at most; Spark's start on the same cores made "
        "those deliveries up to 364 ms late here)",
    )
    add_delivery_flags(p)
    env_flag(
        p,
        "--driver-memory-mb",
        env="DELAYLINE_DRIVER_MEMORY_MB",
        default=1024,
        type=int,
        help="Spark driver JVM heap",
    )
    env_flag(
        p,
        "--executor-memory-mb",
        env="DELAYLINE_EXECUTOR_MEMORY_MB",
        default=1024,
        type=int,
        help="JVM heap of each executor (with a cluster --master; must fit the worker's memory)",
    )
    env_flag(
        p,
        "--max-offsets-per-trigger",
        env="DELAYLINE_MAX_OFFSETS_PER_TRIGGER",
        default=20_000,
        type=int,
        help="cap on records read per micro-batch (bounds lateness while reading a backlog)",
    )
    env_flag(
        p,
        "--progress-file",
        env="DELAYLINE_PROGRESS_FILE",
        default=None,
        type=Path,
        help="append one JSON line per micro-batch to this file (for tools)",
    )
    add_metrics_address(
        p,
        "DELAYLINE_",
        "Prometheus /metrics, JSON /progress, /readyz (200 while the micro-batches needed "
        "run, the committer delivers and Kafka answers, else 503 with the reasons) and /healthz "
        "(200 while the committer's thread runs, else 503; never asks Kafka)",
    )
    env_switch_off(
        p,
        "--no-wake",
        dest="wake",
        env="DELAYLINE_NO_WAKE",
        help="run a micro-batch every trigger interval even when nothing is due (Spark's "
        "default; measured here: 55-119%% of a core while idle) instead of only when a "
        "timer is due, a record arrives or a heartbeat passes",
    )
    p.add_argument(
        "--batch-on-input",
        action="store_true",
        default=env_bool("DELAYLINE_BATCH_ON_INPUT"),
        help="run a micro-batch whenever the input moves (each delivery's own tombstone "
        "too), as Spark does, instead of only when the work needs one: a timer to raise, "
        "a new schedule to read before its due time, --batch-records unread, one waiting "
        "--batch-wait (about 0.5 s of CPU a batch here) [env DELAYLINE_BATCH_ON_INPUT=1]",
    )
    env_flag(
        p,
        "--batch-wait",
        env="DELAYLINE_BATCH_WAIT",
        default="10s",
        type=duration_arg(parse_duration_ms),
        dest="batch_wait_ms",
        metavar="DURATION",
        help="the longest a new input record (a cancel, a schedule due later) waits for a "
        "micro-batch",
    )
    env_flag(
        p,
        "--batch-records",
        env="DELAYLINE_BATCH_RECORDS",
        default=5_000,
        type=int,
        metavar="N",
        help="new input records that call for a micro-batch at once",
    )
    env_flag(
        p,
        "--wake-topic",
        env="DELAYLINE_WAKE_TOPIC",
        default=None,
        help="topic the pipeline writes its wake records to, or that an oscillator ticks "
        "with --waker oscillator (default: <query-name>-wake, or oscillator)",
    )
    env_flag(
        p,
        "--waker",
        env="DELAYLINE_WAKER",
        default=OWN_WAKER,
        type=one_of(WAKERS),
        metavar="{" + ",".join(WAKERS) + "}",
        help="who wakes the pipeline when a timer is due: own (wake records of its own, "
        "written when due) or oscillator (an oscillator's ticks on --wake-topic: a "
        "micro-batch every second, timers raised at 1 s granularity; see "
        "docs/contracts.md)",
    )
    env_flag(
        p,
        "--heartbeat-interval",
        env="DELAYLINE_HEARTBEAT_INTERVAL",
        default="5m",
        type=duration_arg(parse_duration_ms),
        dest="heartbeat_interval_ms",
        metavar="DURATION",
        help="longest time without a micro-batch while nothing is due (a backstop: "
        "readiness asks that every batch the pipeline needs runs within a minute)",
    )
    env_flag(
        p,
        "--outage-timeout",
        env="DELAYLINE_OUTAGE_TIMEOUT",
        default="5m",
        type=duration_arg(parse_duration_ms),
        dest="outage_timeout_ms",
        metavar="DURATION",
        help="how long to ride out Kafka being away (the query fails and is started "
        "again, replaying the failed batch) before exiting with the error; 0 exits at once",
    )
    add_hold_flags(p, "where pending schedules wait")
    env_flag(
        p,
        "--java-options",
        env="DELAYLINE_JAVA_OPTIONS",
        default=DEFAULT_JAVA_OPTIONS,
        help="extra options of Spark's JVM (default none: the JVM's tiered JIT, cheaper "
        "once warm; --java-options=-XX:TieredStopAtLevel=1 costs less in a JVM's first "
        "minutes; write --java-options=-X... as one word)",
    )
    p.add_argument(
        "--spark-conf",
        action="append",
        metavar="KEY=VALUE",
        help="a Spark setting of the session, e.g. spark.archives=env.tar.gz#env on a "
        "cluster; repeatable (see docs/deployment.md) [env DELAYLINE_SPARK_CONF, "
        "comma-separated]",
    )
    env_flag(
        p,
        "--log-level",
        env="DELAYLINE_LOG_LEVEL",
        default="info",
        type=_log_level,
        choices=LOG_LEVELS,
        help="delayline's log level; Spark and py4j log errors only, except at debug, "
        "where their INFO and WARN lines show too",
    )
    add_log_format(p, "; Spark's JVM and its Python workers log the same way")
    p.add_argument(
        "--rebuild",
        action="store_true",
        default=env_bool("DELAYLINE_REBUILD"),
        help="delete the checkpoint and rebuild pending schedules from the schedules "
        "topics [env DELAYLINE_REBUILD=1]",
    )
    p.set_defaults(func=_run)


def add_delivery_flags(p: argparse.ArgumentParser) -> None:
    """The flags a pipeline and its committers must agree on (``run``, ``committer``)."""
    env_flag(
        p,
        "--query-name",
        env="DELAYLINE_QUERY_NAME",
        default="delayline",
        help="name of this pipeline; part of its Kafka transactional id",
    )
    env_flag(
        p,
        "--max-lateness",
        env="DELAYLINE_MAX_LATENESS",
        default=None,
        type=duration_arg(parse_duration_ms),
        dest="max_lateness_ms",
        metavar="DURATION",
        help="dead-letter schedules later than this as 'expired' (default: fire all)",
    )
    env_flag(
        p,
        "--inflight-partitions",
        env="DELAYLINE_INFLIGHT_PARTITIONS",
        default=DEFAULT_INFLIGHT_PARTITIONS,
        type=int,
        help="partitions of the in-flight topic, which the committers split: how many "
        "committers can share precise delivery (grown at start, never shrunk)",
    )
    env_flag(
        p,
        "--write-ahead",
        env="DELAYLINE_WRITE_AHEAD",
        default=None,
        dest="write_ahead_topics",
        metavar="TOPIC|REGEX",
        help="target topics (a regular expression matched against the whole name) whose "
        "deliveries may be written before their due time and committed at it: bursts "
        "on time, but a read_uncommitted consumer sees them early; only for targets "
        "whose every consumer reads read_committed (default: none, every delivery is "
        "written once due; see docs/pipeline.md)",
    )
    p.add_argument(
        "--target-rate",
        action="append",
        metavar="TOPIC=N/s",
        help="deliver to TOPIC at most N per second (or N/min): a burst beyond it waits, "
        "in due order, never dropped; '*=N/s' for every other topic; repeatable; every "
        "committer of the pipeline needs the same (see docs/pipeline.md) "
        "[env DELAYLINE_TARGET_RATES, comma-separated]",
    )


def target_rates_from(args: argparse.Namespace) -> TargetRates:
    """``--target-rate`` flags (or, without any, ``DELAYLINE_TARGET_RATES``' items).

    Raises:
        ConfigError: an item that is not ``TOPIC=N/s``.
    """
    env = os.environ.get("DELAYLINE_TARGET_RATES", "")
    items = args.target_rate or [item for item in env.split(",") if item.strip()]
    return TargetRates.parse(items)


def _log_level(text: str) -> str:
    """``--log-level`` (or ``DELAYLINE_LOG_LEVEL``, which argparse checks only here)."""
    level = text.strip().lower()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r}: use one of {', '.join(LOG_LEVELS)}")
    return level


def _run(args: argparse.Namespace) -> int:
    require_extras("run", "pipeline")
    from delayline.pipeline.job import Pipeline  # noqa: PLC0415 - pyspark loads only for run

    config = PipelineConfig(
        topology=topology_from(args),
        checkpoint_dir=args.checkpoint_dir,
        master=args.master,
        trigger_interval_ms=args.trigger_interval_ms,
        shuffle_partitions=args.shuffle_partitions,
        max_lateness_ms=args.max_lateness_ms,
        query_name=args.query_name,
        driver_memory_mb=args.driver_memory_mb,
        executor_memory_mb=args.executor_memory_mb,
        progress_file=args.progress_file,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        wake=args.wake,
        wake_topic=args.wake_topic or None,
        waker=args.waker,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        outage_timeout_ms=args.outage_timeout_ms,
        hold=args.hold,
        java_options=args.java_options,
        spark_conf=spark_conf_from(args.spark_conf, os.environ.get("DELAYLINE_SPARK_CONF", "")),
        lead_ms=args.lead_ms,
        inflight_partitions=args.inflight_partitions,
        target_rates=target_rates_from(args),
        write_ahead_topics=args.write_ahead_topics or None,
        engine_nice=args.engine_nice,
        deliver_first=args.deliver_first,
        hold_settings=hold_settings_from(args),
        batch_on_input=args.batch_on_input,
        batch_wait_ms=args.batch_wait_ms,
        batch_records=args.batch_records,
    )
    level = LOG_LEVELS[args.log_level]
    # -v (on every command) still adds to the level asked for here.
    logging.getLogger("delayline").setLevel(
        min(level, logging.getLogger().level) if args.verbose else level
    )
    pipeline = Pipeline(config, log_level=args.log_level)
    pipeline.claim_checkpoint()  # before anything is created: a second start changes nothing
    topics = TopicsConfig(config.topology)
    ensure_topics(topics)  # each must exist with the right policy
    kind = hold_kind(config.hold)
    if kind.topics is not None:  # the hold's own topics: made, or checked
        bootstrap, timeout_s = config.topology.bootstrap_servers, topics.timeout_ms / 1000
        kind.topics(bootstrap, config.hold_settings, topics.replication_factor, timeout_s)
    stop = stop_on_signals(log, "finishing the batch in flight")
    pipeline.start(rebuild=args.rebuild)
    settle_heap()  # what start-up made, out of the collector's walk
    PAUSES.install()
    pipeline.run_until(stop)
    return 0
