"""Name the step that stalls: a warning when one takes longer than it should."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

SLOW_S = 5.0
"""A step of the fire path this long is worth a warning: a batch normally takes seconds."""


@contextmanager
def warn_if_slow(logger: logging.Logger, what: str, threshold_s: float = SLOW_S) -> Iterator[None]:
    """Log a warning naming ``what`` and its duration when the block takes at least
    ``threshold_s`` seconds (raised or not)."""
    began = time.monotonic()
    try:
        yield
    finally:
        took = time.monotonic() - began
        if took >= threshold_s:
            logger.warning("%s took %.1f s", what, took)
