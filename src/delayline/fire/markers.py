"""Commit markers: the record on the compacted commits topic that a fire task writes in
its batch's transaction, keyed by its run (``query@checkpoint-id/p<partition>``), so a
replayed or retried task finds its batch committed and writes nothing again.

The value is JSON: ``format`` (:data:`delayline.contract.formats.COMMIT_MARKER`; a marker
without it is of the first), ``batch_id``, ``records`` and ``committed_at_ms``.
"""

from __future__ import annotations

import json
import time

from delayline.contract import OutgoingRecord
from delayline.contract.formats import COMMIT_MARKER


def render_marker(commits_topic: str, run: str, batch_id: int, records: int) -> OutgoingRecord:
    """The marker of ``run``'s batch ``batch_id``, which wrote ``records`` records."""
    value = {
        "format": COMMIT_MARKER.current,
        "batch_id": batch_id,
        "records": records,
        "committed_at_ms": time.time_ns() // 10**6,
    }
    return OutgoingRecord(commits_topic, run.encode(), json.dumps(value).encode())


def marker_batch(value: bytes, where: str, *, required: bool = True) -> int | None:
    """The batch id of a commit marker's ``value`` (of any release up to this one).

    Args:
        value: The marker's value.
        where: Where it was read, for the message.
        required: Whether the reader needs this marker (one of its own runs): a newer
            release's marker of another run is none of its business (``None``), so a
            rollback is not stopped by the markers the newer release left behind.

    Raises:
        FormatVersionError: a newer delayline wrote a marker the reader needs.
    """
    marker = json.loads(value)
    found = int(marker.get("format", 1))
    if not required and found > COMMIT_MARKER.current:
        return None
    COMMIT_MARKER.check(found, f"commit marker at {where}")
    return int(marker["batch_id"])
