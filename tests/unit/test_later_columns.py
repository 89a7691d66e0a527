"""The watch's columns in files: what they hold stays on disk, not in the process."""

from __future__ import annotations

import errno
import logging
import os
import random
import tempfile
from pathlib import Path

import numpy as np
import pytest

from delayline.committer import later_columns, later_runs
from delayline.committer.later import CANCEL, UPDATE, Later
from delayline.committer.later_columns import LaterColumns
from delayline.committer.later_runs import ROW, Pages
from delayline.core.model import SourceRef
from delayline.core.mounts import Mount

TOPIC = "schedules"

pytestmark = pytest.mark.skipif(not later_runs.CAN_SPILL, reason="no files for runs here")


def rows(count: int, start: int = 0) -> list[tuple[str, str, Later]]:
    """``count`` records of distinct ids, each a cancel of an earlier version of it."""
    return [
        (TOPIC, f"id-{i}", Later(CANCEL if i % 2 else UPDATE, i % 3, i, i, i, 1_000))
        for i in range(start, start + count)
    ]


def resident_kib(columns: LaterColumns) -> int:
    """What this process holds in memory of the files behind ``columns``' runs (kB, from
    ``/proc/self/smaps``, by the arrays' addresses)."""
    spans = [
        (address, address + array.nbytes)
        for run in columns._runs
        if run.mappings
        for array in (run.hashes, run.rows)
        for address in [array.__array_interface__["data"][0]]
    ]
    assert spans, "some run is in files"
    total, counting = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and ":" not in fields[0]:  # a mapping's first line
                low, high = (int(x, 16) for x in fields[0].split("-"))
                counting = any(low < end and start < high for start, end in spans)
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
    files = [mapping for run in columns._runs for mapping in run.mappings]
    assert sum(mapping.size() for mapping in files) >= 60_000 * (ROW.itemsize + 8)
    assert resident_kib(columns) == 0, "pages touched by add handed back"
    versions = [(TOPIC, f"id-{i}", SourceRef(TOPIC, i % 3, i - 1, 0)) for i in range(0, 60_000, 7)]
    found = columns.ends_each(versions)
    assert found == [CANCEL if i % 2 else UPDATE for i in range(0, 60_000, 7)]
    assert resident_kib(columns) == 0, "pages touched by a large lookup handed back"
    assert columns.has_each([(TOPIC, "id-8", 2, 8), (TOPIC, "id-8", 2, 9)]) == [True, False]
    assert 0 < resident_kib(columns) <= later_columns.TOUCHED_BYTES >> 10, "kept a while"
    columns.expire(2_000, {(TOPIC, p): 30_000 for p in range(3)})
    assert len(columns) == 30_000
    assert resident_kib(columns) == 0, "pages touched by expire handed back"
    assert columns.ends_each([(TOPIC, "id-29999", SourceRef(TOPIC, 0, 0, 0))]) == [None]
    assert columns.ends_each([(TOPIC, "id-30001", SourceRef(TOPIC, 0, 0, 0))]) == [CANCEL]
    many = [(TOPIC, f"id-{i}", i % 3, i) for i in range(29_990, 30_010)]
    assert columns.has_each(many) == [i >= 30_000 for i in range(29_990, 30_010)]


@pytest.mark.parametrize("fence", [1, 2, 7, 64])
def test_a_run_in_files_finds_keys_as_a_search_of_all_its_hashes_would(
    monkeypatch: pytest.MonkeyPatch, fence: int
) -> None:
    monkeypatch.setattr(later_runs, "MAPPED_BYTES", 1)
    monkeypatch.setattr(later_runs, "FENCE", fence)
    rng = np.random.default_rng(fence)
    size = 3_000
    hashes = np.sort(rng.integers(-50, 1_000, size)).astype(np.int64)  # many repeated
    table = np.zeros(size, ROW)
    pages = Pages(spill=True)
    run = pages.run(pages.taken(hashes, np.arange(size)), pages.taken(table, np.arange(size)))
    assert run.mappings
    for count in (1, 5, 9, 400):  # one by one, and a bisection of all at once
        keys = rng.integers(-100, 1_100, count).astype(np.int64)
        assert run.starts(keys).tolist() == np.searchsorted(hashes, keys).tolist()
        hits = dict(run.hits(keys))
        for i, key in enumerate(keys.tolist()):
            lo, hi = np.searchsorted(hashes, key), np.searchsorted(hashes, key, side="right")
            assert hits.get(i, range(lo, lo)) == range(lo, hi)


def test_the_offsets_of_a_run_kept_in_part_are_its_rows_own() -> None:
    """What ``expire`` skips runs by: each partition's lowest offset, once rows went."""
    columns = LaterColumns()
    noted = rows(300)
    random.Random(3).shuffle(noted)  # not in offset order
    columns.add(noted)
    columns.expire(2_000, {(TOPIC, p): 150 for p in range(3)})
    (run,) = columns._runs
    lows = {
        columns._places[place][1]: int(run.rows["offset"][run.rows["place"] == place].min())
        for place in run.min_offsets
    }
    assert lows == {0: 150, 1: 151, 2: 152}
    assert {columns._places[place][1]: low for place, low in run.min_offsets.items()} == lows


@pytest.mark.usefixtures("small_files")
def test_without_room_on_disk_they_stay_in_memory_until_there_is(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    room = os.posix_fallocate
    monkeypatch.setattr(os, "posix_fallocate", full)
    columns = LaterColumns()
    with caplog.at_level(logging.INFO, logger=later_runs.__name__):
        columns.add(rows(20_000))
        columns.add(rows(20_000, 20_000))
        assert not [mapping for run in columns._runs for mapping in run.mappings]
        monkeypatch.setattr(os, "posix_fallocate", room)
        columns.add(rows(20_000, 40_000))
    said = [r.getMessage() for r in caplog.records]
    assert [m for m in said if "stays in memory until one can be made" in m] == [said[0]]
    assert len([m for m in said if "again" in m]) == 1
    assert [mapping for run in columns._runs for mapping in run.mappings], "files again"
    assert columns.ends_each([(TOPIC, "id-39999", SourceRef(TOPIC, 0, 0, 0))]) == [CANCEL]


@pytest.mark.usefixtures("small_files")
def test_a_temporary_directory_in_memory_is_told(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    here = Path(tempfile.gettempdir())
    mounts = [Mount(Path("/"), "ext4"), Mount(here, "tmpfs")]
    monkeypatch.setattr(later_runs, "read_mounts", lambda: mounts)
    with caplog.at_level(logging.WARNING, logger=later_runs.__name__):
        columns = LaterColumns()
        columns.add(rows(20_000))
        columns.add(rows(20_000, 20_000))
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said
    assert "is a tmpfs" in said[0]
    assert "TMPDIR" in said[0]
