"""Spark's progress reports reach the metrics and the progress file through the JVM queue."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from delayline.pipeline.metrics import PipelineMetrics
from delayline.pipeline.progress import ProgressFeed


def test_every_batch_is_handed_on_once_in_order_and_the_queue_keeps_no_copy(
    spark: Any, tmp_path: Path
) -> None:
    metrics = PipelineMetrics()
    lines = tmp_path / "progress.jsonl.spark"
    feed = ProgressFeed(spark, metrics, lines)
    query = _rate_query(spark, tmp_path)
    taken = 0
    try:
        deadline = time.monotonic() + 60
        while taken < 4 and time.monotonic() < deadline:
            time.sleep(0.3)
            taken += feed.drain()
    finally:
        query.stop()
    _delivered(spark)
    feed.close()  # hands on what was queued since the last drain
    assert taken >= 4
    assert feed.drain() == 0  # nothing is handed on twice

    written = [json.loads(line) for line in lines.read_text().splitlines()]
    batches = [line["batch_id"] for line in written]
    assert batches == list(range(len(batches)))
    assert len(batches) >= 4
    assert {"triggerExecution", "addBatch"} <= set(written[-1]["duration_ms"])
    received = sum(line["num_input_rows"] for line in written)
    assert received > 0
    families = text_string_to_metric_families(generate_latest(metrics.registry).decode())
    counted = {s.name: s.value for f in families for s in f.samples if not s.labels}
    assert counted["delayline_schedules_received_total"] == received
    assert metrics.progress()["spark"]["batch_id"] == batches[-1]


def test_a_full_queue_keeps_the_newest_reports(spark: Any, tmp_path: Path) -> None:
    lines = tmp_path / "progress.jsonl.spark"
    feed = ProgressFeed(spark, None, lines, capacity=2)
    query = _rate_query(spark, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while _last_batch(query) < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        query.stop()
    last = _last_batch(query)
    _delivered(spark)
    feed.close()
    assert last >= 5
    batches = [json.loads(line)["batch_id"] for line in lines.read_text().splitlines()]
    assert batches == [last - 1, last]


def _rate_query(spark: Any, tmp_path: Path) -> Any:
    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 50)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def _delivered(spark: Any) -> None:
    """Wait until Spark's listener bus has handed every event posted so far to listeners."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()


def _last_batch(query: Any) -> int:
    progress = query.lastProgress
    return -1 if progress is None else int(progress["batchId"])
