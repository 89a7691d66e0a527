"""Ask the pipeline's metrics server how it is doing, for ``/info``."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from typing import Any

log = logging.getLogger(__name__)

STALLED_AFTER_MS = 60_000
"""A pipeline whose last batch finished longer ago than this is reported stalled."""


def pipeline_status(url: str | None, now_ms: int, timeout_s: float = 1.0) -> dict[str, Any]:
    """``{"status": ..., "url": ..., "progress": ...}`` from ``{url}/progress``.

    Status is ``not configured`` (no URL), ``unreachable``, ``stalled`` (no batch
    for a minute) or ``running``.
    """
    if not url:
        return {"status": "not configured", "url": None, "progress": None}
    target = url.rstrip("/") + "/progress"
    if not target.startswith(("http://", "https://")):
        return {"status": "unreachable", "url": url, "progress": None}
    try:
        with urllib.request.urlopen(target, timeout=timeout_s) as response:  # noqa: S310 - checked scheme
            progress = json.loads(response.read())
    except (OSError, ValueError) as exc:
        log.debug("pipeline at %s unreachable: %s", url, exc)
        return {"status": "unreachable", "url": url, "progress": None}
    if not isinstance(progress, dict):
        return {"status": "unreachable", "url": url, "progress": None}
    try:
        last = int(progress["last_batch"]["finished_ms"])
    except (KeyError, TypeError, ValueError):
        last = None  # no batch yet, or not a delayline pipeline's answer
    stalled = last is None or now_ms - last > STALLED_AFTER_MS
    return {"status": "stalled" if stalled else "running", "url": url, "progress": progress}
