"""The copy the fire stage writes for a ROUTE event of the bucket hold.

Runs on the executors, inside the batch's transaction (:mod:`delayline.fire.partition`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from delayline.contract import OutgoingRecord
from delayline.holds.buckets.config import BucketsConfig
from delayline.holds.buckets.copy import encode_copy


def render_copy(row: Mapping[str, Any], layout: BucketsConfig, lead_ms: int) -> OutgoingRecord:
    """The copy of a ROUTE event row, in the bucket of its remaining wait (to its raise
    time, counted from the batch time), stamped with the batch time."""
    at_ms = int(row["at_ms"])
    wait_ms = int(row["due_ms"]) - lead_ms - at_ms
    topic = layout.topic(layout.bucket_for(wait_ms))
    return OutgoingRecord(topic, row["id"].encode("utf-8"), encode_copy(row), (), None, at_ms)
