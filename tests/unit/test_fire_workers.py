"""What a Python worker of the fire stage keeps between batches: its log handler and
its producers (and whether another worker has fenced them since)."""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from delayline.core import logs
from delayline.fire import tasks
from delayline.fire.partition import PartitionReport, merge


def test_a_workers_warnings_reach_its_stderr_despite_the_packages_null_handler(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger("delayline")
    saved = list(root.handlers), root.level
    root.handlers = [logging.NullHandler()]  # as delayline/__init__.py leaves it
    try:
        logs.log_to_stderr()
        logs.log_to_stderr()  # once per process
        logging.getLogger("delayline.fire.test").warning("slow step")
        streams = [h for h in root.handlers if not isinstance(h, logging.NullHandler)]
        assert len(streams) == 1
    finally:
        root.handlers, level = saved
        root.setLevel(level)
    assert "WARNING delayline.fire.test: slow step" in capsys.readouterr().err


class Firer:
    """Stands for a producer: only its identity matters here."""


def firer() -> Any:
    return Firer()


def test_a_producer_made_by_another_worker_since_is_known_fenced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    last = tasks._LastUser()
    last.root = tmp_path / "producers"
    mine, theirs = firer(), firer()
    assert last.holds("tx-p0", mine), "nothing recorded: use it, the attempt judges"
    last.claim("tx-p0", mine)
    assert last.holds("tx-p0", mine)
    assert last.holds("tx-p1", mine)
    last.claim("tx-p0", theirs)
    assert not last.holds("tx-p0", mine)
    monkeypatch.setattr("os.getpid", lambda: 4_000_000)  # another process, same object
    assert not last.holds("tx-p0", theirs)


def test_the_executor_label_is_the_standalone_executor_id_else_the_daemon_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "http://127.0.0.1:32939/logPage/?appId=app-20261123-0003&executorId=7&logType=stderr"
    monkeypatch.setenv("SPARK_LOG_URL_STDERR", url)
    tasks.executor_label.cache_clear()  # read once per process: each case is a new one
    assert tasks.executor_label().endswith("/7")
    monkeypatch.setenv("SPARK_LOG_URL_STDERR", url.replace("=7", "=8"))
    assert tasks.executor_label().endswith("/7")  # kept for the worker's life
    monkeypatch.delenv("SPARK_LOG_URL_STDERR")
    tasks.executor_label.cache_clear()
    assert tasks.executor_label().endswith(f"/pid-{os.getppid()}")
    tasks.executor_label.cache_clear()


def test_a_batch_report_adds_up_what_each_executor_did() -> None:
    parts = [
        PartitionReport(0, Counter({"fire": 3, "planned": 9}), executor="h/0"),
        PartitionReport(1, Counter({"fire": 2, "handed": 4}), executor="h/1"),
        PartitionReport(2, Counter({"fire": 1}), executor="h/0"),
        PartitionReport(3, Counter({"fire": 5})),  # no label: not attributed
    ]
    report = merge(8, parts)
    assert report.counts["fire"] == 11
    assert report.executors == {
        "h/0": Counter({"tasks": 2, "fire": 4, "handed": 0}),
        "h/1": Counter({"tasks": 1, "fire": 2, "handed": 4}),
    }
    line = json.loads(report.to_json())
    assert line["executors"] == {
        "h/0": {"tasks": 2, "fire": 4, "handed": 0},
        "h/1": {"tasks": 1, "fire": 2, "handed": 4},
    }
