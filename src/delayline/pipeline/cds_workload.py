"""The workload whose classes :func:`delayline.infra.cds.build_archive` records.

``python -m delayline.pipeline.cds_workload ARCHIVE``: a Spark session as the pipeline
builds it runs what a pipeline's batches run (a stream through the SQL validation and
the default hold, the JVM hold, into RocksDB state, a shuffle, a Python ``mapInArrow``
stage), without Kafka; its JVM writes ``ARCHIVE`` when it exits.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from delayline.holds.hold import hold_for
from delayline.pipeline.config import PipelineConfig


def main(archive: Path) -> None:
    """Run the workload in a JVM that records ``archive`` at its exit."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark's convention

    from delayline.pipeline.session import build_session  # noqa: PLC0415 - pyspark loads once the JVM's options are set

    with tempfile.TemporaryDirectory(prefix="delayline-cds-") as tmp:
        base = PipelineConfig(checkpoint_dir=Path(tmp) / "checkpoint")
        # Not quiet: when no archive is written, the JVM's words say why.
        config = dataclasses.replace(
            base, java_options=f'{base.java_options} -XX:ArchiveClassesAtExit="{archive}"'
        )
        spark = build_session(config)
        rate = spark.readStream.format("rate").option("rowsPerSecond", 100).load()
        key = F.col("value").cast("string").cast("binary")
        records = rate.select(
            F.lit("cds").alias("topic"),
            key.alias("gkey"),
            key.alias("key"),
            F.lit(b"x").alias("value"),
            F.lit(0).alias("partition"),
            F.col("value").alias("offset"),
            F.unix_millis("timestamp").alias("timestamp_ms"),
            F.array(
                F.struct(
                    F.lit("scheduler-topic").alias("key"), F.lit(b"cds-target").alias("value")
                ),
                F.struct(F.lit("scheduler-epoch").alias("key"), F.lit(b"1").alias("value")),
            ).alias("headers"),
        )
        events = hold_for(config).stage(records)  # the default hold's classes

        def fire(frame: Any, _batch_id: int) -> None:
            frame.mapInArrow(_count_rows, "rows LONG").collect()

        query = (
            events.writeStream.foreachBatch(fire)
            .option("checkpointLocation", str(config.checkpoint_dir))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        spark.range(1000).groupBy((F.col("id") % 7).alias("k")).count().collect()
        spark.stop()


def _count_rows(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa  # noqa: PLC0415 - executor side

    total = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_pylist([{"rows": total}])


if __name__ == "__main__":  # pragma: no cover - run by build_archive in a child
    main(Path(sys.argv[1]))
