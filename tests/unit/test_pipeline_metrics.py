"""Pipeline metrics: counts from batch reports and Spark progress, served over HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import Counter
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from delayline.committer.config import CommitterStatus
from delayline.contract import events as r
from delayline.core.clock import ManualClock
from delayline.core.histogram import BatchHistogram
from delayline.fire.report import REFUSED, BatchReport
from delayline.pipeline.metrics import PipelineMetrics
from delayline.pipeline.metrics_server import MetricsServer, Readiness, batch_age
from delayline.pipeline.wake import WakerStats


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
        3,
        Counter(
            {r.Kind.RAISE: 2, r.Kind.PLANNED: 5, r.Kind.UPDATED: 1, r.INVALID: 1, r.Kind.MISSED: 1}
        ),
        [400, 1_600],
    )
    metrics.observe_batch(report)
    metrics.observe_batch(BatchReport(4, Counter({r.Kind.RAISE: 7}), [1, 2], committed=False))
    progress = {
        "batchId": 3,
        "numInputRows": 8,
        "durationMs": {"triggerExecution": 1_900, "latestOffset": 1_000},  # 1 s at the gate
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
    assert got["delayline_batch_duration_seconds_sum"] == 0.9  # the wait at the gate left out


def test_server_answers_metrics_and_progress() -> None:
    metrics = PipelineMetrics()
    metrics.observe_batch(BatchReport(1, Counter({r.Kind.RAISE: 1}), [250]))
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


def test_past_due_deliveries_have_their_own_histogram_and_refused_ones_a_counter() -> None:
    metrics = PipelineMetrics()
    days = 2_517 * 86_400
    report = BatchReport(
        7,
        Counter({r.Kind.RAISE: 2, r.Kind.MISSED: 1, REFUSED: 1}),
        [1_000],
        missed_lateness_ms=[days * 1000],
    )
    metrics.observe_batch(report)
    got = samples(metrics)
    assert got["delayline_schedules_fired_total"] == 2
    assert got["delayline_schedules_refused_total"] == 1
    assert got["delayline_schedules_missed_total"] == 1
    assert got["delayline_lateness_seconds_count"] == 1
    assert got["delayline_lateness_seconds_sum"] == 1.0  # not 6.5e8
    assert got["delayline_missed_lateness_seconds_count"] == 1
    assert got["delayline_missed_lateness_seconds_sum"] == days


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read())


def test_readyz_needs_a_recent_batch_and_kafka_answering() -> None:
    clock = ManualClock(1_000_000)
    metrics = PipelineMetrics()
    kafka: list[str | None] = [None]
    probes: list[int] = []

    def probe() -> str | None:
        probes.append(clock.now_ms())
        return kafka[0]

    readiness = Readiness(probe, (batch_age(metrics, 60_000, clock),), clock=clock)
    server = MetricsServer(metrics, "127.0.0.1", 0, readiness)
    server.start()
    url = f"http://127.0.0.1:{server.port}/readyz"
    try:
        assert get(url) == (
            503,
            {"status": "not ready", "reasons": ["no micro-batch finished yet"]},
        )
        metrics.observe_batch(BatchReport(0, finished_ms=clock.now_ms()))
        assert get(url) == (200, {"status": "ready"})
        assert len(probes) == 1  # the answer stands for probe_every_ms
        kafka[0] = "Kafka at k:9092 did not answer"
        clock.advance(5_000)
        assert get(url) == (503, {"status": "not ready", "reasons": [kafka[0]]})
        kafka[0] = None
        clock.advance(56_000)
        status, body = get(url)
        assert status == 503
        assert body["reasons"] == ["last micro-batch finished 1m1s ago (more than 1m)"]
        metrics.observe_batch(BatchReport(1, finished_ms=clock.now_ms()))
        assert get(url) == (200, {"status": "ready"})
    finally:
        server.stop()


def test_readyz_judges_an_idle_pipeline_by_the_batches_it_needs() -> None:
    """With a waker, no batch for minutes is fine while none is owed; one owed for more
    than a minute makes the pipeline not ready, and so does none for the backstop."""
    clock = ManualClock(1_000_000)
    metrics = PipelineMetrics()
    owed: list[int | None] = [None]
    check = batch_age(metrics, 360_000, clock, owed_since=lambda: owed[0], max_owed_ms=60_000)
    assert check() == "no micro-batch finished yet"
    metrics.observe_batch(BatchReport(0, finished_ms=clock.now_ms()))
    clock.advance(240_000)
    assert check() is None  # idle: four minutes without a batch, none owed
    owed[0] = clock.now_ms()
    clock.advance(60_000)
    assert check() is None
    clock.advance(1_000)
    assert check() == "a micro-batch is needed since 1m1s ago and none ran (more than 1m)"
    owed[0] = None
    assert check() is None
    clock.advance(60_000)
    assert check() == "last micro-batch finished 6m1s ago (more than 6m)"


def test_readyz_says_the_committer_stopped() -> None:
    """A committer stopped for good (another runs under its name) makes the pipeline not
    ready, whatever its batches, until the process exits on it."""
    clock = ManualClock(1_000_000)
    metrics = PipelineMetrics()
    stopped: list[str | None] = [None]
    readiness = Readiness(
        lambda: None, (batch_age(metrics, 60_000, clock), lambda: stopped[0]), clock=clock
    )
    metrics.observe_batch(BatchReport(0, finished_ms=clock.now_ms()))
    assert readiness.reasons() == []
    stopped[0] = "the committer stopped: another committer of the group runs under its name"
    assert readiness.reasons() == [stopped[0]]


def test_each_executors_tasks_and_writes_are_counted_by_label() -> None:
    metrics = PipelineMetrics()
    report = BatchReport(5, Counter({r.Kind.RAISE: 5}), [1] * 5)
    report.executors = {
        "h/0": Counter({"tasks": 1, r.Kind.RAISE: 3}),
        "h/1": Counter({"tasks": 2, r.Kind.RAISE: 2, "handed": 4}),
    }
    metrics.observe_batch(report)
    replayed = BatchReport(6, Counter({r.Kind.RAISE: 9}), committed=False)
    replayed.executors = {"h/0": Counter({"tasks": 1, r.Kind.RAISE: 9})}
    metrics.observe_batch(replayed)  # wrote nothing: not counted
    labelled = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        for sample in family.samples
        if sample.labels
    }
    assert labelled[("delayline_executor_tasks_total", (("executor", "h/0"),))] == 1
    assert labelled[("delayline_executor_tasks_total", (("executor", "h/1"),))] == 2
    written = "delayline_executor_schedules_written_total"
    assert labelled[(written, (("executor", "h/0"), ("kind", "fire")))] == 3
    assert labelled[(written, (("executor", "h/1"), ("kind", "fire")))] == 2
    assert labelled[(written, (("executor", "h/1"), ("kind", "handed")))] == 4
    assert (written, (("executor", "h/0"), ("kind", "handed"))) not in labelled


def test_the_wakers_wakes_margin_and_unread_input_are_shown() -> None:
    metrics = PipelineMetrics()
    stats = WakerStats(wakes=3, margin_ms=1_500, unread=42)
    metrics.watch_waker(lambda: stats)
    seen = samples(metrics)
    assert seen["delayline_wakes_total"] == 3
    assert seen["delayline_wake_margin_seconds"] == 1.5
    assert seen["delayline_input_unread"] == 42
    assert metrics.progress()["waker"] == {
        "wakes": 3,
        "margin_ms": 1_500,
        "unread": 42,
        "waiting_since_ms": None,
        "heartbeat_ms": None,
    }
    stats = WakerStats(wakes=4, margin_ms=2_000, unread=None)  # batching on input
    seen = samples(metrics)
    assert seen["delayline_wakes_total"] == 4
    assert "delayline_input_unread" not in seen
    metrics.watch_waker(lambda: WakerStats(wakes=0, margin_ms=1_500, unread=0))  # started again
    assert samples(metrics)["delayline_wakes_total"] == 0


def test_a_batch_histogram_is_exposed_as_prometheus_client_exposes_a_histogram() -> None:
    """Observed a batch at a time, in milliseconds: the same buckets, count and sum as
    one observed value by value, in seconds."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    batch = BatchHistogram("late_seconds", "Late.", (0.005, 0.05, 1.0), ["c"], registry=ours)
    plain = Histogram("late_seconds", "Late.", ["c"], buckets=(0.005, 0.05, 1.0), registry=theirs)
    values_ms = [-3, 0, 5, 6, 50, 51, 999, 1_000, 1_001, 60_000]
    batch.labels("a").observe_ms(values_ms[:4])
    batch.observe_ms(values_ms[4:], "a")
    for value in values_ms:
        plain.labels("a").observe(max(value, 0) / 1000)
    assert _samples(ours) == _samples(theirs)


def _samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    return {
        (s.name, s.labels.get("le", "")): round(s.value, 6)
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_a_committers_reviews_are_shown_by_outcome() -> None:
    metrics = PipelineMetrics()
    status = CommitterStatus("c1", (0,), 0, 0, reviews_written=4, reviews_dropped=1)
    metrics.watch_committer(lambda: status, dict, ("q-inflight", lambda: 1))
    labelled = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        for sample in family.samples
    }
    name = "delayline_committer_reviews_total"
    assert labelled[(name, (("committer", "c1"), ("outcome", "written")))] == 4
    assert labelled[(name, (("committer", "c1"), ("outcome", "dropped")))] == 1
