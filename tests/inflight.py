"""In-flight records taken as the committer's reader takes them, for the unit tests."""

from __future__ import annotations

from delayline.committer.due_plan import DuePlan
from delayline.committer.pending import Pending
from delayline.contract import ConsumedRecord
from delayline.fire.inflight import Handed, InflightRecordError, decode_inflight


def handed_of(record: ConsumedRecord) -> Handed:
    """What an in-flight record carries (raises as the reader's decoding does)."""
    if record.value is None:
        raise InflightRecordError(f"record at offset {record.offset} is a tombstone")
    return decode_inflight(record.value, record.headers, record.offset)


def read_into(plan: DuePlan, record: ConsumedRecord, now_ms: int = 0) -> bool:
    """Take ``record`` (read at ``now_ms``) into ``plan`` as the committer's reader does: a
    tombstone by its key, a schedule by its header. Whether a pending one was dropped."""
    if record.value is None:
        return plan.tombstone(record.partition, record.offset, record.key)
    schedule, batch, missed = handed_of(record)
    key = record.key or b""
    at = (record.partition, record.offset)
    plan.add(Pending(*at, key, schedule, now_ms, batch, missed, record.timestamp_ms))
    return False
