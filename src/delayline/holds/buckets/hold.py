"""The bucket hold: pending schedules wait in Kafka, in time-bucket topics.

A schedule that is not yet due is *routed*: written, as a copy
(:mod:`.copy`), into the bucket of its remaining wait (:mod:`.config`), in the same Kafka
transaction as the rest of its batch (:mod:`delayline.fire`). Each micro-batch reads
back what is ready in each bucket (:mod:`.source`); the gate (``BucketGate``, Java)
fires a copy whose raise time has come and routes any other to the bucket of what it
has left, a smaller one. Spark state keeps, per pending schedule, only its version and
when its live copy was routed (about 60 bytes): never its payload or headers.

Cancels and updates: a new version is folded by the hold rules
(:mod:`delayline.holds.fold`) against the version held, whatever bucket its copy is in;
a copy is judged when it comes back, against the state of that moment, and a copy
that is not the live one is dropped. So a cancel needs no path to the copy it ends.

Exactly once: a batch's routed copies, deliveries, tombstones and its marker are one
transaction per task; the ranges it read are in Spark's offsets log before it runs, so
a replay reads the same copies, decides the same, and finds its marker committed.
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

from delayline.contract import events as r
from delayline.contract.columns import parsed
from delayline.errors import ConfigError
from delayline.holds.buckets.config import BucketsConfig
from delayline.holds.buckets.read import COLUMNS
from delayline.holds.buckets.source import NAME, BucketSource, layout_options
from delayline.holds.hold import Hold
from delayline.holds.jvm import holds_class
from delayline.holds.registry import settings_of


def gate_input(records: DataFrame) -> DataFrame:
    """Parsed schedules-topic records in the gate's columns (:data:`COLUMNS`)."""
    frame = parsed(records)
    present = set(frame.columns)
    return frame.select(
        *[
            F.col(name) if name in present else F.lit(None).cast(kind).alias(name)
            for name, kind in COLUMNS
        ]
    )


class BucketHold(Hold):
    """Pending schedules in Kafka bucket topics; their versions in Spark state: durable."""

    name: ClassVar[str] = "buckets"
    durable: ClassVar[bool] = True
    wakes_itself: ClassVar[bool] = True

    def stage(self, records: DataFrame) -> DataFrame:
        spark = records.sparkSession
        helper = holds_class(spark)
        spark.dataSource.register(BucketSource)
        config = self.config
        copies = (
            spark.readStream.format(NAME)
            .options(
                **layout_options(
                    config.topology.bootstrap_servers,
                    settings_of(config, BucketsConfig),
                    config.max_offsets_per_trigger,
                    tasks=config.shuffle_partitions,
                )
            )
            .load()
        )
        both = gate_input(records).unionByName(copies)
        lateness = -1 if config.max_lateness_ms is None else config.max_lateness_ms
        events = DataFrame(helper.applyBuckets(both._jdf, lateness, config.lead_ms), spark)
        if events.schema != r.EVENT_SCHEMA:  # the two definitions must never drift
            raise ConfigError(f"the bucket gate emits {events.schema}, expected {r.EVENT_SCHEMA}")
        return events

    def batch_events(self, frame: DataFrame, batch_id: int) -> DataFrame:
        return frame
