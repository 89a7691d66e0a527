"""A *copy*: one pending schedule as it waits in a bucket topic.

The Kafka record of a copy has the schedule id (UTF-8) as key, the batch time that
routed it as timestamp, no headers, and this value: format byte 1; five big-endian
64-bit integers (source partition, source offset, source timestamp, due time, routed
at); then six fields, each a 4-byte signed length (-1: null) and its bytes: source
topic, id, target topic, target key, headers (:mod:`delayline.contract.codec`), and
the payload it delivers. No pickle: a release must read what an older one wrote.

``routed_at`` is the copy's token: the hold keeps, beside each held version, the batch
time it last routed it, and accepts a copy only with both equal (see
:mod:`delayline.holds.buckets.hold`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from delayline.contract.codec import pack_fields, unpack_fields
from delayline.contract.formats import BUCKET_COPY
from delayline.errors import RecordFormatError

FORMAT = BUCKET_COPY.current
_FIXED = struct.Struct(">Bqqqqq")


@dataclass(frozen=True, slots=True)
class Copy:
    """A decoded copy (the fields of the hold's event row it was written from)."""

    src_topic: str
    src_partition: int
    src_offset: int
    src_timestamp_ms: int
    id: str
    due_ms: int
    routed_at_ms: int
    target_topic: str | None
    target_key: bytes | None
    headers: bytes | None
    value: bytes | None


def encode_copy(row: Mapping[str, Any]) -> bytes:
    """The value of the copy of a ROUTE event row (the hold's event schema)."""
    parts = [
        _FIXED.pack(
            FORMAT,
            int(row["src_partition"]),
            int(row["src_offset"]),
            int(row["src_timestamp_ms"]),
            int(row["due_ms"]),
            int(row["at_ms"]),
        )
    ]
    fields = (
        _text(row["src_topic"]),
        _text(row["id"]),
        _text(row["target_topic"]),
        row["target_key"],
        row["headers"],
        row["value"],
    )
    parts.append(pack_fields(None if f is None else bytes(f) for f in fields))
    return b"".join(parts)


def decode_copy(data: bytes) -> Copy:
    """Decode what :func:`encode_copy` wrote.

    Raises:
        RecordFormatError: an unknown format or truncated data.
        FormatVersionError: written by a newer delayline (not a copy to skip).
    """
    BUCKET_COPY.check_first_byte(data, "a bucket copy")
    if len(data) < _FIXED.size or data[0] != FORMAT:
        raise RecordFormatError(f"not a bucket copy of format {FORMAT} ({len(data)} bytes)")
    _, partition, offset, timestamp, due, routed = _FIXED.unpack_from(data)
    fields = unpack_fields(data, _FIXED.size, 6, "bucket copy")
    topic, sid, target, target_key, headers, value = fields
    if topic is None or sid is None:
        raise RecordFormatError("bucket copy without its source topic or id")
    return Copy(
        src_topic=topic.decode("utf-8"),
        src_partition=partition,
        src_offset=offset,
        src_timestamp_ms=timestamp,
        id=sid.decode("utf-8"),
        due_ms=due,
        routed_at_ms=routed,
        target_topic=None if target is None else target.decode("utf-8"),
        target_key=target_key,
        headers=headers,
        value=value,
    )


def _text(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8")
