"""The SparkSession delayline runs in, and how much of Spark's log reaches ours."""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from delayline.core.logs import JSON, LOG_FORMAT_ENV, TEXT, json_line, log_format_in_env
from delayline.infra.cds import archive_options
from delayline.infra.jars import resolve_jars
from delayline.infra.jvm_hold import hold_jar
from delayline.kafka.properties import KAFKA_CONFIG_ENV, SECRET_NAMES
from delayline.pipeline.config import PipelineConfig
from delayline.pipeline.placement import executor_settings

log = logging.getLogger(__name__)

NO_FORK_LOCAL_FS = "dev.delayline.fs.NoForkLocalFileSystem"
"""The ``file:`` file system: Hadoop's, with permissions set without forking ``chmod``
(``jvm/src/main/java/dev/delayline/fs``)."""
FS_CHECKPOINT_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

QUIET_LOGGERS = {
    # Logs a WARN ("Value state schedule doesn't contain a value") for every ValueState.get
    # of an empty state, i.e. once per new schedule: 618 lines in a 300-schedule run.
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer": (
        "ERROR"
    ),
}
"""Spark loggers whose WARN lines come per record, not per event worth a look (quiet at
every ``--log-level``)."""

PYTHON_LOGGERS = ("py4j", "pyspark")
"""Python loggers of the libraries under Spark (py4j logs connection noise on shutdown)."""

JVM_NOISE = (
    b"WARNING: Using incubator modules",
    b"Starting Streaming TransformWithStateInPandas Python worker",
    b"Streaming TransformWithStateInPandas Python worker ",
)
"""Starts of lines the JVM writes to stderr outside its log (the JDK's notice of an
incubator module, and ``print`` calls of PySpark's transformWithState driver worker,
a UDF's repr each): dropped, with blank lines, unless ``--log-level debug``."""

_LOG4J2 = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.alwaysWriteExceptions = false
appender.stderr.layout.pattern = {pattern}
# Spark sets the root level of a PySpark driver to this logger's (WARN if unset).
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
"""

LOG4J_PATTERNS = {
    TEXT: "%d{yyyy-MM-dd HH:mm:ss,SSS} %p %c: %m%n%ex",
    JSON: '{"time":"%d{yyyy-MM-dd\'T\'HH:mm:ss.SSS\'Z\'}{UTC}","level":"%p",'
    '"logger":"%enc{%c}{JSON}","message":"%enc{%m}{JSON}"'
    '%notEmpty{,"exc_info":"%enc{%ex}{JSON}"}}%n',
}
"""The JVM's log lines in each ``--log-format`` (:mod:`delayline.core.logs`): json has
the fields of delayline's own JSON lines."""
JVM_STDERR_LOGGER = "spark.stderr"
"""The logger named by a JSON line made of what the JVM wrote outside its log."""


def spark_log_level(log_level: str) -> str:
    """The level of Spark's JVM loggers (and of :data:`PYTHON_LOGGERS`) for delayline's
    ``--log-level``: errors only, except at ``debug`` where INFO and WARN lines show too
    (Spark's "Current batch is falling behind", one per slow batch, among them)."""
    return "INFO" if log_level == "debug" else "ERROR"


def kafka_config_settings() -> dict[str, str]:
    """The executors' Python workers read ``--kafka-config`` at the same path as the
    driver (in local mode they inherit it anyway; a cluster's executors get it set): the
    file, and the stores it names, must be there on every worker (docs/deployment.md)."""
    path = os.environ.get(KAFKA_CONFIG_ENV, "").strip()
    return {f"spark.executorEnv.{KAFKA_CONFIG_ENV}": path} if path else {}


def log_format_settings() -> dict[str, str]:
    """A cluster's Python workers log in the driver's ``--log-format`` (in local mode
    they inherit it)."""
    return {f"spark.executorEnv.{LOG_FORMAT_ENV}": log_format_in_env()}


