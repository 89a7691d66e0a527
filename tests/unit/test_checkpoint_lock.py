"""One pipeline per checkpoint: the lock, its refusal message, a crash and --rebuild."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from delayline.pipeline.lock import (
    LOCK_FILE,
    CheckpointLock,
    CheckpointLockedError,
    clear_checkpoint,
)


def test_a_second_holder_is_refused_with_the_first_ones_name(tmp_path: Path) -> None:
    first = CheckpointLock(tmp_path / "cp", "orders")
    first.acquire()
    with pytest.raises(CheckpointLockedError) as refused:
        CheckpointLock(tmp_path / "cp", "other").acquire()
    message = str(refused.value)
    assert f"pid {os.getpid()}" in message
    assert "query orders" in message
    assert "--checkpoint-dir" in message
    # The refused attempt left the holder's record as it was.
    record = json.loads((tmp_path / "cp" / LOCK_FILE).read_text())
    assert (record["pid"], record["query_name"]) == (os.getpid(), "orders")
    first.release()
    with CheckpointLock(tmp_path / "cp", "other") as second:  # free again
        assert second.held
    assert not second.held


def test_a_killed_holder_leaves_the_lock_free_at_once(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from delayline.pipeline.lock import CheckpointLock
            lock = CheckpointLock(Path({str(tmp_path / "cp")!r}), "killed")
            lock.acquire()
            print("held", flush=True)
            time.sleep(600)
        """)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(CheckpointLockedError, match=f"pid {holder.pid} "):
            CheckpointLock(tmp_path / "cp", "second").acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
    with CheckpointLock(tmp_path / "cp", "second") as lock:  # a restart after a crash
        assert lock.held


def test_a_lock_file_without_a_record_still_refuses(tmp_path: Path) -> None:
    with CheckpointLock(tmp_path, "q"):
        (tmp_path / LOCK_FILE).write_text("")
        with pytest.raises(CheckpointLockedError, match="left no record"):
            CheckpointLock(tmp_path, "q").acquire()


def test_a_rebuild_clears_the_checkpoint_but_keeps_the_held_lock(tmp_path: Path) -> None:
    checkpoint = tmp_path / "cp"
    with CheckpointLock(checkpoint, "q"):
        (checkpoint / "offsets").mkdir()
        (checkpoint / "offsets" / "0").write_text("v1")
        (checkpoint / "metadata").write_text("{}")
        clear_checkpoint(checkpoint)
        assert [p.name for p in checkpoint.iterdir()] == [LOCK_FILE]
        with pytest.raises(CheckpointLockedError):
            CheckpointLock(checkpoint, "q").acquire()
    clear_checkpoint(tmp_path / "absent")  # nothing to clear


def test_a_start_whose_committer_fails_releases_the_lock_and_the_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committer starts first (before Spark); when it cannot (a clock skew, Kafka
    away), the pipeline gives back what it took: the next start is not refused."""
    from delayline.pipeline.config import PipelineConfig  # noqa: PLC0415 - pyspark
    from delayline.pipeline.job import Pipeline  # noqa: PLC0415 - pyspark

    pipeline = Pipeline(PipelineConfig(checkpoint_dir=tmp_path / "cp", query_name="orders"))
    released: list[bool] = []
    monkeypatch.setattr(pipeline, "claim_checkpoint", pipeline._lock.acquire)
    monkeypatch.setattr(pipeline._lease, "hold", lambda _topic: None)
    monkeypatch.setattr(pipeline._lease, "release", lambda: released.append(True))
    monkeypatch.setattr("delayline.pipeline.job.run_notice", lambda _config: None)

    def refuse() -> None:
        raise RuntimeError("the broker's clock is 9 s away")

    monkeypatch.setattr(pipeline, "_start_committer", refuse)
    with pytest.raises(RuntimeError, match="clock"):
        pipeline.start()
    assert not pipeline._lock.held
    assert released == [True]
    again = CheckpointLock(tmp_path / "cp", "orders")
    again.acquire()  # free again
    again.release()
