"""Recurring schedules through the real pipeline: every second for a minute across two
SIGKILLs (one mid-batch, after its fire transaction, before Spark commits it), each
occurrence delivered once, none early."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest

from delayline.client import CatchUp, ClientConfig, Recurrence, Scheduler
from delayline.contract.headers import EPOCH, OCCURRENCE, parse_epoch_ms
from delayline.core.faults import FIRE_COMMITTED, PAUSE_AT_ENV, PAUSE_MARKER_ENV
from delayline.dev.harness import Delivery, DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from tests.support import ARTIFACTS, make_topics, pipeline_args, wait_paused

OCCURRENCES = 60
"""Each schedule recurs every second for a minute."""
RATES = 3
"""Schedules ``every 1s``; as many again by cron ``* * * * * *`` (the second field)."""


def occurrence(d: Delivery) -> tuple[str, int, int]:
    """(schedule id, occurrence number, nominal time) of a delivery."""
    headers = dict(d.headers)
    number = int((headers[OCCURRENCE] or b"0").decode())
    return d.schedule_id or "", number, parse_epoch_ms((headers[EPOCH] or b"").decode())


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_every_second_for_a_minute_across_a_sigkill(kafka_bootstrap: str, tmp_path: Path) -> None:
    """Six schedules, every second for a minute (catch-up ``all``). The pipeline is
    SIGKILLed in the batch that first hands them over, once its fire transaction has
    committed and before Spark commits the batch (the restart replays it), then again
    after about 15 s of deliveries, each time started again at once. Every occurrence of
    each is delivered exactly once, numbered 1 to 60, none before its nominal time; those
    due while the pipeline was down are delivered late, in order."""
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("target"), partitions=2)
    process = PipelineProcess(
        kafka_bootstrap,
        pipeline_args(topics, tmp_path / "checkpoint"),
        ARTIFACTS / f"recurring-{topics.schedules}.log",
    )
    config = ClientConfig(bootstrap_servers=kafka_bootstrap, schedules_topic=topics.schedules)
    ids = [f"rate-{i}" for i in range(RATES)] + [f"cron-{i}" for i in range(RATES)]
    with process as pipeline, DeliveryCollector(kafka_bootstrap, [target]) as seen:
        marker = tmp_path / "paused"
        pipeline.start(env={PAUSE_AT_ENV: FIRE_COMMITTED, PAUSE_MARKER_ENV: str(marker)})
        pipeline.wait_ready()
        with Scheduler(config) as client:
            for sid in ids:
                rule = (
                    Recurrence(every_ms=1_000, max_occurrences=OCCURRENCES, catch_up=CatchUp.ALL)
                    if sid.startswith("rate")
                    else Recurrence(
                        cron="* * * * * *", max_occurrences=OCCURRENCES, catch_up=CatchUp.ALL
                    )
                )
                client.schedule(sid, b"tick", target, delay=timedelta(seconds=3), recurrence=rule)
        wait_paused(pipeline, marker, timeout_s=60)
        pipeline.kill()  # mid-batch: its records written, the batch not committed
        pipeline.start()
        pipeline.wait_ready()
        seen.wait_for(lambda d: len(d) >= 15 * len(ids), timeout_s=60)
        pipeline.kill()
        killed_at = len(seen.snapshot())
        pipeline.start()
        pipeline.wait_ready()
        seen.wait_for(lambda d: len(d) >= OCCURRENCES * len(ids), timeout_s=180)
        time.sleep(5)  # a duplicate, or a 61st occurrence, would show now
        deliveries = seen.snapshot()
        assert pipeline.terminate() == 0
    found = [occurrence(d) for d in deliveries]
    counts = Counter((sid, n) for sid, n, _ in found)
    twice = {k: c for k, c in counts.items() if c > 1}
    assert not twice, f"delivered twice: {sorted(twice)[:5]}"
    assert set(counts) == {(sid, n) for sid in ids for n in range(1, OCCURRENCES + 1)}
    by_id: dict[str, list[tuple[int, int]]] = {}
    for sid, n, nominal in found:
        by_id.setdefault(sid, []).append((n, nominal))
    for sid, seq in by_id.items():
        seq.sort()
        steps = {b[1] - a[1] for a, b in pairwise(seq)}
        assert steps == {1_000}, f"{sid}: occurrences not a second apart: {sorted(steps)}"
    early = [d for d, (_, _, nominal) in zip(deliveries, found, strict=True)
             if d.timestamp_ms < nominal or d.arrival_ms < nominal]  # fmt: skip
    assert not early, f"{len(early)} delivered before their nominal time"
    lateness = sorted(
        d.arrival_ms - nominal for d, (_, _, nominal) in zip(deliveries, found, strict=True)
    )
    print(
        f"\n{len(deliveries)} occurrences, {killed_at} before the SIGKILL; lateness p50 "
        f"{lateness[len(lateness) // 2]} ms, p99 {lateness[len(lateness) * 99 // 100]} ms, "
        f"max {lateness[-1]} ms"
    )
