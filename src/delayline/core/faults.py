"""Fault injection for crash tests: stop a pipeline at a named point of a batch, so a
test can SIGKILL it exactly there.

Off unless ``DELAYLINE_PAUSE_AT`` is set (a pipeline in production never sets it): a
:func:`pause_at` call costs one look-up in the environment. Spark's Python workers
inherit the variable from the pipeline (in local mode; on a cluster, only if the
workers' environment has it).
"""

from __future__ import annotations

import logging
import os
import time

log = logging.getLogger(__name__)

PAUSE_AT_ENV = "DELAYLINE_PAUSE_AT"
"""Names the point to pause at."""
PAUSE_MARKER_ENV = "DELAYLINE_PAUSE_MARKER"
"""A file to create on pausing. When set, only the first process to reach the point
pauses: one that finds the file there already goes on (so a restart with the same
environment, or a second task of the same batch, does not pause again)."""

REDIS_BEFORE_RECORD = "redis-before-record"
"""A Redis hold task with its records read, before its script decides and records it."""
REDIS_AFTER_RECORD = "redis-after-record"
"""A Redis hold task whose record is written (or read back), before the fire stage."""
FIRE_BEFORE_COMMIT = "fire-before-commit"
"""A fire task with rows to write, before its Kafka transaction (nothing of the batch
visible)."""
FIRE_COMMITTED = "fire-committed"
"""A fire task whose Kafka transaction (rows and marker) committed, before Spark
commits the batch."""


def pause_at(point: str) -> None:
    """If ``DELAYLINE_PAUSE_AT`` names ``point``, write the marker file (if one is named)
    and sleep until the process is killed; otherwise return at once.

    Never returns when it pauses: a test kills the pipeline once the marker is there.
    """
    if os.environ.get(PAUSE_AT_ENV) != point:
        return
    marker = os.environ.get(PAUSE_MARKER_ENV)
    if marker:
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return  # paused once already
        with os.fdopen(fd, "w") as out:
            out.write(f"{point} {os.getpid()}\n")
    log.warning("paused at %s (%s is set): waiting to be killed", point, PAUSE_AT_ENV)
    while True:
        time.sleep(60)
