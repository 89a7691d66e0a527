"""SQL pieces of the SQLite store: filters, keyset cursors, SELECT assembly."""

from __future__ import annotations

import base64
import json
from typing import Any

from delayline.catalog.model import PendingQuery
from delayline.errors import ConfigError


def select(columns: str, table: str, where: list[str], order: list[str]) -> str:
    """A SELECT from fixed names and ``?`` placeholders only; values are bound."""
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {columns} FROM {table}{condition} ORDER BY {', '.join(order)} LIMIT ?"  # noqa: S608


def filters(query: PendingQuery) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    args: list[Any] = []
    for text in (query.id_prefix, query.id_contains):
        if text and "\x00" in text:
            raise ConfigError("the id filter must not contain NUL characters")
    if query.id_prefix:
        # The range lets SQLite use the primary key; substr makes it exact.
        where.append("id >= ? AND substr(id, 1, ?) = ?")
        args += [query.id_prefix, len(query.id_prefix), query.id_prefix]
        upper = _successor(query.id_prefix)
        if upper is not None:
            where.append("id < ?")
            args.append(upper)
    if query.id_contains:
        where.append("instr(id, ?) > 0")
        args.append(query.id_contains)
    compared = (
        ("due_ms >= ?", query.due_from_ms),
        ("due_ms < ?", query.due_to_ms),
        ("target_topic = ?", query.target_topic or None),
        ("grp = ?", query.group or None),
    )
    for condition, value in compared:
        if value is not None:
            where.append(condition)
            args.append(value)
    if query.topics is not None:
        where.append(f"topic IN ({', '.join('?' * len(query.topics))})" if query.topics else "0")
        args.extend(query.topics)
    return where, args


COLUMN_TYPES: dict[str, type] = {
    "due_ms": int,
    "created_ms": int,
    "at_ms": int,
    "partition": int,
    "offset": int,
    "id": str,
    "topic": str,
}


MAX_INT64 = 2**63 - 1


def encode_cursor(values: list[Any], keys: tuple[str, ...], descending: bool) -> str:
    """An opaque cursor: the sort-key values of a page's last item, and the order."""
    payload = {"k": ",".join(keys), "d": descending, "v": values}
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, keys: tuple[str, ...], descending: bool) -> list[Any]:
    """The values a cursor holds, checked against the order it is used with.

    Raises:
        ConfigError: the cursor is not one :func:`encode_cursor` made for this order.
    """
    try:
        payload = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError("cursor is not one this API returned") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("v"), list):
        raise ConfigError("cursor is not one this API returned")
    values: list[Any] = payload["v"]
    same_order = payload.get("k") == ",".join(keys) and payload.get("d") is descending
    if not same_order or len(values) != len(keys):
        raise ConfigError("cursor belongs to another sort order: start again without it")
    for key, value in zip(keys, values, strict=True):
        if type(value) is not COLUMN_TYPES[key]:
            raise ConfigError("cursor is not one this API returned")
        if isinstance(value, int) and not -MAX_INT64 <= value <= MAX_INT64:
            raise ConfigError("cursor is not one this API returned")
    return values


def _successor(prefix: str) -> str | None:
    """The smallest string above every string that starts with ``prefix``."""
    for i in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[i]) + 1
        if code == 0xD800:
            code = 0xE000  # surrogates are not characters
        if code <= 0x10FFFF:
            return prefix[:i] + chr(code)
    return None
