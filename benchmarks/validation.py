"""The pipeline's validation in Spark's JVM, per record, warm: no Kafka, no hold.

Builds ``--records`` rows shaped as Spark's Kafka source gives them (half schedules of
the header contract with four headers and a 100-byte payload, half delayline's own
tombstones, as a busy pipeline reads them), caches them, and writes
:func:`delayline.contract.columns.parsed` of them to Spark's ``noop`` sink ``--runs``
times. Prints the JVM's CPU per record of each run (from ``/proc``), the cached rows
alone for scale, and with ``--json`` writes the figures.

``--columns FILE`` measures another version of ``contract/columns.py`` (an A/B against
an earlier commit: ``git show REV:src/delayline/contract/columns.py > FILE``).

    .venv/bin/python benchmarks/validation.py [--records 400000] [--runs 12]
        [--columns FILE] [--java-options OPTS] [--json F]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from delayline.bench.sampler import cpu_by_role
from delayline.contract import columns as current
from delayline.contract import headers as h
from delayline.pipeline.config import PipelineConfig
from delayline.pipeline.session import build_session


def records(spark: SparkSession, count: int) -> DataFrame:
    """``count`` rows as the Kafka source's, schedules and tombstones alternating."""
    schedule_headers = (
        f"array(named_struct('key', '{h.EPOCH}', 'value',"
        " cast(format_string('%d.%03d', 1900000000 + id % 1000, id % 1000) AS BINARY)),"
        f" named_struct('key', '{h.TARGET_TOPIC}', 'value', cast('orders' AS BINARY)),"
        f" named_struct('key', '{h.TARGET_KEY}', 'value', cast(concat('order-', id) AS BINARY)),"
        " named_struct('key', 'trace-id', 'value', cast(hex(id) AS BINARY)))"
    )
    tombstone_headers = (
        f"array(named_struct('key', '{h.FIRED_OFFSET}', 'value',"
        " cast(cast(id - 1 AS STRING) AS BINARY)))"
    )
    rows = spark.range(count).selectExpr(
        "'schedules' AS topic",
        "cast(uuid() AS BINARY) AS key",
        "CASE WHEN id % 2 = 0 THEN cast(repeat('x', 100) AS BINARY) END AS value",
        "cast(id % 12 AS INT) AS partition",
        "id AS offset",
        "1900000000000 AS timestamp_ms",
        f"CASE WHEN id % 2 = 0 THEN {schedule_headers} ELSE {tombstone_headers} END AS headers",
    )
    return rows.withColumn("gkey", rows["key"]).repartition(2).cache()


def per_record_us(frame: DataFrame, count: int) -> float:
    """The JVM's CPU per record to write ``frame`` to the noop sink (Spark's JVM is this
    process's child in local mode)."""
    before = cpu_by_role(os.getpid())["jvm"]
    frame.write.format("noop").mode("overwrite").save()
    return (cpu_by_role(os.getpid())["jvm"] - before) * 1e6 / count


def load_columns(path: Path | None) -> Any:
    """``contract/columns.py`` as it is, or the version in ``path``."""
    if path is None:
        return current
    spec = importlib.util.spec_from_file_location("columns_under_test", path)
    assert spec is not None, path
    assert spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=12, help="the last half count as warm")
    parser.add_argument("--columns", type=Path, help="another contract/columns.py to measure")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--java-options", default="", help="extra options of Spark's JVM")
    args = parser.parse_args()
    columns = load_columns(args.columns)
    with tempfile.TemporaryDirectory() as work:
        config = PipelineConfig(
            checkpoint_dir=Path(work) / "checkpoint", java_options=args.java_options
        )
        spark = build_session(config)
        try:
            rows = records(spark, args.records)
            rows.count()
            frame = columns.parsed(rows)
            runs = []
            for run in range(args.runs):
                start = time.monotonic()
                runs.append(per_record_us(frame, args.records))
                took = time.monotonic() - start
                print(f"run {run + 1}: {runs[-1]:.2f} us of CPU a record, {took:.2f} s", flush=True)
            alone = per_record_us(rows, args.records)
        finally:
            spark.stop()
    warm = runs[len(runs) // 2 :]
    figures = {
        "records": args.records,
        "columns": str(args.columns or "current"),
        "java_options": args.java_options,
        "runs_us": [round(x, 2) for x in runs],
        "warm_best_us": round(min(warm), 2),
        "warm_median_us": round(statistics.median(warm), 2),
        "cached_rows_alone_us": round(alone, 2),
    }
    print(f"warm: best {figures['warm_best_us']}, median {figures['warm_median_us']} us a record;"
          f" the cached rows alone {figures['cached_rows_alone_us']}")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps({"figures": figures}, indent=2) + "\n")


if __name__ == "__main__":
    main()
