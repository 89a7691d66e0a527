"""A compact, versioned binary encoding of a header list.

Headers travel between pipeline stages and sit in checkpointed state as one
``bytes`` value, so their format must stay readable by every later release:
version byte, then per header a 4-byte name length, the UTF-8 name, a 4-byte
signed value length (-1 for null) and the value. No pickle.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from delayline.core.model import Headers
from delayline.errors import RecordFormatError

_VERSION = 1
_LEN = struct.Struct(">i")


def encode_headers(headers: Headers) -> bytes:
    """Encode ``headers`` (order and repeats kept)."""
    parts = [bytes([_VERSION])]
    for name, value in headers:
        raw = name.encode("utf-8")
        parts.append(_LEN.pack(len(raw)))
        parts.append(raw)
        if value is None:
            parts.append(_LEN.pack(-1))
        else:
            parts.append(_LEN.pack(len(value)))
            parts.append(value)
    return b"".join(parts)


def decode_headers(data: bytes) -> Headers:
    """Decode what :func:`encode_headers` wrote.

    Raises:
        RecordFormatError: unknown version, truncated data, or a name that is not UTF-8.
    """
    if not data or data[0] != _VERSION:
        raise RecordFormatError(f"unknown header encoding version {data[:1]!r}")
    # One loop with the lengths read in place: this runs for every schedule handed over.
    out: list[tuple[str, bytes | None]] = []
    unpack = _LEN.unpack_from
    pos = 1
    end = len(data)
    try:
        while pos < end:
            (name_len,) = unpack(data, pos)
            pos += 4
            if name_len < 0 or pos + name_len > end:
                raise RecordFormatError("truncated header encoding (name)")
            # UnicodeDecodeError is a ValueError.
            name = data[pos : pos + name_len].decode("utf-8")
            pos += name_len
            (value_len,) = unpack(data, pos)
            pos += 4
            if value_len < 0:
                out.append((name, None))
                continue
            if pos + value_len > end:
                raise RecordFormatError("truncated header encoding (value)")
            out.append((name, data[pos : pos + value_len]))
            pos += value_len
    except struct.error as exc:
        raise RecordFormatError("truncated header encoding (length)") from exc
    return tuple(out)


def pack_fields(fields: Iterable[bytes | None]) -> bytes:
    """Each field as a 4-byte signed big-endian length (-1: null) and its bytes: the
    variable part of every binary value delayline writes."""
    parts: list[bytes] = []
    for field in fields:
        if field is None:
            parts.append(_LEN.pack(-1))
        else:
            parts.append(_LEN.pack(len(field)))
            parts.append(field)
    return b"".join(parts)


def unpack_fields(data: bytes, pos: int, count: int, what: str) -> list[bytes | None]:
    """``count`` fields that :func:`pack_fields` wrote, from ``pos`` to the end of ``data``.

    Raises:
        RecordFormatError: truncated data, or bytes after the last field (``what`` names the value).
    """
    fields: list[bytes | None] = []
    for _ in range(count):
        if pos + _LEN.size > len(data):
            raise RecordFormatError(f"truncated {what}")
        (size,) = _LEN.unpack_from(data, pos)
        pos += _LEN.size
        if size < 0:
            fields.append(None)
            continue
        if pos + size > len(data):
            raise RecordFormatError(f"truncated {what}")
        fields.append(data[pos : pos + size])
        pos += size
    if pos != len(data):
        raise RecordFormatError(f"{what} with trailing bytes")
    return fields
