"""The pipeline's input: Spark's Kafka source over the input and wake topics, gated.

When :attr:`~delayline.pipeline.config.PipelineConfig.gated`, the source is Spark's
Kafka source behind the pipeline's gate (``dev.delayline.gate`` in the hold jar): a
trigger waits for the gate (up to :data:`GATE_WAIT_MS`, then looks again) and reads
nothing until the waker opens it (:mod:`delayline.pipeline.need`); this module is the one
place that names the gate.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

from delayline.contract.arrow import with_contracts
from delayline.kafka.config import client_properties
from delayline.kafka.properties import spark_options
from delayline.pipeline.config import PipelineConfig

GATED_SOURCE = "dev.delayline.gate.GatedKafkaSource"
"""Spark's Kafka source behind a gate (in the hold jar: ``jvm/``)."""
GATE_OPTION = "delayline.gate"
"""Its option naming the gate: the query name."""
GATE_WAIT_OPTION = "delayline.gate.wait.ms"
"""Its option saying how long a trigger that finds the gate closed waits for it to open."""
GATE_WAIT_MS = 1_000
"""How long a trigger waits for the gate: gated, Spark's trigger interval is 0, so an idle
query checks the gate about once a second (each check of a closed gate cost the stream
thread about 1.7 ms here, five a second at a 200 ms interval), and a batch starts as soon
as the waker opens it, not at the next check."""
GATE_CHECK_MS = 200
"""Spark's trigger interval when a trigger does not wait for the gate (``gate_wait_ms``
0: a hold with a source of its own, asked in the same trigger, must not wait on ours)."""


def read_schedules(
    spark: SparkSession, config: PipelineConfig, gate_wait_ms: int = GATE_WAIT_MS
) -> DataFrame:
    """The input topics as a stream (:func:`kafka_records`); records of envelope and
    timer-request topics come parsed (:func:`delayline.contract.arrow.with_contracts`)."""
    return with_contracts(kafka_records(spark, config, gate_wait_ms), config.topology)


def kafka_records(
    spark: SparkSession, config: PipelineConfig, gate_wait_ms: int = GATE_WAIT_MS
) -> DataFrame:
    """The input topics as a stream of Kafka records, headers included, transactions
    honoured.

    With ``wake`` the wake topic is read too: its records make a micro-batch run (so
    its due timers fire) and are dropped here. When :attr:`PipelineConfig.gated`, the
    source is Spark's Kafka source behind the pipeline's gate (:data:`GATED_SOURCE`,
    opened by the waker: :mod:`delayline.pipeline.need`), whose triggers wait for it up
    to ``gate_wait_ms`` (:data:`GATE_WAIT_MS`; 0 for a hold with a source of its own).
    """
    reader = spark.readStream.format(GATED_SOURCE if config.gated else "kafka")
    if config.gated:
        reader = reader.option(GATE_OPTION, config.query_name)
        reader = reader.option(GATE_WAIT_OPTION, str(gate_wait_ms))
    raw = (
        reader.option("kafka.bootstrap.servers", config.topology.bootstrap_servers)
        .option("subscribe", ",".join(config.source_topics))
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        # Compaction removes offsets by design; that is not data loss here.
        .option("failOnDataLoss", "false")
        .option("kafka.isolation.level", "read_committed")
        # A task's last fetch finds no more records and the broker holds it for this
        # long: the default 500 ms made each source task of a small batch take 0.55 s.
        .option("kafka.fetch.max.wait.ms", "10")
        .option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
        # TLS, SASL and the rest of --kafka-config, as Java's client takes them.
        .options(**spark_options(client_properties()))
        .load()
    )
    if config.wake:
        raw = raw.where(F.col("topic") != config.wake_topic_name)
    return raw.select(
        "topic",
        F.coalesce("key", F.lit(b"")).alias("gkey"),
        "key",
        "value",
        "partition",
        "offset",
        F.unix_millis("timestamp").alias("timestamp_ms"),
        "headers",
    )


def spark_trigger_ms(config: PipelineConfig, gate_wait_ms: int = GATE_WAIT_MS) -> int:
    """Spark's trigger interval: gated, 0 when a trigger waits for the gate itself (up to
    ``gate_wait_ms``, asking Kafka nothing while it is closed), else a check every
    :data:`GATE_CHECK_MS`; not gated, the trigger interval itself."""
    if config.gated:
        return 0 if gate_wait_ms > 0 else min(GATE_CHECK_MS, config.trigger_interval_ms)
    return config.trigger_interval_ms


def gate_waiting(spark: SparkSession, query_name: str) -> Callable[[], bool]:
    """Whether a trigger of the pipeline ``query_name`` waits for its gate now: it has
    read nothing, so a stop then loses no work."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a running session has its JVM
    waiting: Callable[[], bool] = jvm.dev.delayline.gate.Gate.named(query_name).waiting
    return waiting


def gate_opener(spark: SparkSession, query_name: str) -> Callable[[], None]:
    """What opens the gate of the pipeline ``query_name`` (in the driver's JVM)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a running session has its JVM
    opener: Callable[[], None] = jvm.dev.delayline.gate.Gate.named(query_name).open
    return opener
