"""The JVM hold: pending schedules in Spark state, every state call inside the JVM.

The rules are those of :mod:`delayline.holds.fold`, in Java
(``jvm/src/main/java/dev/delayline/hold``; the shared hold suite runs against both).
Records are validated by Spark SQL expressions (:func:`delayline.contract.columns.parsed`)
before they reach it, so no Python worker runs in the hold stage at all. Python's own
``transformWithState`` pays a blocking round trip to the JVM per state call (about
100 us here), which caps it near 2-4k schedules/s on two cores; this hold does not.

One grouping key per schedule: ``(source topic, record key)``; the state is the held
version, with one processing-time timer at its raise time, in RocksDB in the checkpoint.
It alone raises a burst early (:data:`delayline.holds.fold.BURST_LEAD_MS`): it counts a
batch's due seconds as it plans, key by key, which a hold that folds in Python could do
only by a pass of its own over the batch.
"""

from __future__ import annotations

import secrets
from typing import Any, ClassVar

from pyspark.sql import DataFrame, SparkSession

from delayline.contract import events as r
from delayline.contract.columns import parsed, without_settled_tombstones
from delayline.errors import ConfigError
from delayline.holds.fold import BURST_DENSE, BURST_LEAD_MS
from delayline.holds.hold import Hold
from delayline.holds.spark_state import checkpoint_timers

HELPER = "dev.delayline.hold.Holds"
"""The static entry point in the hold jar (:func:`delayline.infra.jvm_hold.hold_jar`)."""


def holds_class(spark: SparkSession) -> Any:
    """The JVM class :data:`HELPER`, through the session's gateway (Spark Classic only).

    Raises:
        ConfigError: the session has no JVM gateway (Spark Connect) or lacks the jar.
    """
    jvm = getattr(spark.sparkContext, "_jvm", None) if hasattr(spark, "sparkContext") else None
    if jvm is None:
        raise ConfigError("the jvm hold needs a classic Spark session (not Spark Connect)")
    helper = jvm.dev.delayline.hold.Holds
    try:
        helper.eventSchemaJson()
    except Exception as exc:  # py4j: a missing class is a JavaPackage, not callable
        raise ConfigError(
            f"{HELPER} is not on Spark's class path: run `delayline jars hold` ({exc})"
        ) from exc
    return helper


class JvmHold(Hold):
    """Pending schedules in Spark state through a Java ``StatefulProcessor``: durable."""

    name: ClassVar[str] = "jvm"
    durable: ClassVar[bool] = True

    def stage(self, records: DataFrame) -> DataFrame:
        spark = records.sparkSession
        helper = holds_class(spark)
        lateness = -1 if self.config.max_lateness_ms is None else self.config.max_lateness_ms
        # A schedule's own tombstone, handed over by this start, stops here: one row a
        # schedule through the shuffle and the state (see Hold.tombstone_mark).
        self.tombstone_mark = secrets.token_hex(8)
        kept = without_settled_tombstones(records, self.tombstone_mark)
        notice = "" if self.notice is None else self.notice.for_jvm()
        jdf = helper.apply(
            parsed(kept)._jdf, lateness, self.config.lead_ms, BURST_LEAD_MS, BURST_DENSE, notice
        )
        events = DataFrame(jdf, spark)
        if events.schema != r.EVENT_SCHEMA:  # the two definitions must never drift
            raise ConfigError(f"the JVM hold emits {events.schema}, expected {r.EVENT_SCHEMA}")
        return events

    def batch_events(self, frame: DataFrame, batch_id: int) -> DataFrame:
        return frame

    def pending_due_times(self, spark: SparkSession) -> list[int]:
        return checkpoint_timers(spark, self.config.checkpoint_dir)
