"""The pipeline's input lag, readiness gauge and late hand-overs in its metrics."""

from __future__ import annotations

import json

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from delayline.core.clock import ManualClock
from delayline.errors import KafkaUnavailableError
from delayline.fire.report import Delivered
from delayline.pipeline.input_lag import InputLag, Positions, batch_ends, lag_by_topic
from delayline.pipeline.metrics import PipelineMetrics


def scraped(metrics: PipelineMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def progress(batch: int, ends: dict[str, dict[str, int]]) -> dict[str, object]:
    sources = [
        {"description": "KafkaV2[Subscribe[a,b]]", "endOffset": json.dumps(ends)},
        {"description": "rate", "endOffset": "12"},  # not a Kafka source: skipped
    ]
    return {"batchId": batch, "numInputRows": 1, "sources": sources}


def test_a_progress_reports_kafka_end_offsets_by_partition() -> None:
    report = progress(4, {"a": {"0": 10, "1": 7}, "b": {"0": 3}})
    assert batch_ends(report) == {("a", 0): 10, ("a", 1): 7, ("b", 0): 3}
    parsed = {"sources": [{"endOffset": {"a": {"2": 5, "x": 9}}}, "junk", {"endOffset": "{"}]}
    assert batch_ends(parsed) == {("a", 2): 5}
    assert batch_ends({}) == {}


def test_lag_is_summed_per_topic_and_never_negative() -> None:
    read = {("a", 0): 10, ("a", 1): 7, ("b", 0): 3}
    ends = {("a", 0): 15, ("a", 1): 7, ("b", 0): 2, ("c", 0): 99}
    assert lag_by_topic(read, ends) == {"a": 5, "b": 0}


def test_the_lag_is_asked_of_kafka_once_per_period() -> None:
    clock = ManualClock(1_000_000)
    asked: list[list[tuple[str, int]]] = []
    ends: Positions = {("a", 0): 20}

    def kafka(parts: list[tuple[str, int]]) -> Positions:
        asked.append(parts)
        return dict(ends)

    lag = InputLag(lambda: {("a", 0): 12}, kafka, clock, every_ms=5_000)
    families = list(lag.collect())
    assert families[0].samples[0].value == 8
    ends[("a", 0)] = 30
    clock.advance(4_999)
    assert next(iter(lag.collect())).samples[0].value == 8  # the answer stands
    clock.advance(1)
    assert next(iter(lag.collect())).samples[0].value == 18
    assert asked == [[("a", 0)], [("a", 0)]]


def test_kafka_away_shows_no_lag_rather_than_failing_the_scrape() -> None:
    def away(parts: list[tuple[str, int]]) -> Positions:
        raise KafkaUnavailableError("no")

    lag = InputLag(lambda: {("a", 0): 12}, away, ManualClock(0))
    assert next(iter(lag.collect())).samples == []


def test_the_pipelines_input_lag_follows_its_last_batch() -> None:
    metrics = PipelineMetrics()
    metrics.watch_input_lag(lambda parts: {p: 100 for p in parts})
    assert not any(name == "delayline_input_lag_records" for name, _ in scraped(metrics))
    metrics.observe_progress([progress(1, {"a": {"0": 40, "1": 70}})])
    metrics.observe_progress([{"batchId": 2, "numInputRows": 0}])  # no sources: ends kept
    assert scraped(metrics)[("delayline_input_lag_records", (("topic", "a"),))] == 90


def test_readiness_and_late_hand_overs_are_metrics() -> None:
    metrics = PipelineMetrics()
    reasons: list[str] = ["catching up"]
    metrics.watch_readiness(lambda: list(reasons))
    assert scraped(metrics)[("delayline_ready", ())] == 0
    reasons.clear()
    assert scraped(metrics)[("delayline_ready", ())] == 1
    metrics.observe_committed(Delivered(5, 0, [1, 2, 3, 4, 5], arrived_due=2), "c1")
    metrics.observe_committed(Delivered(1, 0, [1]), "c1")
    key = ("delayline_committer_arrived_due_total", (("committer", "c1"),))
    assert scraped(metrics)[key] == 2
    assert scraped(metrics)[("process_resident_memory_bytes", ())] > 0
