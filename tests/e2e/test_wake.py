"""The pipeline runs micro-batches only when something is due, also after a SIGKILL."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.kafka.reader import read_topic
from delayline.oscillator.service import Oscillator, OscillatorConfig
from tests.support import ARTIFACTS, LATENESS_TOLERANCE_MS, make_topics, pipeline_args


def now_ms() -> int:
    return time.time_ns() // 1_000_000


LOADED = re.compile(r"waker: (\d+) wake times planned from the checkpoint")


def batches(progress: Path) -> list[dict[str, Any]]:
    if not progress.exists():
        return []
    return [json.loads(line) for line in progress.read_text().splitlines()]


def planned(progress: Path) -> int:
    return sum(int(b["counts"].get("planned", 0)) for b in batches(progress))


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_idle_pipeline_runs_no_batches_and_wakes_for_a_far_timer_after_sigkill(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("target"))
    progress = tmp_path / "progress.jsonl"
    args = pipeline_args(topics, tmp_path / "checkpoint", "--progress-file", str(progress))
    # A heartbeat longer than the test: only due timers may wake the pipeline.
    process = PipelineProcess(
        kafka_bootstrap, [*args, "--heartbeat-interval", "10m"], ARTIFACTS / f"wake-{target}.log"
    )
    client = ClientConfig(bootstrap_servers=kafka_bootstrap, schedules_topic=topics.schedules)
    with process as pipeline, DeliveryCollector(kafka_bootstrap, [target]) as seen:
        pipeline.start()
        pipeline.wait_ready()
        # Due after the restart below has read the checkpoint's timers (about 20 s on
        # this machine; over 33 s, failing a 45 s due time, while the machine was busy),
        # so only the reloaded plan can wake the pipeline in time.
        due_ms = now_ms() + 90_000
        with Scheduler(client) as scheduler:
            scheduler.schedule("far", b"p", target, at=ms_to_datetime(due_ms))
        deadline = time.monotonic() + 30
        while planned(progress) < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert planned(progress) == 1, pipeline.tail()
        time.sleep(3)  # let any batch in flight finish
        idle_from = len(batches(progress))
        time.sleep(5)
        assert len(batches(progress)) == idle_from, "micro-batches ran with nothing due"

        pipeline.kill()
        pipeline.start()
        pipeline.wait_ready()
        deadline = time.monotonic() + 30
        while (loaded := LOADED.search(pipeline.log_since_start())) is None:
            assert time.monotonic() < deadline, pipeline.tail()
            time.sleep(0.5)
        assert int(loaded.group(1)) >= 1, pipeline.tail()
        assert now_ms() < due_ms - 2_000, "restart too slow for this test to mean anything"

        delivered = seen.wait_for(lambda d: len(d) >= 1, timeout_s=90)
        time.sleep(2)
        assert len(seen.snapshot()) == 1
        assert pipeline.terminate() == 0
    lateness = delivered[0].arrival_ms - due_ms
    assert delivered[0].timestamp_ms >= due_ms
    assert 0 <= lateness <= LATENESS_TOLERANCE_MS, lateness


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_an_oscillators_ticks_wake_the_pipeline_which_writes_none_of_its_own(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """``--waker oscillator``: a batch per tick, schedules delivered on time, and nothing
    but the oscillator's ticks in its topic."""
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("target"))
    ticks = unique_topic("oscillator")
    args = pipeline_args(topics, tmp_path / "checkpoint", "--waker", "oscillator",
                         "--wake-topic", ticks, "--heartbeat-interval", "10m")  # fmt: skip
    process = PipelineProcess(kafka_bootstrap, args, ARTIFACTS / f"oscillator-{target}.log")
    client = ClientConfig(bootstrap_servers=kafka_bootstrap, schedules_topic=topics.schedules)
    stop = threading.Event()
    oscillator = Oscillator(OscillatorConfig(kafka_bootstrap, ticks))
    with process as pipeline, DeliveryCollector(kafka_bootstrap, [target]) as seen:
        pipeline.start()
        pipeline.wait_ready()
        oscillator.start()
        ticking = threading.Thread(target=oscillator.run_until, args=(stop,), daemon=True)
        ticking.start()
        try:
            due = {f"osc-{i}": now_ms() + 8_000 + i * 1_500 for i in range(4)}
            with Scheduler(client) as scheduler:
                for sid, at in due.items():
                    scheduler.schedule(sid, b"p", target, at=ms_to_datetime(at))
            delivered = seen.wait_for(lambda d: len(d) >= len(due), timeout_s=60)
            time.sleep(2)
            assert len(seen.snapshot()) == len(due)
            assert pipeline.terminate() == 0
        finally:
            stop.set()
            ticking.join(10)
            oscillator.close()
    for d in delivered:
        at = due[d.schedule_id or ""]
        assert d.timestamp_ms >= at
        assert 0 <= d.arrival_ms - at <= LATENESS_TOLERANCE_MS
    in_topic = read_topic(kafka_bootstrap, ticks)
    assert in_topic, "no ticks"
    assert all(r.value == b"1" and (r.key or b"").isdigit() for r in in_topic)
