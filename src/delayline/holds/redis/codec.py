"""A held schedule as one Redis string: versioned, binary, no pickle.

Layout: version byte, partition (int32), offset (int64), record timestamp and due
time (int64 ms), then length-prefixed source topic, id, target topic, target key
(length -1: null), payload and headers (:mod:`delayline.contract.codec`). The first
:data:`TOKEN_BYTES` bytes name the version (a topic's partition and offset), so the
scripts compare versions without reading whole values.
"""

from __future__ import annotations

import struct

from delayline.contract.codec import decode_headers, encode_headers, pack_fields, unpack_fields
from delayline.contract.formats import REDIS_SCHEDULE
from delayline.core.model import Schedule, SourceRef
from delayline.errors import RecordFormatError

_VERSION = REDIS_SCHEDULE.current
_FIXED = struct.Struct(">Biqqq")
TOKEN_BYTES = 13
"""Version byte, partition and offset: within one member (one source topic and id),
equal tokens are the same record."""


def encode_schedule(schedule: Schedule) -> bytes:
    """Encode a schedule read from Kafka (it must have a source)."""
    source = schedule.require_source()
    parts = [
        _FIXED.pack(_VERSION, source.partition, source.offset, source.timestamp_ms, schedule.due_ms)
    ]
    fields = (
        source.topic.encode(),
        schedule.id.encode(),
        schedule.target_topic.encode(),
        schedule.target_key,
        schedule.payload,
        encode_headers(schedule.headers),
    )
    parts.append(pack_fields(fields))
    return b"".join(parts)


def decode_schedule(data: bytes) -> Schedule:
    """Decode what :func:`encode_schedule` wrote.

    Raises:
        RecordFormatError: an unknown version or truncated data.
        FormatVersionError: written by a newer delayline.
    """
    REDIS_SCHEDULE.check_first_byte(data, "a held schedule in Redis")
    if len(data) < _FIXED.size or data[0] != _VERSION:
        raise RecordFormatError(f"unknown held-schedule encoding (version byte {data[:1]!r})")
    _, partition, offset, timestamp_ms, due_ms = _FIXED.unpack_from(data)
    fields = unpack_fields(data, _FIXED.size, 6, "held-schedule encoding")
    topic, sid, target_topic, target_key, payload, headers = fields
    return Schedule(
        id=(sid or b"").decode(),
        due_ms=due_ms,
        target_topic=(target_topic or b"").decode(),
        target_key=target_key,
        payload=payload or b"",
        headers=decode_headers(headers or b""),
        source=SourceRef((topic or b"").decode(), partition, offset, timestamp_ms),
    )


def version_token(data: bytes | None) -> bytes:
    """The token of an encoded value (empty for none), as the scripts compare it."""
    return b"" if data is None else data[:TOKEN_BYTES]
