"""How many bytes a record takes in a record batch: what the broker compares with a
topic's ``max.message.bytes``. Pure arithmetic over the v2 record format."""

from __future__ import annotations

from delayline.contract import OutgoingRecord

RECORD_BATCH_OVERHEAD = 61
"""Bytes of a v2 record batch besides its records (offset and length fields included)."""


def size_bound(record: OutgoingRecord) -> int:
    """At least :func:`batch_size` of ``record``, at a fraction of its cost: each varint
    counted at its widest."""
    body = 13 + len(record.key or b"") + len(record.value or b"") + 5
    for name, value in record.headers:
        body += 15 + len(name) * 4 + len(value or b"")  # 4: UTF-8's widest character
    return RECORD_BATCH_OVERHEAD + 5 + body


def batch_size(record: OutgoingRecord) -> int:
    """Bytes of an uncompressed v2 record batch holding only ``record``: what the broker
    compares with ``max.message.bytes`` when the record is alone in its batch."""
    body = 3 + _field(record.key) + _field(record.value) + _varint(len(record.headers))
    for name, value in record.headers:
        raw = name.encode()
        body += _varint(len(raw)) + len(raw) + _field(value)
    # attributes, timestamp delta 0 and offset delta 0 are the 3 leading bytes.
    return RECORD_BATCH_OVERHEAD + _varint(body) + body


def _field(data: bytes | None) -> int:
    return _varint(-1) if data is None else _varint(len(data)) + len(data)


def _varint(n: int) -> int:
    z = (n << 1) ^ (n >> 63)  # zigzag
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size
