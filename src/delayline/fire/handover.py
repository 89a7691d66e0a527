"""Hand raised schedules to the committer column by column.

Most rows a busy batch writes are schedules raised a lead before their due time: each
becomes its in-flight record and its tombstone (:func:`delayline.fire.inflight.render_inflight`,
:func:`delayline.contract.render_tombstone`). Here both are rendered from the batch's
Arrow columns by Arrow compute (keys, the binary in-flight header, the fired offsets)
instead of a row dict, a :class:`~delayline.core.model.Schedule` and a render call per
row. What stays per row is what librdkafka's ``produce`` takes: the two records, and
the schedule's own headers decoded for the in-flight record.

The records are those :func:`render_inflight` and :func:`render_tombstone` make, byte
for byte (a unit test holds them to it). Rows this does not take go to the row path of
:mod:`delayline.fire.partition`, which judges them one by one: a schedule that arrived
past due (its ``MISSED`` row), a recurring one (the committer re-arms it instead of a
tombstone), one whose in-flight record could pass the topic's limit, and every row
when there is no lead.
"""

from __future__ import annotations

import bisect
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from delayline.contract import OutgoingRecord
from delayline.contract import events as r
from delayline.contract import headers as h
from delayline.contract.codec import decode_headers
from delayline.fire.inflight import BINARY, HAS_BATCH, HEADER, LAYOUT
from delayline.fire.record_size import RECORD_BATCH_OVERHEAD
from delayline.kafka.topics import INFLIGHT_MAX_BYTES

if TYPE_CHECKING:
    import pyarrow as pa

POSITION = "position"
"""Column of each event's position in its partition's events (the order its records
are written in: the tombstones and rewrites of one key must stay in order)."""
_RECURRENCE = (h.CRON.encode(), h.EVERY.encode())
_SIZE_MARGIN = 1024
"""Bytes kept below :data:`INFLIGHT_MAX_BYTES` for what the bound of :func:`_fits` leaves
out (the record's framing); a record within it of the limit takes the exact check."""


@dataclass(slots=True)
class Handover:
    """Raised schedules handed to the committer, rendered column-wise.

    Attributes:
        positions: Each schedule's position among its partition's events, ascending.
        records: Its in-flight record then its tombstone, two per schedule in the
            order of ``positions``.
    """

    positions: list[int] = field(default_factory=list)
    records: list[OutgoingRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.positions)

    def before(self, position: int, start: int) -> tuple[list[OutgoingRecord], int]:
        """The records of the schedules from the ``start``-th on whose positions come
        before ``position``, and the index of the first schedule after them."""
        end = bisect.bisect_left(self.positions, position, lo=start)
        return self.records[2 * start : 2 * end], end


def handed_mask(events: pa.Table, lead_ms: int) -> pa.ChunkedArray:
    """Which ``events`` (with a :data:`POSITION` column) this module hands over: RAISE
    rows, with a lead, of ids no MISSED row names, whose headers state no recurrence
    and whose in-flight record fits the topic with room to spare."""
    import pyarrow as pa  # noqa: PLC0415 - executor side only
    import pyarrow.compute as pc  # noqa: PLC0415

    kinds = events.column("kind")
    if lead_ms <= 0:
        return pa.chunked_array([pa.repeat(False, events.num_rows)])
    raised = pc.equal(kinds, str(r.Kind.RAISE))
    missed = pc.unique(events.filter(pc.equal(kinds, str(r.Kind.MISSED))).column("id"))
    blobs = events.column("headers")
    recurring = pc.or_(*(pc.match_substring(blobs, name.decode()) for name in _RECURRENCE))
    taken = pc.and_(raised, pc.invert(pc.is_in(events.column("id"), value_set=missed)))
    taken = pc.and_(taken, pc.invert(pc.fill_null(recurring, True)))
    return pc.fill_null(pc.and_(taken, _fits(events)), False)


def _fits(events: pa.Table) -> pa.ChunkedArray:
    """An upper bound of each in-flight record's batch size is below the limit: the
    encoded headers take at most 10 bytes of lengths per header where a Kafka record
    takes 8, and each header takes at least 8 of the encoding."""
    import pyarrow.compute as pc  # noqa: PLC0415

    def length(name: str) -> pa.ChunkedArray:
        return pc.fill_null(pc.binary_length(events.column(name)), 0)

    blob = length("headers")
    fixed = RECORD_BATCH_OVERHEAD + LAYOUT.size + 3 * 5 + 64 + len(HEADER) + 10
    text = pc.add(pc.multiply(length("src_topic"), 2), pc.add(length("id"), length("target_topic")))
    size = pc.add(pc.add(length("value"), pc.add(pc.multiply(blob, 2), text)), length("target_key"))
    return pc.less_equal(pc.add(size, fixed + _SIZE_MARGIN), INFLIGHT_MAX_BYTES)


