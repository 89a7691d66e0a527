"""The pipeline runs micro-batches only when something is due, also after a SIGKILL."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
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
        # this machine), so only the reloaded plan can wake the pipeline in time.
        due_ms = now_ms() + 45_000
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
