"""The crash tests' fault points: off unless named, and paused at most once per marker."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delayline.core import faults


def test_a_point_not_named_returns_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(faults.PAUSE_AT_ENV, raising=False)
    faults.pause_at(faults.FIRE_COMMITTED)
    monkeypatch.setenv(faults.PAUSE_AT_ENV, faults.REDIS_BEFORE_RECORD)
    faults.pause_at(faults.FIRE_COMMITTED)


def test_a_marker_already_there_means_paused_once_already(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    marker = tmp_path / "paused"
    marker.write_text("")
    monkeypatch.setenv(faults.PAUSE_AT_ENV, faults.FIRE_COMMITTED)
    monkeypatch.setenv(faults.PAUSE_MARKER_ENV, str(marker))
    faults.pause_at(faults.FIRE_COMMITTED)


def test_the_named_point_writes_the_marker_and_waits_to_be_killed(tmp_path: Path) -> None:
    marker = tmp_path / "paused"
    env = {
        **os.environ,
        faults.PAUSE_AT_ENV: faults.REDIS_AFTER_RECORD,
        faults.PAUSE_MARKER_ENV: str(marker),
    }
    code = "from delayline.core import faults; faults.pause_at(faults.REDIS_AFTER_RECORD)"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists()
        time.sleep(0.2)
        assert proc.poll() is None, "it paused, not returned"
    finally:
        proc.kill()
        proc.wait()