def render_handover(
    events: pa.Table,
    inflight_topic: str,
    batch_id: int,
    partitions: int,
    plan: str | None = None,
) -> Handover:
    """The in-flight records (of ``batch_id``, to ``inflight_topic`` of ``partitions``
    partitions) and tombstones (marked with ``plan``, if any) of ``events``: RAISE rows
    :func:`handed_mask` took."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    if not events.num_rows:
        return Handover()
    binary = pa.binary()
    # One type for every column joined (Spark hands large ones over with
    # spark.sql.execution.arrow.useLargeVarTypes).
    ids, targets, topics = (
        pc.cast(events.column(c), pa.string()) for c in ("id", "target_topic", "src_topic")
    )
    target_keys = pc.cast(events.column("target_key"), binary)
    parts = pc.cast(events.column("src_partition"), pa.string())
    offsets = pc.cast(events.column("src_offset"), pa.string())
    keys = pc.binary_join_element_wise(topics, parts, offsets, "/")
    id_column = pc.cast(ids, binary)
    header = pc.binary_join_element_wise(
        _fixed_part(events, batch_id),
        id_column,
        pc.cast(targets, binary),
        pc.cast(topics, binary),
        pc.fill_null(target_keys, b""),
        b"",
    )
    id_bytes = id_column.to_pylist()
    # as inflight_partition does: every version of an id to one partition
    inflight_partitions = [zlib.crc32(i) % max(partitions, 1) for i in id_bytes]
    records: list[OutgoingRecord] = []
    append = records.append
    fired = h.FIRED_OFFSET
    marked = () if plan is None else ((h.PLAN, plan.encode()),)
    for key, value, blob, head, part, topic, sid, src_part, offset in zip(
        pc.cast(keys, binary).to_pylist(),
        pc.fill_null(events.column("value"), b"").to_pylist(),
        events.column("headers").to_pylist(),
        header.to_pylist(),
        inflight_partitions,
        topics.to_pylist(),
        id_bytes,
        events.column("src_partition").to_pylist(),
        pc.cast(offsets, binary).to_pylist(),
        strict=True,
    ):
        own = () if blob is None else decode_headers(blob)
        append(OutgoingRecord(inflight_topic, key, value, (*own, (HEADER, head)), part))
        append(OutgoingRecord(topic, sid, None, ((fired, offset), *marked), src_part))
    return Handover(events.column(POSITION).to_pylist(), records)


def _fixed_part(events: pa.Table, batch_id: int) -> pa.Array:
    """The fixed part of each row's in-flight header (:data:`LAYOUT`), as binary."""
    import numpy as np  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    n = events.num_rows
    layout = np.dtype(
        [("version", "u1"), ("flags", "u1"), ("due", "<i8"), ("batch", "<i8"),
         ("partition", "<i4"), ("offset", "<i8"), ("timestamp", "<i8"), ("id", "<u4"),
         ("target", "<u4"), ("topic", "<u4"), ("key", "<i4")]
    )  # fmt: skip
    fixed = np.zeros(n, dtype=layout)
    fixed["version"] = BINARY
    fixed["flags"] = HAS_BATCH  # never MISSED: those rows take the row path
    fixed["batch"] = batch_id

    def numbers(name: str) -> np.ndarray:
        return np.asarray(events.column(name).to_numpy())

    fixed["due"] = numbers("due_ms")
    fixed["partition"] = numbers("src_partition")
    fixed["offset"] = numbers("src_offset")
    fixed["timestamp"] = numbers("src_timestamp_ms")
    fixed["id"] = pc.binary_length(events.column("id")).to_numpy()
    fixed["target"] = pc.binary_length(events.column("target_topic")).to_numpy()
    fixed["topic"] = pc.binary_length(events.column("src_topic")).to_numpy()
    fixed["key"] = pc.fill_null(pc.binary_length(events.column("target_key")), -1).to_numpy()
    raw = pa.py_buffer(fixed.tobytes())
    array = pa.FixedSizeBinaryArray.from_buffers(pa.binary(LAYOUT.size), n, [None, raw])
    return pc.cast(array, pa.binary())
