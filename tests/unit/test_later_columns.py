"""The watch's columns in files: what they hold stays on disk, not in the process."""

from __future__ import annotations

import errno
import logging
import os
import tempfile

import pytest

from delayline.committer import later_columns, later_runs
from delayline.committer.later import CANCEL, UPDATE, Later
from delayline.committer.later_columns import LaterColumns
from delayline.core.model import SourceRef

TOPIC = "schedules"


def rows(count: int, start: int = 0) -> list[tuple[str, str, Later]]:
    """``count`` records of distinct ids, each a cancel of an earlier version of it."""
    return [
        (TOPIC, f"id-{i}", Later(CANCEL if i % 2 else UPDATE, i % 3, i, i, i, 1_000))
        for i in range(start, start + count)
    ]


def resident_kib_of_files() -> int:
    """What this process holds in memory of the unnamed files of the temporary
    directory it maps (kB, from ``/proc/self/smaps``)."""
    prefix = os.path.join(tempfile.gettempdir(), "#")
    total, counting = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's first line
                counting = len(fields) >= 6 and fields[5].startswith(prefix)
            elif counting and fields[0] == "Rss:":
                total += int(fields[1])
    return total


@pytest.fixture
def small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrays of 64 KiB or more in files, fences of 64 rows."""
    monkeypatch.setattr(later_runs, "MAPPED_BYTES", 1 << 16)
    monkeypatch.setattr(later_runs, "FENCE", 64)


@pytest.mark.usefixtures("small_files")
def test_large_runs_live_in_files_their_pages_handed_back() -> None:
    """After each change, and after lookups that may have touched 16 MiB."""
    columns = LaterColumns()
    for start in range(0, 60_000, 20_000):
        columns.add(rows(20_000, start))
    files = [pages for run in columns._runs for pages in run.files]
    assert files, "the runs are in files"
    assert sum(pages.size() for pages in files) >= 60_000 * 49
    assert resident_kib_of_files() == 0, "pages touched by add handed back"
    versions = [(TOPIC, f"id-{i}", SourceRef(TOPIC, i % 3, i - 1, 0)) for i in range(0, 60_000, 7)]
    found = columns.ends_each(versions)
    assert found == [CANCEL if i % 2 else UPDATE for i in range(0, 60_000, 7)]
    assert resident_kib_of_files() == 0, "pages touched by a large lookup handed back"
    assert columns.has_each([(TOPIC, "id-8", 2, 8), (TOPIC, "id-8", 2, 9)]) == [True, False]
    assert 0 < resident_kib_of_files() <= later_columns.TOUCHED_BYTES >> 10, "kept a while"
    columns.expire(2_000, {(TOPIC, p): 30_000 for p in range(3)})
    assert len(columns) == 30_000
    assert resident_kib_of_files() == 0, "pages touched by expire handed back"
    assert columns.ends_each([(TOPIC, "id-29999", SourceRef(TOPIC, 0, 0, 0))]) == [None]
    assert columns.ends_each([(TOPIC, "id-30001", SourceRef(TOPIC, 0, 0, 0))]) == [CANCEL]


@pytest.mark.usefixtures("small_files")
def test_without_room_on_disk_they_stay_in_memory(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    columns = LaterColumns()
    with caplog.at_level(logging.WARNING, logger=later_runs.__name__):
        columns.add(rows(20_000))
        columns.add(rows(20_000, 20_000))
    assert [r.getMessage() for r in caplog.records if "stays in memory" in r.getMessage()], (
        "said once"
    )
    assert len(caplog.records) == 1
    assert not [pages for run in columns._runs for pages in run.files]
    assert columns.ends_each([(TOPIC, "id-39999", SourceRef(TOPIC, 0, 0, 0))]) == [CANCEL]