def build_session(config: PipelineConfig, *, log_level: str = "info") -> SparkSession:
    """Start (or join) the SparkSession with the Kafka connector and RocksDB state.

    Settings and why:
        * RocksDB state store: ``transformWithState`` requires it; changelog
          checkpointing makes each batch's commit cheap.
        * ``shuffle_partitions`` small: the default 200 made every micro-batch take
          17-27 s on two cores. The number is frozen in the checkpoint.
        * No process forked per checkpoint file: without Hadoop's native library its
          local file system forks ``chmod`` for every file it creates and, through
          ``FileContext``, ``readlink`` for every rename (about 30 forks per batch,
          tens of ms each from a JVM of several GiB). :data:`NO_FORK_LOCAL_FS` sets
          permissions with ``java.nio``, and the ``FileSystem``-based checkpoint file
          manager renames without the link lookup. Measured on a batch of 100 rows:
          offsets and commit log writes 55-80 ms -> 2-9 ms each, the state commit
          100-200 ms -> 5-25 ms. On a local disk both managers check then rename (no
          atomic no-overwrite rename either way); a second pipeline on the same
          checkpoint must be kept out by other means.
        * State maintenance (snapshots of the changelog) every 15 s instead of 60 s: a
          restart replays fewer changelog files.
        * UTC session time zone; the UI off (no port to collide with).
        * Adaptive query execution off. Spark turns it off for stateful streaming
          queries itself, but since 4.1 leaves it on for stateless ones (the Redis and
          memory holds), and inside ``foreachBatch`` it then applies to the batch's
          own plan. The Redis hold keys each task record and fire marker by the task's
          partition index, so its shuffle must keep exactly the partitions it asks for
          (:mod:`delayline.holds.redis.hold`); adaptive execution may
          re-plan a shuffle at run time (coalesce partitions, drop empty ones). Spark
          4.2 was seen to keep all of them for this plan with it on; off, nothing in a
          later version can change that. The pipeline's other queries have no joins and
          few shuffle partitions: little for it to improve.
        * No order-independent checksum of the shuffle's output (on by default since
          Spark 4.2): it hashes every row a task writes to the shuffle, to find out
          whether a task run again wrote other rows than the first time, and then runs
          the stages after it again. A task of a micro-batch run again reads the same
          offsets (fixed in the offset log before the batch runs) through the same
          deterministic expressions, the property the exactly-once fire stage already
          rests on. Only compaction or retention between the two runs can make it read
          fewer records, as for any replay of a batch, and compaction keeps each id's
          newest record, which the hold's rules already take for the id. The hashing
          took about 5% of the JVM's samples in the ``steady`` scenario
          (``benchmarks/README.md``).
        * With ``wake``, no micro-batch without new records: an empty batch costs
          300-500 ms of CPU; the waker writes a record when a timer is due.

    Spark and the libraries under it log errors only unless ``log_level`` is
    ``debug`` (see :func:`spark_log_level`); the JVM gets its log configuration when it
    starts, so not even its start-up warnings show, and its stderr passes through this
    process without :data:`JVM_NOISE`. The JVM runs in a session of its own: Ctrl-C
    (SIGINT to the terminal's process group) reaches this process only. The SIGINT
    handler in place before stays: PySpark's own (cancel every job, raise
    ``KeyboardInterrupt``) would break the batch in flight.
    """
    # Python workers must run the same interpreter (and venv) as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    hold = hold_jar()
    jars = [*resolve_jars("spark"), hold]
    level = spark_log_level(log_level)
    for name in PYTHON_LOGGERS:
        logging.getLogger(name).setLevel(level)
    settings = {
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.driver.memory": f"{config.driver_memory_mb}m",
        "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        # Secrets of --kafka-config (the Kafka source's options) never in plans or logs.
        "spark.redaction.regex": SECRET_NAMES,
        "spark.sql.redaction.options.regex": f"{SECRET_NAMES}|url",
        # Partition indexes must follow content (see the docstring).
        "spark.sql.adaptive.enabled": "false",
        # No row checksum of the shuffle's output (see the docstring).
        "spark.sql.shuffle.orderIndependentChecksum.enabled": "false",
        "spark.sql.shuffle.orderIndependentChecksum.enableFullRetryOnMismatch": "false",
        "spark.sql.streaming.stateStore.maintenanceInterval": "15s",
        "spark.sql.streaming.checkpointFileManagerClass": FS_CHECKPOINT_MANAGER,
        "spark.hadoop.fs.file.impl": NO_FORK_LOCAL_FS,
        # Hadoop loads file systems with its own class loader, before spark.jars.
        "spark.driver.extraClassPath": str(hold),
        "spark.executor.extraClassPath": str(hold),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **executor_settings(config.master, config.executor_memory_mb, config.java_options),
        **kafka_config_settings(),
        **log_format_settings(),
        **dict(config.spark_conf),
    }

    on_sigint = signal.getsignal(signal.SIGINT)
    with tempfile.TemporaryDirectory(prefix="delayline-spark-") as tmp:
        if SparkContext._gateway is None:  # the first session of this process
            _launch_jvm(
                config.master,
                settings,
                Path(tmp),
                level,
                keep_all=log_level == "debug",
                java_options=f"{config.java_options} {archive_options(hold)}".strip(),
                nice=config.engine_nice,
            )
        spark = (
            SparkSession.builder.master(config.master)
            .appName(f"delayline-{config.query_name}")
            .config(map=dict(settings))
            .getOrCreate()
        )
    if threading.current_thread() is threading.main_thread() and on_sigint is not None:
        signal.signal(signal.SIGINT, on_sigint)
    # Set on the session, not the builder: a session that already exists keeps its own.
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", str(not config.wake).lower())
    spark.sparkContext.setLogLevel(level)
    _quiet(spark)
    log.info("spark %s, master %s, %d jars", spark.version, config.master, len(jars))
    return spark


