"""Pipeline metrics: counts from batch reports and Spark progress, served over HTTP."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from delayline.fire.sink import BatchReport
from delayline.pipeline import rows as r
from delayline.pipeline.metrics import MetricsServer, PipelineMetrics


def samples(metrics: PipelineMetrics) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for sample in family.samples:
            if not sample.labels:
                out[sample.name] = sample.value
    return out


def test_batches_and_progress_become_counters_histogram_and_gauge() -> None:
    metrics = PipelineMetrics()
    report = BatchReport(
        3, Counter({r.FIRE: 2, r.PLANNED: 5, r.UPDATED: 1, r.INVALID: 1, r.MISSED: 1}), [400, 1_600]
    )
    metrics.observe_batch(report)
    metrics.observe_batch(BatchReport(4, Counter({r.FIRE: 7}), [1, 2], committed=False))
    progress = {
        "batchId": 3,
        "numInputRows": 8,
        "durationMs": {"triggerExecution": 900},
        "stateOperators": [{"numRowsTotal": 40}, {"numRowsTotal": 2}],
    }
    metrics.observe_progress([progress, progress])  # the same batch twice counts once
    got = samples(metrics)
    assert got["delayline_schedules_fired_total"] == 2  # the replayed batch wrote nothing
    assert got["delayline_schedules_planned_total"] == 5
    assert got["delayline_schedules_updated_total"] == 1
    assert got["delayline_schedules_invalid_total"] == 1
    assert got["delayline_schedules_missed_total"] == 1
    assert got["delayline_schedules_received_total"] == 8
    assert got["delayline_schedules_pending"] == 42
    assert got["delayline_lateness_seconds_count"] == 2
    assert got["delayline_lateness_seconds_sum"] == 2.0
    assert got["delayline_batch_duration_seconds_count"] == 1


def test_server_answers_metrics_and_progress() -> None:
    metrics = PipelineMetrics()
    metrics.observe_batch(BatchReport(1, Counter({r.FIRE: 1}), [250]))
    metrics.observe_progress([{"batchId": 1, "numInputRows": 1, "stateOperators": []}])
    server = MetricsServer(metrics, "127.0.0.1", 0)
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(base + "/metrics") as response:
            assert b"delayline_schedules_fired_total 1.0" in response.read()
        with urllib.request.urlopen(base + "/progress") as response:
            progress = json.loads(response.read())
        assert progress["last_batch"]["deliveries"] == 1
        assert progress["last_batch"]["lateness_p50_ms"] == 250
        assert progress["spark"]["batch_id"] == 1
    finally:
        server.stop()
