"""Ask the pipeline's metrics server how it is doing, for ``/info``."""

from __future__ import annotations

import logging
from typing import Any

from delayline.core.http import get_json
from delayline.errors import HttpUnavailableError

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
        status, progress = get_json(target, timeout_s=timeout_s)
    except HttpUnavailableError as exc:
        log.debug("pipeline at %s unreachable: %s", url, exc)
        return {"status": "unreachable", "url": url, "progress": None}
    if status != 200 or not isinstance(progress, dict):
        return {"status": "unreachable", "url": url, "progress": None}
    try:
        last = int(progress["last_batch"]["finished_ms"])
    except (KeyError, TypeError, ValueError):
        last = None  # no batch yet, or not a delayline pipeline's answer
    stalled = last is None or now_ms - last > STALLED_AFTER_MS
    return {"status": "stalled" if stalled else "running", "url": url, "progress": progress}
