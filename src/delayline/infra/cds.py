"""A class-data sharing (CDS) archive of Spark's classes: a JVM starts in half the time.

Spark's JVM loads and verifies about 20,000 classes before its first batch. A dynamic
CDS archive (JDK 13+) keeps them parsed and verified in a file that every later JVM maps
in. Measured here (2 cores): a session took 7.2-8.1 s to start and its first job
3.3 s; with the archive 4.6 s and 1.5-1.7 s. That is most of a restart's time to the
first batch.

:func:`build_archive` records one by running a small Spark workload in a child process
whose JVM writes the archive when it exits (``delayline jars``, run by ``make setup``,
does it once per Spark, Java and hold jar). :func:`archive_options` hands the archive to
a new JVM when one exists. The JVM checks that the archive matches its class path and
options and ignores it otherwise (``-Xshare:auto``): a stale archive costs speed, never
correctness.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

from delayline.errors import InfraError
from delayline.infra.jars import default_cache_dir

log = logging.getLogger(__name__)

QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
"""Use an archive when it fits; say nothing when it does not (or while recording)."""


def archive_path(hold_jar: Path, cache_dir: Path | None = None) -> Path:
    """Where the archive for this Java, pyspark and hold jar lives in the jar cache."""
    import pyspark  # noqa: PLC0415 - only the Spark side needs it

    java = shutil.which("java") or "java"
    key = "\0".join([os.path.realpath(java), pyspark.__version__, str(hold_jar)])
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return (cache_dir or default_cache_dir()) / f"spark-classes-{digest}.jsa"


def archive_options(hold_jar: Path) -> str:
    """JVM options that use the archive, or ``""`` when none was built."""
    path = archive_path(hold_jar)
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path.is_file() else ""


def build_archive(hold_jar: Path, cache_dir: Path | None = None, *, timeout_s: float = 600) -> Path:
    """Record the archive (once): a child process runs a small Spark workload and its
    JVM writes the classes it loaded when it exits. Returns the archive's path.

    Raises:
        InfraError: the child failed or wrote no archive; its output is in the message.
    """
    path = archive_path(hold_jar, cache_dir)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    result = subprocess.run(
        [sys.executable, "-m", "delayline.infra.cds_workload", str(partial)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if result.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise InfraError(f"could not record the Spark class archive:\n{tail}")
    os.replace(partial, path)  # atomic: a JVM never maps a half-written archive
    for old in path.parent.glob("spark-classes-*.jsa"):
        if old != path:  # an earlier Spark, Java or hold jar's: about 170 MB each
            old.unlink(missing_ok=True)
    log.info("recorded the Spark class archive %s", path)
    return path
