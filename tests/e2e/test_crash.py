"""Exactly once across crashes: SIGKILL the pipeline mid-run and count."""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import Delivery, DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from tests.e2e.test_readiness import readyz_and_a_quiet_ctrl_c
from tests.support import ARTIFACTS, make_topics, pipeline_args

TOTAL = 1000
KILLS = 3


def setup(
    bootstrap: str, tmp_path: Path, name: str, partitions: int, *extra: str
) -> tuple[PipelineProcess, str, ClientConfig]:
    """Fresh topics, a pipeline process (not started, ``extra`` on its command line),
    its target and a client config."""
    topics = make_topics(bootstrap)
    target = create_topic(bootstrap, unique_topic("target"), partitions=partitions)
    process = PipelineProcess(
        bootstrap,
        pipeline_args(topics, tmp_path / "checkpoint", *extra),
        ARTIFACTS / f"{name}-{topics.schedules}.log",
    )
    return (
        process,
        target,
        ClientConfig(bootstrap_servers=bootstrap, schedules_topic=topics.schedules),
    )


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_sigkill_three_times_during_1000_schedules(kafka_bootstrap: str, tmp_path: Path) -> None:
    process, target, client_config = setup(kafka_bootstrap, tmp_path, "crash", partitions=3)
    with (
        process as pipeline,
        DeliveryCollector(kafka_bootstrap, [target]) as seen,
    ):
        pipeline.start()
        pipeline.wait_ready()
        started_ms = time.time_ns() // 1_000_000
        due: dict[str, int] = {}
        with Scheduler(client_config) as client:
            # Due times spread over 60 s, so deliveries happen before, during and
            # after each crash; some are already due when written.
            for i in range(TOTAL):
                schedule = client.schedule(
                    f"crash-{i}", f"payload-{i}".encode(), target,
                    at=ms_to_datetime(started_ms + i * 60_000 // TOTAL - 2_000), target_key=f"k{i}",
                )  # fmt: skip
                due[schedule.id] = schedule.due_ms
        for kill in range(KILLS):
            # Kill while work is in flight: after some deliveries, before all of them.
            target_count = (kill + 1) * TOTAL // (KILLS + 2)

            def enough(d: list[Delivery], n: int = target_count) -> bool:
                return len(d) >= n

            seen.wait_for(enough, timeout_s=180)
            pipeline.kill()
            pipeline.start()
            pipeline.wait_ready()
        seen.wait_for(lambda d: len({x.schedule_id for x in d}) >= TOTAL, timeout_s=240)
        time.sleep(5)  # anything duplicated late would show up now
        deliveries = seen.snapshot()
        assert pipeline.terminate() == 0
    counts = Counter(d.schedule_id for d in deliveries)
    duplicates = {k: n for k, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} duplicated: {list(duplicates.items())[:5]}"
    assert set(counts) == set(due), "lost or unknown deliveries"
    assert len(deliveries) == TOTAL
    early = [d for d in deliveries if d.timestamp_ms < due[d.schedule_id or ""]]
    assert not early, f"{len(early)} delivered early"
    # Each kill hits the committer with the next lead's schedules pending (about 80),
    # some of them in open transactions: none may be visible before its due time.
    seen_early = [d for d in deliveries if d.arrival_ms < due[d.schedule_id or ""]]
    assert not seen_early, f"{len(seen_early)} visible early"
    for d in deliveries:
        n = (d.schedule_id or "").split("-")[1]
        assert (d.key, d.value) == (f"k{n}".encode(), f"payload-{n}".encode())
    _report(deliveries, due, started_ms)


HANDED = 50
"""Schedules handed to the committer when the pipeline is killed."""
HANDED_OVER_MS = 3_000
"""Their due times are spread over this. Over one second (50/s, one transaction each)
the restarted committer delivered them p50 77-111 ms late, max 125-182 ms, on
2026-12-01 with this release's code and the one before alike: the rate one fresh
committer commits on this machine, not the restart, which this test is about (spread
over 3 s: min 21, p50 34, max 59 ms). How late a committer delivers at a rate is the
committer bench's to measure."""
RESTART_LATENESS_MS = 100
"""The latest a handed-over schedule due during a restart may be delivered (the issue's
bound). Measured here: 16-27 ms at most (p50 7-8) with Spark started after the committer
delivered them; 173-364 ms while Spark's JVM started beside the committer on the same two
cores; seconds when they waited for the Spark session."""
NOTICE_MS = 9_000
"""How long before the due time the restart test kills the pipeline: more than a loaded
restart needs to have the committer ready (3.7 s here alone), less than that plus the
10 s Spark's start waits for its deliveries."""
AHEAD_MS = 25_000
"""How long before their due time the restart test writes its schedules: the batch that
hands them over must end before the kill, ``AHEAD_MS - NOTICE_MS`` later. 6 s was too
short in CI on 2026-12-01: the batch after a fresh pipeline's first ran for more than
6 s while the checkpoint's timers were read beside it (5.6 s) on the same two cores."""
LEAD = f"{(AHEAD_MS + HANDED_OVER_MS) // 1000 + 2}s"
"""The restart test's ``--lead``: past the last due time as the first batch reads them,
so that batch hands every one over. With less, the last ones are planned and raised a
batch's margin before their due times, after the kill (seen in CI with a 26 s lead and
due times over 3 s: 32 of 50 handed over)."""


def test_what_was_handed_over_goes_out_on_time_while_a_killed_pipeline_restarts(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """SIGKILL the pipeline 9 s before the first due time of schedules its committer holds
    (due over 3 s; a 30 s lead: written 25 s ahead, they are handed over by the batch that
    reads them, a second or a few later), and start it again at once: the new committer starts first
    (ready 3.7 s after the kill here, more under a full suite's load) and Spark only once
    it has delivered them, so each is delivered within 100 ms of its due time, once, none
    early, and a ``read_uncommitted`` reader sees none early either. Then the restarted
    pipeline's /readyz, its log and a Ctrl-C
    (:func:`tests.e2e.test_readiness.readyz_and_a_quiet_ctrl_c`)."""
    progress = tmp_path / "progress.jsonl"
    process, target, client_config = setup(
        kafka_bootstrap, tmp_path, "handed", 2, "--progress-file", str(progress), "--lead", LEAD,
        "--batch-wait", "1s",  # read (and handed over) within a second, not 2 s before due
        "--metrics-port", "0",  # its /readyz, at the end
    )  # fmt: skip
    with (
        process as pipeline,
        DeliveryCollector(kafka_bootstrap, [target]) as seen,
        DeliveryCollector(kafka_bootstrap, [target], read_committed=False) as uncommitted,
    ):
        pipeline.start()
        pipeline.wait_ready()
        first_due_ms = time.time_ns() // 1_000_000 + AHEAD_MS
        due = _write_over_a_second(
            client_config, target, "handed", HANDED, first_due_ms, HANDED_OVER_MS
        )
        kill_at_ms = first_due_ms - NOTICE_MS
        while _handed(progress) < HANDED:
            assert time.time_ns() // 1_000_000 < kill_at_ms, (
                f"{_handed(progress)} of {HANDED} handed over {NOTICE_MS} ms before the due time"
            )
            time.sleep(0.05)
        time.sleep(max(0, kill_at_ms - time.time_ns() // 1_000_000) / 1000)
        killed_ms = time.time_ns() // 1_000_000
        pipeline.kill()
        pipeline.start()
        seen.wait_for(lambda d: len(d) >= HANDED, timeout_s=60)
        pipeline.wait_ready()
        time.sleep(2)  # a duplicate would show now
        deliveries, raw = seen.snapshot(), uncommitted.snapshot()
        counts = Counter(d.schedule_id for d in deliveries)
        assert counts == Counter(dict.fromkeys(due, 1)), "lost or duplicated"
        assert not [d for d in deliveries if d.timestamp_ms < due[d.schedule_id or ""]], "early"
        assert {d.schedule_id for d in raw} >= set(due), "a read_uncommitted reader missed some"
        for reader in (deliveries, raw):
            assert not [d for d in reader if d.arrival_ms < due[d.schedule_id or ""]], "seen early"
        lateness = sorted(d.arrival_ms - due[d.schedule_id or ""] for d in deliveries)
        print(
            f"\nkilled {first_due_ms - killed_ms} ms before the first due time; lateness "
            f"min {lateness[0]} ms, p50 {lateness[len(lateness) // 2]} ms, max {lateness[-1]} ms"
        )
        assert lateness[-1] <= RESTART_LATENESS_MS, f"lateness {lateness[-10:]} ms"
        # The restarted pipeline, its start's log and a Ctrl-C, as an operator sees them
        # (here, to save a pipeline start of its own).
        readyz_and_a_quiet_ctrl_c(
            pipeline, kafka_bootstrap, client_config.schedules_topic, tmp_path / "checkpoint"
        )


def _write_over_a_second(
    client_config: ClientConfig,
    target: str,
    prefix: str,
    count: int,
    first_due_ms: int,
    over_ms: int = 1_000,
) -> dict[str, int]:
    """Schedule ``count`` schedules (ids ``<prefix>-<n>``) due evenly over ``over_ms`` from
    ``first_due_ms``, written and flushed; returns each id's due time (ms)."""
    due: dict[str, int] = {}
    with Scheduler(client_config) as client:
        for i in range(count):
            at = ms_to_datetime(first_due_ms + i * over_ms // count)
            due[client.schedule(f"{prefix}-{i}", b"x", target, at=at).id] = int(
                at.timestamp() * 1000
            )
        client.flush()
    return due


def _handed(progress: Path) -> int:
    """Schedules handed to the committer so far, by the pipeline's progress file."""
    if not progress.exists():
        return 0
    lines = progress.read_text().splitlines()
    return sum(json.loads(line)["counts"].get("handed", 0) for line in lines if line.endswith("}"))


def _report(deliveries: list[Delivery], due: dict[str, int], started_ms: int) -> None:
    lateness = sorted(d.arrival_ms - due[d.schedule_id or ""] for d in deliveries)
    print(
        f"\n{len(deliveries)} delivered exactly once across {KILLS} SIGKILLs; "
        f"lateness p50 {lateness[len(lateness) // 2]} ms, p99 {lateness[int(len(lateness) * 0.99)]} ms, "
        f"max {lateness[-1]} ms"
    )


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_rebuild_from_the_topic_after_deleting_the_checkpoint(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    def delete(_pipeline: PipelineProcess, checkpoint: Path) -> None:
        shutil.rmtree(checkpoint)

    _damage_then_rebuild(kafka_bootstrap, tmp_path, "rebuild", delete)


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_a_corrupt_checkpoint_names_rebuild_and_a_rebuild_delivers_what_was_pending(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The newest offsets file of the checkpoint overwritten (as a disk that filled up
    mid-write leaves it): the pipeline exits with an error that names --rebuild and the
    checkpoint; the rebuild delivers every pending schedule once and nothing already
    delivered."""

    def corrupt(pipeline: PipelineProcess, checkpoint: Path) -> None:
        offsets = max((checkpoint / "offsets").iterdir(), key=lambda p: int(p.name))
        offsets.write_bytes(b"\x00\x00 not an offsets log")
        pipeline.start()
        assert pipeline.proc is not None
        code = pipeline.proc.wait(timeout=180)
        refused = pipeline.log_since_start()
        assert code != 0, refused[-2000:]
        assert "start with --rebuild" in refused, refused[-2000:]
        assert str(checkpoint) in refused
        assert "Traceback" not in refused, refused[-2000:]

    _damage_then_rebuild(kafka_bootstrap, tmp_path, "corrupt", corrupt)


def _damage_then_rebuild(
    bootstrap: str,
    tmp_path: Path,
    name: str,
    damage: Callable[[PipelineProcess, Path], None],
) -> None:
    """Five schedules delivered, five pending and one cancelled; the pipeline stopped,
    ``damage`` done to its checkpoint, then ``--rebuild``: the five pending delivered
    once, nothing delivered twice, the cancelled one never."""
    process, target, client_config = setup(bootstrap, tmp_path, name, partitions=1)
    with (
        process as pipeline,
        DeliveryCollector(bootstrap, [target]) as seen,
    ):
        pipeline.start()
        pipeline.wait_ready()
        with Scheduler(client_config) as client:
            for i in range(5):
                client.schedule(f"fired-{i}", b"now", target, delay=0)
            for i in range(5):
                client.schedule(f"pending-{i}", b"later", target, delay=45)
            client.schedule("cancelled", b"never", target, delay=45)
            client.cancel("cancelled")
        seen.wait_for(lambda d: len(d) >= 5, timeout_s=60)
        time.sleep(3)  # the cancel's batch too
        assert pipeline.terminate() == 0
        damage(pipeline, tmp_path / "checkpoint")
        pipeline.start("--rebuild")
        pipeline.wait_ready()
        seen.wait_for(lambda d: len(d) >= 10, timeout_s=120)
        time.sleep(3)
        deliveries = seen.snapshot()
        assert pipeline.terminate() == 0
    counts = Counter(d.schedule_id for d in deliveries)
    assert counts == Counter(
        {f"fired-{i}": 1 for i in range(5)} | {f"pending-{i}": 1 for i in range(5)}
    )


BURST = 3_000
"""A burst due in one second: well past the 500 a task raises early in a batch."""


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_sigkill_around_a_burst_raised_early(kafka_bootstrap: str, tmp_path: Path) -> None:
    """SIGKILL the pipeline after it planned a burst (early timers in the checkpoint)
    and again while it raises it early, and cancel some of it while it is down: each
    schedule that was not cancelled is delivered once, none early, and neither a
    ``read_committed`` nor a ``read_uncommitted`` reader sees a cancelled one or anything
    before its due time."""
    progress = tmp_path / "progress.jsonl"
    process, target, client_config = setup(
        kafka_bootstrap, tmp_path, "crash-burst", 3, "--progress-file", str(progress)
    )
    with (
        process as pipeline,
        DeliveryCollector(kafka_bootstrap, [target]) as seen,
        DeliveryCollector(kafka_bootstrap, [target], read_committed=False) as uncommitted,
    ):
        pipeline.start()
        pipeline.wait_ready()
        # Far enough ahead that two restarts (up to 30 s each here) leave time to cancel.
        first_due_ms = time.time_ns() // 1_000_000 + 80_000
        due = _write_over_a_second(client_config, target, "burst", BURST, first_due_ms)

        def early_counted() -> int:
            lines = progress.read_text().splitlines() if progress.exists() else []
            return sum(json.loads(line)["counts"].get("early", 0) for line in lines)

        deadline = time.monotonic() + 60
        while early_counted() == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert early_counted() > 0, "no early timers were set: the burst path was not tested"
        pipeline.kill()  # early timers in the checkpoint; the waker must find them again
        pipeline.start()
        pipeline.wait_ready()
        # The early raise is woken about 26-28 s before the due time: kill inside it.
        time.sleep(max(0.0, (first_due_ms - 27_000 - time.time_ns() // 1_000_000) / 1000))
        pipeline.kill()
        # Cancelled while it is down: a restart took up to 30 s here, more than is left
        # before the due time; the restarted committer's watch must still withhold them.
        cancelled = [f"burst-{i}" for i in range(0, BURST, 100)]
        with Scheduler(client_config) as client:
            for sid in cancelled:
                client.cancel(sid)
        assert time.time_ns() // 1_000_000 < first_due_ms - 1_000, "cancels written too late"
        pipeline.start()
        pipeline.wait_ready()
        wanted = set(due) - set(cancelled)
        seen.wait_for(lambda d: {x.schedule_id for x in d} >= wanted, timeout_s=240)
        time.sleep(5)  # anything duplicated or cancelled late would show up now
        deliveries, raw = seen.snapshot(), uncommitted.snapshot()
        assert pipeline.terminate() == 0
    counts = Counter(d.schedule_id for d in deliveries)
    assert set(counts) == wanted, "lost, or a cancelled one delivered"
    assert [sid for sid, n in counts.items() if n > 1] == [], "duplicated"
    assert not [d for d in deliveries if d.timestamp_ms < due[d.schedule_id or ""]], "early"
    for reader in (deliveries, raw):
        assert not [d for d in reader if d.arrival_ms < due[d.schedule_id or ""]], "seen early"
        assert not [d for d in reader if d.schedule_id in set(cancelled)], "cancelled seen"
