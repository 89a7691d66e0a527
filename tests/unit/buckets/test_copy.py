"""A copy's bytes: what the fire stage writes is what the bucket reader reads."""

from __future__ import annotations

import pytest

from delayline.holds.buckets.copy import decode_copy, encode_copy
from delayline.holds.buckets.read import COLUMNS, BucketRead, CopyRows, Span, plan_reads

ROW = {
    "src_topic": "schedules", "src_partition": 3, "src_offset": 2**40, "src_timestamp_ms": 17,
    "id": "ordre-é", "due_ms": 1_893_456_000_250, "at_ms": 1_893_456_000_000,
    "target_topic": "out", "target_key": b"", "headers": b"\x01", "value": b"\x00payload",
}  # fmt: skip


def test_a_copy_round_trips_every_field() -> None:
    copy = decode_copy(encode_copy(ROW))
    assert (copy.src_topic, copy.src_partition, copy.src_offset, copy.src_timestamp_ms) == (
        "schedules", 3, 2**40, 17,
    )  # fmt: skip
    assert (copy.id, copy.due_ms, copy.routed_at_ms) == (
        "ordre-é",
        1_893_456_000_250,
        1_893_456_000_000,
    )
    assert (copy.target_topic, copy.target_key, copy.headers, copy.value) == (
        "out", b"", b"\x01", b"\x00payload",
    )  # fmt: skip


def test_null_fields_stay_null() -> None:
    copy = decode_copy(encode_copy({**ROW, "target_key": None, "headers": None}))
    assert (copy.target_key, copy.headers) == (None, None)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00" + encode_copy(ROW)[1:], encode_copy(ROW)[:-1], encode_copy(ROW) + b"x"],
    ids=["empty", "unknown format", "truncated", "trailing"],
)
def test_bytes_that_are_no_copy_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="copy"):
        decode_copy(data)


def test_the_reader_turns_copies_into_the_gates_columns_and_skips_foreign_bytes() -> None:
    rows = CopyRows()
    part = Span("delayline-bucket-03", 1, 0, 2)
    rows.add(encode_copy(ROW), part, 0)
    rows.add(b"not a copy", part, 1)
    assert (rows.size, rows.skipped) == (1, 1)
    batch = rows.flush()
    assert batch.schema.names == [name for name, _ in COLUMNS]
    (row,) = batch.to_pylist()
    assert row["kind"] == "copy"
    assert (row["topic"], row["gkey"], row["partition"], row["offset"]) == (
        "schedules", "ordre-é".encode(), 3, 2**40,
    )  # fmt: skip
    assert (row["routed_at"], row["enc_headers"], row["headers"]) == (ROW["at_ms"], b"\x01", None)
    assert rows.size == 0


def test_reads_are_shared_out_so_the_tasks_of_a_batch_take_about_as_long() -> None:
    spans = [Span(f"b-{i:02d}", 0, 0, n) for i, n in enumerate([500, 100, 300, 200, 50])]
    reads = plan_reads(spans, "kafka:9092", 2)
    assert sorted(s.topic for r in reads for s in r.spans) == sorted(s.topic for s in spans)
    loads = sorted(sum(s.end - s.start for s in r.spans) for r in reads)
    assert loads == [550, 600]
    assert {r.bootstrap for r in reads} == {"kafka:9092"}
    assert plan_reads(spans[:1], "k", 4) == [BucketRead((spans[0],), "k")]
    assert plan_reads([], "k", 2) == []
