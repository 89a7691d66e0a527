"""The class archive's bookkeeping: where it lives, when a JVM gets it, how it is made.

The archive itself (a JVM recording its classes) is exercised by ``delayline jars`` in
``make setup``; here a stand-in child writes the file.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from delayline.errors import InfraError
from delayline.infra import cds
from delayline.infra.jars import CACHE_ENV

WRITES = (sys.executable, "-c", "import pathlib, sys; pathlib.Path(sys.argv[1]).write_bytes(b'x')")


def test_the_archive_is_keyed_by_the_hold_jar(tmp_path: Path) -> None:
    a = cds.archive_path(tmp_path / "hold-1" / "h.jar", tmp_path)
    assert a == cds.archive_path(tmp_path / "hold-1" / "h.jar", tmp_path)
    assert a != cds.archive_path(tmp_path / "hold-2" / "h.jar", tmp_path)
    assert a.parent == tmp_path
    assert a.name.startswith("spark-classes-")


def test_a_jvm_maps_the_archive_only_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache dir"  # a blank in the path: the option quotes it
    monkeypatch.setenv(CACHE_ENV, str(cache))
    hold = tmp_path / "h.jar"
    assert cds.archive_options(hold) == ""
    built = cds.build_archive(hold, workload=WRITES)
    assert built == cds.archive_path(hold)
    assert built.read_bytes() == b"x"
    assert cds.archive_options(hold).startswith(f'-XX:SharedArchiveFile="{built}" -Xshare:auto')


def test_recording_again_keeps_the_archive(tmp_path: Path) -> None:
    built = cds.build_archive(tmp_path / "h.jar", tmp_path, workload=WRITES)
    fails = (sys.executable, "-c", "raise SystemExit(3)")
    assert cds.build_archive(tmp_path / "h.jar", tmp_path, workload=fails) == built


def test_a_failed_recording_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    fails = (sys.executable, "-c", "print('no java here'); raise SystemExit(3)")
    with pytest.raises(InfraError, match="no java here"):
        cds.build_archive(tmp_path / "h.jar", tmp_path, workload=fails)
    silent = (sys.executable, "-c", "pass")  # exits 0 but writes no archive
    with pytest.raises(InfraError, match="could not record"):
        cds.build_archive(tmp_path / "h.jar", tmp_path, workload=silent)
    assert list(tmp_path.iterdir()) == []


def test_a_recording_that_hangs_is_ended(tmp_path: Path) -> None:
    hangs = (sys.executable, "-c", "import time; time.sleep(60)")
    began = time.monotonic()
    with pytest.raises(InfraError, match=r"took over 0\.5 s"):
        cds.build_archive(tmp_path / "h.jar", tmp_path, timeout_s=0.5, workload=hangs)
    assert time.monotonic() - began < 10
    assert list(tmp_path.iterdir()) == []


def test_old_archives_of_other_versions_are_removed(tmp_path: Path) -> None:
    old = tmp_path / "spark-classes-000000000000.jsa"
    recent = tmp_path / "spark-classes-111111111111.jsa"
    for path in (old, recent):
        path.write_bytes(b"x")
    week_ago = time.time() - cds.KEEP_OTHERS_S - 60
    os.utime(old, (week_ago, week_ago))
    cds.build_archive(tmp_path / "h.jar", tmp_path, workload=WRITES)
    assert not old.exists()
    assert recent.exists()  # another checkout's, maybe still in use
