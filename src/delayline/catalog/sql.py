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
    if query.id_prefix:
        # The range lets SQLite use the primary key; substr makes it exact.
        where.append("id >= ? AND id < ? AND substr(id, 1, ?) = ?")
        args += [query.id_prefix, query.id_prefix + "\U0010ffff"]
        args += [len(query.id_prefix), query.id_prefix]
    if query.id_contains:
        where.append("instr(id, ?) > 0")
        args.append(query.id_contains)
    if query.due_from_ms is not None:
        where.append("due_ms >= ?")
        args.append(query.due_from_ms)
    if query.due_to_ms is not None:
        where.append("due_ms < ?")
        args.append(query.due_to_ms)
    if query.target_topic:
        where.append("target_topic = ?")
        args.append(query.target_topic)
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


def encode_cursor(values: list[Any]) -> str:
    """An opaque cursor holding the sort-key values of the last item of a page."""
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, keys: tuple[str, ...]) -> list[Any]:
    """The values of ``keys`` a cursor holds.

    Raises:
        ConfigError: the cursor is not one :func:`encode_cursor` made for these keys.
    """
    try:
        values = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError("cursor is not one this API returned") from exc
    if not isinstance(values, list) or len(values) != len(keys):
        raise ConfigError("cursor does not belong to this sort order")
    for key, value in zip(keys, values, strict=True):
        if type(value) is not COLUMN_TYPES[key]:
            raise ConfigError("cursor does not belong to this sort order")
    return values
