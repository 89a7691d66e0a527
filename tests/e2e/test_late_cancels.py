"""Cancels and updates written shortly before the due time, with the default lead (5 s):
the hold has already handed the schedule to the committer, which withholds it."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import ms_to_datetime
from delayline.core.faults import FIRE_BEFORE_COMMIT, PAUSE_AT_ENV, PAUSE_MARKER_ENV
from delayline.dev.harness import Delivery, DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from tests.support import ARTIFACTS, RunningPipeline, eventually, make_topics, pipeline_args

AHEAD_MS = (4_000, 1_000, 200)
"""How long before the due time the cancels and updates are written."""
EACH = 4
"""Cancels, updates and untouched schedules per lead time."""
MOVED_MS = 2_000
"""An update moves its schedule this much later."""
ACKED_BEFORE_MS = 20
"""The guarantee: a cancel or update acknowledged this long before the due time wins."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def wait_until(at_ms: int) -> None:
    time.sleep(max(0, at_ms - now_ms()) / 1000)


def check(deliveries: list[Delivery], due: dict[str, int], kept: set[str]) -> None:
    """Cancelled ids never delivered; updated ones once, their second version at its
    time; untouched ones once, at theirs; none early."""
    counts = Counter(d.schedule_id or "" for d in deliveries)
    assert {k: n for k, n in counts.items() if n > 1} == {}, "delivered twice"
    assert set(counts) == kept, (
        f"cancelled but delivered: {sorted(set(counts) - kept)}; lost: {sorted(kept - set(counts))}"
    )
    for d in deliveries:
        sid = d.schedule_id or ""
        assert d.value == (b"v2" if sid.startswith("u") else b"v1"), f"{sid}: the old version"
        assert d.timestamp_ms >= due[sid], f"{sid}: stamped early"
        assert d.arrival_ms >= due[sid], f"{sid}: visible early"


def test_cancels_and_updates_just_before_the_due_time_win(pipeline: RunningPipeline) -> None:
    """All due 8 s after writing, so handed over 3 s later; then, 4 s, 1 s and 200 ms
    before the due time, a cancel or an update (2 s later, new payload) of each their own,
    acknowledged by Kafka at least :data:`ACKED_BEFORE_MS` before the due time (the
    guarantee's bound)."""
    target = pipeline.target()
    at = now_ms() + 8_000
    due: dict[str, int] = {}
    with DeliveryCollector(pipeline.bootstrap, [target]) as seen, pipeline.client() as client:
        # One producer throughout: a fresh one's first write waits for its connection
        # and producer id (over 200 ms here with Spark busy), which the writes below
        # must not (their acknowledgement is what the guarantee is about).
        for ahead in AHEAD_MS:
            for n in range(EACH):
                for kind in "cuk":  # cancelled, updated, kept
                    sid = f"{kind}{ahead}-{n}"
                    client.schedule(sid, b"v1", target, at=ms_to_datetime(at))
                    due[sid] = at + (MOVED_MS if kind == "u" else 0)
        client.flush()
        for ahead in AHEAD_MS:  # in the order of their writing times
            wait_until(at - ahead)
            for n in range(EACH):  # queued together, acknowledged by the flush
                client.cancel(f"c{ahead}-{n}", wait=False)
                client.schedule(f"u{ahead}-{n}", b"v2", target,
                                at=ms_to_datetime(at + MOVED_MS))  # fmt: skip
            client.flush()
            acked_ms = now_ms()
            assert acked_ms <= at - ACKED_BEFORE_MS, (
                f"the writes {ahead} ms before due were acknowledged only "
                f"{at - acked_ms} ms before it: too late for the guarantee"
            )
        kept = {sid for sid in due if not sid.startswith("c")}
        seen.wait_for(lambda d: {x.schedule_id for x in d} >= kept, timeout_s=60)
        time.sleep(3)  # a cancelled or old version delivered late would show by now
        check(seen.snapshot(), due, kept)


@pytest.mark.parametrize(
    "killed",
    [pytest.param("after-hand-over", marks=pytest.mark.long), "during-hand-over"],
)
def test_a_cancel_written_while_the_pipeline_is_down_wins(
    kafka_bootstrap: str, tmp_path: Path, killed: str
) -> None:
    """SIGKILL after the hand-over (the in-flight records committed), or during it (the
    batch that hands over stopped before its transaction: its replay after the restart
    hands over again, already due), then cancels and updates, then a restart that comes
    back after the due time: the restarted committer withholds what was cancelled or
    updated (read from where the checkpoint's batches stopped reading), delivers the
    rest once."""
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("target"), partitions=2)
    config = ClientConfig(bootstrap_servers=kafka_bootstrap, schedules_topic=topics.schedules)
    process = PipelineProcess(
        kafka_bootstrap,
        pipeline_args(topics, tmp_path / "checkpoint"),
        ARTIFACTS / f"late-cancel-{topics.schedules}.log",
    )
    pause = {PAUSE_AT_ENV: FIRE_BEFORE_COMMIT, PAUSE_MARKER_ENV: str(tmp_path / "paused")}
    with process as running, DeliveryCollector(kafka_bootstrap, [target]) as seen:
        running.start(env=pause if killed == "during-hand-over" else None)
        running.wait_ready()
        at = now_ms() + 9_000
        due: dict[str, int] = {}
        with Scheduler(config) as client:
            for n in range(EACH * 2):
                for kind in "cuk":
                    sid = f"{kind}-{n}"
                    client.schedule(sid, b"v1", target, at=ms_to_datetime(at))
                    due[sid] = at + (MOVED_MS if kind == "u" else 0)
        if killed == "during-hand-over":
            marker = tmp_path / "paused"
            eventually(marker.exists, 60, "the batch that hands over pauses")
        else:
            wait_until(at - 2_500)  # handed over 5 s before due, and committed since
        running.kill()
        with Scheduler(config) as client:
            for n in range(EACH * 2):
                client.cancel(f"c-{n}")
                client.schedule(f"u-{n}", b"v2", target, at=ms_to_datetime(at + MOVED_MS))
        running.start()
        running.wait_ready()
        kept = {sid for sid in due if not sid.startswith("c")}
        seen.wait_for(lambda d: {x.schedule_id for x in d} >= kept, timeout_s=90)
        time.sleep(3)
        deliveries = seen.snapshot()
        assert running.terminate() == 0
    check(deliveries, due, kept)
