"""The checkpoint's filesystem fills up under a running pipeline.

The checkpoint lives on a 64 MB tmpfs of its own (mounting needs root: skipped, saying
so, without it). Filling it fails the next batch's checkpoint write: the pipeline exits
with an error that names the checkpoint and says to free space, and once space is freed
a restart delivers every schedule once, none early.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import DeliveryCollector, PipelineProcess
from tests.support import ARTIFACTS, RunningPipeline, eventually, make_topics, pipeline_args

pytestmark = pytest.mark.timeout(600)

TOTAL = 120
DISK_MB = 64


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A directory on a tmpfs of ``DISK_MB`` MB, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its filesystem has no space left."""
    filler = directory / "filler"
    chunk = b"\0" * (1 << 20)
    with filler.open("wb", buffering=0) as out:
        for size in (len(chunk), 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    out.write(chunk[:size])
    probe = directory / "probe"
    with pytest.raises(OSError, match="No space left") as full:
        probe.write_bytes(b"x" * 8192)
    assert full.value.errno == errno.ENOSPC
    probe.unlink(missing_ok=True)
    return filler


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_full_checkpoint_disk_exits_naming_it_then_resumes_with_nothing_lost(
    kafka_bootstrap: str, small_disk: Path
) -> None:
    topics = make_topics(kafka_bootstrap)
    checkpoint = small_disk / "checkpoint"
    log_path = ARTIFACTS / f"full-disk-{topics.schedules}.log"
    args = pipeline_args(topics, checkpoint, "--max-lateness", "1h")
    with PipelineProcess(kafka_bootstrap, args, log_path) as pipeline:
        pipeline.start()
        pipeline.wait_ready()
        running = RunningPipeline(kafka_bootstrap, topics, pipeline)
        target = running.target()
        with DeliveryCollector(kafka_bootstrap, [target]) as seen:
            began = time.time_ns() // 1_000_000
            due: dict[str, int] = {}
            with running.client() as client:
                for i in range(TOTAL // 2):
                    at = ms_to_datetime(began + 2_000 + i * 100)
                    schedule = client.schedule(f"disk-{i}", b"x", target, at=at)
                    due[schedule.id] = schedule.due_ms
            seen.wait_for(lambda d: len(d) >= 10, timeout_s=120)
            filler = fill(small_disk)
            # New input makes the next batch write offsets to the checkpoint.
            with running.client() as client:
                for i in range(TOTAL // 2, TOTAL):
                    at = ms_to_datetime(time.time_ns() // 1_000_000 + 3_000 + i * 50)
                    schedule = client.schedule(f"disk-{i}", b"x", target, at=at)
                    due[schedule.id] = schedule.due_ms
            proc = pipeline.proc
            assert proc is not None
            code = eventually(proc.poll, 120, "the pipeline to exit")
            assert code != 0
            error = pipeline.log_since_start().split("delayline: error: ")[-1]
            assert "No space left on device" in error, pipeline.tail()
            assert str(checkpoint) in error, error
            assert "Free space there" in error, error
            assert "Traceback" not in error, error
            pipeline.proc = None

            os.unlink(filler)
            pipeline.start()
            pipeline.wait_ready()
            seen.wait_for(lambda d: len({x.schedule_id for x in d}) >= TOTAL, timeout_s=180)
            time.sleep(3)  # a duplicate would show up now
            deliveries = seen.snapshot()
        assert pipeline.terminate() == 0
    counts = Counter(d.schedule_id for d in deliveries)
    assert not [k for k, n in counts.items() if n > 1], "duplicated"
    assert set(counts) == set(due), "lost or unknown deliveries"
    early = [d for d in deliveries if d.timestamp_ms < due[d.schedule_id or ""]]
    assert not early, f"{len(early)} delivered early"
