"""Where delayline's log lines go: one format for the command line and Spark's workers."""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_to_stderr() -> None:
    """Warnings of a Python worker reach the pipeline's stderr (once per process)."""
    root = logging.getLogger("delayline")
    # The package's own NullHandler (a library's default) does not count.
    if not any(not isinstance(h, logging.NullHandler) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
