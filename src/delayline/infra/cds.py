"""A class-data sharing (CDS) archive of Spark's classes: faster JVM starts.

Spark's JVM loads and verifies about 20,000 classes before its first batch. A dynamic
CDS archive (JDK 13+) keeps them parsed and verified in a file that every later JVM maps
in. Measured here (2 cores): a session took 7.2-8.1 s to start and its first job
3.3 s; with the archive 4.6-5.4 s and 1.5-1.9 s. That is much of a restart's time to
the first batch.

:func:`build_archive` records one by running a small Spark workload in a child process
whose JVM writes the archive when it exits (``delayline jars``, run by ``make setup``,
does it once per Java, Spark and hold jar). :func:`archive_options` hands the archive to
a new JVM when one exists. The JVM checks that the archive matches its class path and
options and ignores it otherwise (``-Xshare:auto``): a stale archive costs speed, never
correctness.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from delayline.errors import InfraError
from delayline.infra.jars import CACHE_ENV, default_cache_dir

log = logging.getLogger(__name__)

QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
"""Use an archive when it fits; say nothing when it does not."""

KEEP_OTHERS_S = 7 * 86_400
"""Archives of another Java, Spark or hold jar (another checkout may share the cache)
are removed once this old: about 170 MB each."""


def java_home() -> Path | None:
    """The Java that Spark's launcher runs: ``$JAVA_HOME``, else ``java`` on PATH."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    return Path(os.path.realpath(java)).parents[1] if java else None


def archive_path(hold_jar: Path, cache_dir: Path | None = None) -> Path:
    """Where the archive for this Java, Spark (the hold jar's key has its version) and
    hold jar lives in the jar cache."""
    key = [str(hold_jar)]
    home = java_home()
    if home is not None:
        # The binaries' sizes and times: an in-place update of the JDK changes them.
        for part in ("bin/java", "lib/server/libjvm.so"):
            try:
                info = (home / part).stat()
            except OSError:
                continue
            key.append(f"{os.path.realpath(home / part)}:{info.st_size}:{info.st_mtime_ns}")
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:12]
    return (cache_dir or default_cache_dir()) / f"spark-classes-{digest}.jsa"


def archive_options(hold_jar: Path) -> str:
    """JVM options that use the archive, or ``""`` when none was recorded."""
    path = archive_path(hold_jar)
    # Quoted: Spark splits its Java options on blanks outside quotes.
    return f'-XX:SharedArchiveFile="{path}" {QUIET}' if path.is_file() else ""


WORKLOAD = (sys.executable, "-m", "delayline.pipeline.cds_workload")
"""The child that records the archive; the archive's path is its last argument."""


def build_archive(
    hold_jar: Path,
    cache_dir: Path | None = None,
    *,
    timeout_s: float = 600,
    workload: tuple[str, ...] = WORKLOAD,
) -> Path:
    """Record the archive (once): a child process runs a small Spark workload and its
    JVM writes the classes it loaded when it exits. Returns the archive's path.

    Raises:
        InfraError: the child failed, timed out or wrote no archive (its output is in
            the message).
    """
    cache = cache_dir or default_cache_dir()
    path = archive_path(hold_jar, cache)
    if path.is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    # A session of its own, so a timeout ends Spark's JVM too. The child's output is
    # read to its end: the JVM shares it and writes the archive before it exits.
    child = subprocess.Popen(
        [*workload, str(partial)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, CACHE_ENV: str(cache)},  # the hold jar of this cache
    )
    try:
        output, _ = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        partial.unlink(missing_ok=True)
        raise InfraError(f"recording the Spark class archive took over {timeout_s:g} s") from None
    if child.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise InfraError(f"could not record the Spark class archive:\n{tail}")
    os.replace(partial, path)  # atomic: a JVM never maps a half-written archive
    _remove_stale(path)
    log.info("recorded the Spark class archive %s", path)
    return path


def _remove_stale(current: Path) -> None:
    cutoff = time.time() - KEEP_OTHERS_S
    for other in current.parent.glob("spark-classes-*.jsa"):
        try:
            if other != current and other.stat().st_mtime < cutoff:
                other.unlink()
        except OSError:
            pass  # another process removed it first
