"""Hold events as Arrow (the shape the fire stage reads) and as Arrow IPC bytes (what
a task record keeps for its replay). No pickle."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import pyarrow as pa

from delayline.contract import events as r
from delayline.contract.kinds import HoldEvent


@cache
def event_schema() -> pa.Schema:
    """:data:`delayline.contract.events.EVENT_SCHEMA` in Arrow."""
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415

    return to_arrow_schema(r.EVENT_SCHEMA)


def to_table(events: Sequence[HoldEvent]) -> pa.Table:
    """The events as one Arrow table."""
    rows = [r.event_row(e).asDict() for e in events]
    return pa.Table.from_pylist(rows, schema=event_schema())


def to_ipc(events: Sequence[HoldEvent]) -> bytes:
    """The events as Arrow IPC stream bytes (empty for none)."""
    if not events:
        return b""
    sink = pa.BufferOutputStream()
    table = to_table(events)
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def from_ipc(data: bytes) -> pa.Table:
    """What :func:`to_ipc` wrote."""
    if not data:
        return to_table([])
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def concat(*tables: pa.Table) -> pa.Table:
    """The tables one after the other."""
    return pa.concat_tables(tables)