def _launch_jvm(
    master: str,
    settings: dict[str, str],
    tmp: Path,
    level: str,
    *,
    keep_all: bool,
    java_options: str,
    nice: int,
) -> None:
    """Start Spark's JVM with a log configuration at ``level``, its stderr piped
    through :func:`_forward`, ``nice`` added to its niceness (its Python workers
    inherit it)."""
    log4j = tmp / "log4j2.properties"
    pattern = LOG4J_PATTERNS[log_format_in_env()]
    log4j.write_text(_LOG4J2.format(level=level.lower(), pattern=pattern))
    conf = SparkConf(loadDefaults=False).setMaster(master)
    conf.setAll(
        [
            *settings.items(),
            (
                "spark.driver.extraJavaOptions",
                f"-Dlog4j2.configurationFile={log4j.as_uri()} {java_options}".strip(),
            ),
        ]
    )
    # Our own pipe, read from before the JVM starts: when it dies during start-up, what
    # it printed (a missing class, a bad option) still reaches our stderr.
    read_fd, write_fd = os.pipe()
    forwarder = threading.Thread(
        target=_forward,
        args=(os.fdopen(read_fd, "rb"), keep_all, log_format_in_env() == JSON),
        name="delayline-jvm-stderr",
        daemon=True,
    )
    forwarder.start()
    # A session of its own: a signal to the driver's process group (Ctrl-C, ``kill -TERM
    # -PGID``) is the driver's to handle; the JVM still ends when the driver does.
    piped = {"stderr": write_fd, "start_new_session": True}
    try:
        try:
            gateway = launch_gateway(conf, popen_kwargs=piped)  # type: ignore[no-untyped-call]
        finally:
            os.close(write_fd)  # the JVM holds its own copy
    except Exception:
        forwarder.join(timeout=5)  # the JVM is gone: its last words end in EOF
        raise
    SparkContext._ensure_initialized(gateway=gateway)
    # Under spark-submit, pyspark joins the JVM that spark-submit started (it names it in
    # PYSPARK_GATEWAY_PORT) and there is no process of ours to renice.
    if nice and gateway.proc is not None:
        renice(gateway.proc.pid, nice)


def renice(pid: int, nice: int) -> None:
    """Add ``nice`` to the niceness of every thread of process ``pid`` (Linux; elsewhere
    nothing). Threads it starts later, and processes it forks, inherit it.

    (pyspark's launcher sets its own ``preexec_fn``, so the JVM cannot be started niced.)
    """
    tasks = Path(f"/proc/{pid}/task")
    try:
        tids = [int(t) for t in os.listdir(tasks)]
    except OSError:
        return
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
        except OSError:  # the thread ended meanwhile
            continue


def _forward(stream: IO[bytes], keep_all: bool, as_json: bool) -> None:
    """Copy the JVM's stderr to ours line by line, without :data:`JVM_NOISE` and blank
    lines unless ``keep_all``, each line that is not a JSON log line made one if
    ``as_json``. Never stops before the stream ends (a full pipe would block the JVM)."""
    with open(2, "wb", closefd=False) as out:  # a file descriptor: the process's stderr
        for line in stream:
            if not keep_all and (not line.strip() or line.startswith(JVM_NOISE)):
                continue
            try:
                out.write(as_json_line(line) if as_json else line)
                out.flush()
            except OSError:
                pass  # our stderr is gone: keep draining the JVM's


def as_json_line(line: bytes) -> bytes:
    """A line of the JVM's stderr, as a JSON log line unless it is one (a log line of
    the JVM, or of a Python worker, in ``--log-format json``)."""
    if line.startswith(b"{"):
        return line
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    return json_line(text, JVM_STDERR_LOGGER).encode() + b"\n"


def _quiet(spark: SparkSession) -> None:
    """Raise :data:`QUIET_LOGGERS` to their level in the driver JVM (where local mode
    runs the executors too)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a running SparkContext always has its gateway
    log4j = jvm.org.apache.logging.log4j
    for name, level in QUIET_LOGGERS.items():
        log4j.core.config.Configurator.setLevel(name, log4j.Level.getLevel(level))
