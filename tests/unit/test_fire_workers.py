"""What a Python worker of the fire stage keeps between batches: its log handler and
its producers (and whether another worker has fenced them since)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from delayline.fire import tasks


def test_a_workers_warnings_reach_its_stderr_despite_the_packages_null_handler(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger("delayline")
    saved = list(root.handlers), root.level
    root.handlers = [logging.NullHandler()]  # as delayline/__init__.py leaves it
    try:
        tasks.log_to_stderr()
        tasks.log_to_stderr()  # once per process
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
