"""Ask the pipeline's metrics server how it is doing, for ``/info``."""

from __future__ import annotations

import logging
from typing import Any

from delayline.core.http import get_json
from delayline.errors import HttpUnavailableError

log = logging.getLogger(__name__)

STALLED_AFTER_MS = 60_000
"""A pipeline is reported stalled when a micro-batch it needed did not run for this long
(or, without a waker's answer, when its last batch finished longer ago than this)."""


def pipeline_status(url: str | None, now_ms: int, timeout_s: float = 1.0) -> dict[str, Any]:
    """``{"status": ..., "url": ..., "progress": ...}`` from ``{url}/progress``.

    Status is ``not configured`` (no URL), ``unreachable``, ``stalled`` or ``running``:
    stalled when no batch finished yet, when a batch the waker needed has not run for a
    minute, or when none ran for a heartbeat interval and a minute (an idle pipeline
    runs none for a heartbeat and is not stalled); without the waker's answer, when none
    ran for a minute.
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
    stalled = _stalled(progress, now_ms)
    return {"status": "stalled" if stalled else "running", "url": url, "progress": progress}


def _stalled(progress: dict[str, Any], now_ms: int) -> bool:
    try:
        last = int(progress["last_batch"]["finished_ms"])
    except (KeyError, TypeError, ValueError):
        return True  # no batch yet, or not a delayline pipeline's answer
    waker = progress.get("waker")
    if not isinstance(waker, dict) or not isinstance(beat := waker.get("heartbeat_ms"), int):
        return now_ms - last > STALLED_AFTER_MS
    since = waker.get("waiting_since_ms")
    if isinstance(since, int) and now_ms - since > STALLED_AFTER_MS:
        return True
    return now_ms - last > beat + STALLED_AFTER_MS
