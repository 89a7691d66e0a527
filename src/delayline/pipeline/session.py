"""The SparkSession delayline runs in."""

from __future__ import annotations

import logging
import os
import sys

from pyspark.sql import SparkSession

from delayline.infra.jars import resolve_jars
from delayline.pipeline.config import PipelineConfig

log = logging.getLogger(__name__)

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

QUIET_LOGGERS = {
    # Logs a WARN ("Value state schedule doesn't contain a value") for every ValueState.get
    # of an empty state, i.e. once per new schedule: 618 lines in a 300-schedule run.
    "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer": (
        "ERROR"
    ),
}
"""Spark loggers whose WARN lines come per record, not per event worth a look."""


def build_session(config: PipelineConfig) -> SparkSession:
    """Start (or join) the SparkSession with the Kafka connector and RocksDB state.

    Settings and why:
        * RocksDB state store: ``transformWithState`` requires it; changelog
          checkpointing makes each batch's commit cheap.
        * ``shuffle_partitions`` small: the default 200 made every micro-batch take
          17-27 s on two cores. The number is frozen in the checkpoint.
        * UTC session time zone; the UI off (no port to collide with).
        * With ``wake``, no micro-batch without new records: an empty batch costs
          300-500 ms of CPU; the waker writes a record when a timer is due.
    """
    # Python workers must run the same interpreter (and venv) as the driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = resolve_jars("spark")
    spark = (
        SparkSession.builder.master(config.master)
        .appName(f"delayline-{config.query_name}")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.driver.memory", f"{config.driver_memory_mb}m")
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    # Set on the session, not the builder: a session that already exists keeps its own.
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", str(not config.wake).lower())
    spark.sparkContext.setLogLevel("WARN")
    _quiet(spark)
    log.info("spark %s, master %s, %d jars", spark.version, config.master, len(jars))
    return spark


def _quiet(spark: SparkSession) -> None:
    """Raise :data:`QUIET_LOGGERS` to their level in the driver JVM (where local mode
    runs the executors too)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a running SparkContext always has its gateway
    log4j = jvm.org.apache.logging.log4j
    for name, level in QUIET_LOGGERS.items():
        log4j.core.config.Configurator.setLevel(name, log4j.Level.getLevel(level))
