"""The fire stage's column-wise hand-over: the records it renders from a batch's Arrow
columns are those the row path renders for the same events, byte for byte and in the
same order; the rows it must not take (past due, recurring, near the in-flight limit,
no lead) go to the row path."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from delayline.contract import OutgoingRecord
from delayline.contract import events as r
from delayline.contract import headers as h
from delayline.contract.topology import Topology
from delayline.core.clock import ManualClock
from delayline.core.model import Schedule, SourceRef
from delayline.fire.handover import POSITION, handed_mask
from delayline.fire.inflight import decode_inflight
from delayline.fire.partition import fire_rows
from delayline.fire.record_size import batch_size
from delayline.fire.tasks import split_events
from delayline.holds.fold import BURST_LEAD_MS
from delayline.kafka.topics import INFLIGHT_MAX_BYTES
from delayline.pipeline.config import PipelineConfig
from tests.unit.test_sink_report import FakeFirer

NOW_MS = 1_800_000_000_000
ARROW_TYPES = {
    "StringType()": pa.string(),
    "IntegerType()": pa.int32(),
    "LongType()": pa.int64(),
    "BinaryType()": pa.binary(),
}
EVENTS = pa.schema([(f.name, ARROW_TYPES[repr(f.dataType)]) for f in r.EVENT_SCHEMA.fields])


def raised(
    offset: int,
    sid: str,
    *,
    topic: str = "sched",
    key: bytes | None = b"k",
    headers: tuple[tuple[str, bytes | None], ...] = (("trace", b"abc"),),
    value: bytes = b"payload",
) -> dict[str, Any]:
    schedule = Schedule(
        sid,
        NOW_MS + offset,
        "out",
        key,
        value,
        headers,
        SourceRef(topic, offset % 3, offset, NOW_MS),
    )
    return r.schedule_event(r.Kind.RAISE, schedule, NOW_MS).asDict()


def other(kind: str, offset: int, sid: str) -> dict[str, Any]:
    row = raised(offset, sid)
    row["kind"] = str(kind)
    return row


def table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=EVENTS)


def config(lead_ms: int = 5_000, partitions: int = 4) -> PipelineConfig:
    return PipelineConfig(
        Topology(history_topic=None), lead_ms=lead_ms, inflight_partitions=partitions
    )


def fired_column_wise(
    rows: list[dict[str, Any]], settings: PipelineConfig, plan: str | None = None
) -> list[Any]:
    split = split_events(table(rows), settings, 7, plan)
    firer = FakeFirer()
    fire_rows(split.rows, 0, 7, "run", settings, firer, ManualClock(NOW_MS),
              handover=split.handover, plan=plan)  # fmt: skip
    return firer.batches[-1]


def fired_row_by_row(
    rows: list[dict[str, Any]], settings: PipelineConfig, plan: str | None = None
) -> list[Any]:
    firer = FakeFirer()
    fire_rows(rows, 0, 7, "run", settings, firer, ManualClock(NOW_MS), plan=plan)
    return firer.batches[-1]


MIXED = [
    raised(0, "plain"),
    raised(1, "no-key", key=None),
    raised(2, "empty-key", key=b""),
    raised(3, "no-headers", headers=()),
    raised(4, "null-header", headers=(("a", None), ("b", b""))),
    raised(5, "ünïcode-id ✓"),
    raised(6, "empty-payload", value=b""),
    raised(7, "other-topic", topic="sched-2"),
    other(r.Kind.RETIRE, 8, "retired"),
    raised(9, "after-retire"),
    other(r.Kind.MISSED, 10, "late"),
    raised(10, "late"),
    raised(11, "recurring", headers=((h.CRON, b"* * * * *"),)),
    other(r.Kind.PLANNED, 12, "counted"),
    raised(13, "last"),
]


@pytest.mark.parametrize("plan", [None, "5eed"])
@pytest.mark.parametrize("partitions", [1, 4])
def test_the_column_wise_records_are_the_row_paths_byte_for_byte_and_in_order(
    partitions: int, plan: str | None
) -> None:
    settings = config(partitions=partitions)
    assert fired_column_wise(MIXED, settings, plan) == fired_row_by_row(MIXED, settings, plan)


def test_a_hand_overs_tombstone_carries_the_mark_of_its_start_and_only_that() -> None:
    records = fired_column_wise(MIXED, config(), "5eed")
    tombstones = [r for r in records if isinstance(r, OutgoingRecord) and r.value is None]
    marked = [r for r in tombstones if (h.PLAN, b"5eed") in r.headers]
    # Handed over: each raised schedule's but the recurring one's (which is re-armed)
    # and the retired one's (a tombstone the hold reads, as every other start's).
    assert {r.key for r in marked} == {
        row["id"].encode() for row in MIXED if row["kind"] == r.Kind.RAISE
        and row["id"] not in ("recurring",)
    }  # fmt: skip
    assert all(r.headers == ((h.FIRED_OFFSET, r.headers[0][1]), (h.PLAN, b"5eed")) for r in marked)
    assert [r.key for r in tombstones if r not in marked] == [b"retired"]


def test_the_in_flight_record_reads_back_as_the_schedule_and_batch() -> None:
    records = fired_column_wise([raised(5, "id-5", key=None)], config())
    inflight, tombstone = records
    assert isinstance(inflight, OutgoingRecord)
    handed = decode_inflight(inflight.value or b"", inflight.headers, 0)
    assert handed.schedule.id == "id-5"
    assert handed.schedule.target_key is None
    assert handed.schedule.due_ms == NOW_MS + 5
    assert handed.batch == 7
    assert not handed.missed
    assert tombstone == OutgoingRecord("sched", b"id-5", None, ((h.FIRED_OFFSET, b"5"),), 2)


def test_rows_the_hand_over_must_not_take_go_row_by_row() -> None:
    events = table(MIXED).append_column(POSITION, pa.array(range(len(MIXED))))
    taken = {
        row["id"]
        for row, yes in zip(MIXED, handed_mask(events, 5_000).to_pylist(), strict=True)
        if yes
    }
    assert "late" not in taken  # past due on arrival: its lateness is reported
    assert "recurring" not in taken  # the committer re-arms it: no tombstone
    assert not {"retired", "counted"} & taken
    assert {"plain", "no-key", "ünïcode-id ✓", "other-topic", "last"} <= taken


def test_no_lead_hands_nothing_over_column_wise() -> None:
    events = table(MIXED).append_column(POSITION, pa.array(range(len(MIXED))))
    assert not any(handed_mask(events, 0).to_pylist())


def test_a_record_near_the_in_flight_limit_takes_the_exact_check() -> None:
    big = raised(0, "big", value=b"x" * (INFLIGHT_MAX_BYTES - 600))
    events = table([big, raised(1, "small")]).append_column(POSITION, pa.array([0, 1]))
    assert handed_mask(events, 5_000).to_pylist() == [False, True]
    settings = config()
    assert fired_column_wise([big, raised(1, "small")], settings) == fired_row_by_row(
        [big, raised(1, "small")], settings
    )


def test_headers_the_row_path_keeps_without_payload_go_row_by_row() -> None:
    kept = raised(0, "no-copy")
    kept["headers"] = None  # a bucket hold's version without them
    events = table([kept]).append_column(POSITION, pa.array([0]))
    assert handed_mask(events, 5_000).to_pylist() == [False]


def test_the_hand_over_is_counted_as_handed() -> None:
    settings = config()
    split = split_events(table(MIXED), settings, 7)
    report = fire_rows(
        split.rows, 0, 7, "run", settings, FakeFirer(), ManualClock(NOW_MS), handover=split.handover
    )
    by_rows = fire_rows(MIXED, 0, 7, "run", settings, FakeFirer(), ManualClock(NOW_MS))
    assert +(report.counts + split.counts) == +by_rows.counts
    assert len(split.handover) == 10  # the late and the recurring one went row by row


@pytest.mark.parametrize(
    "headers",
    [
        (),
        (("", b""),) * 500,  # many empty headers: 8 bytes each encoded
        (("n" * 200, b"v" * 300),) * 20,
        (("ünï", None),) * 100,
    ],
)
def test_the_quick_size_bound_never_lets_an_oversized_record_through(
    headers: tuple[tuple[str, bytes | None], ...],
) -> None:
    settings = config()
    for room in range(0, 40_000, 331):
        row = raised(0, "sized", headers=headers, value=b"x" * (INFLIGHT_MAX_BYTES - room))
        events = table([row]).append_column(POSITION, pa.array([0]))
        (taken,) = handed_mask(events, 5_000).to_pylist()
        inflight = fired_row_by_row([row], settings)[0]
        assert isinstance(inflight, OutgoingRecord)
        if taken:
            assert batch_size(inflight) <= INFLIGHT_MAX_BYTES
    assert taken, "a record 40 KB below the limit takes the quick bound"


def test_the_timers_set_are_counted_by_wake_slot() -> None:
    settings = config()
    planned = [other(r.Kind.PLANNED, i, f"p{i}") for i in range(5)]
    split = split_events(table(planned), settings, 7)
    # due NOW_MS + 0..4, raised the lead before: all in the slot that rounds them up
    assert split.timers == {NOW_MS - 5_000: 1, NOW_MS - 4_900: 4}


def test_an_early_event_moves_its_timer_to_its_bursts_raise_time_or_takes_it() -> None:
    """The waker wakes for a burst's timers, not for the lead's: an EARLY event moves its
    version's timer to the burst lead before its due time, or takes it away when that
    time had come (the version was raised in the batch)."""
    settings = config()
    far, near = 60_000, 20_000
    rows = [
        other(r.Kind.PLANNED, far, "a"),
        other(r.Kind.PLANNED, far, "b"),
        other(r.Kind.EARLY, far, "b"),
        other(r.Kind.PLANNED, far + 300, "d"),
        other(r.Kind.EARLY, far + 300, "d"),
        other(r.Kind.PLANNED, near, "c"),
        other(r.Kind.EARLY, near, "c"),
    ]
    split = split_events(table(rows), settings, 7)
    # NOW_MS + far starts a second: a burst's timers are at its start less the burst lead
    assert split.timers == {NOW_MS + far - BURST_LEAD_MS: 2, NOW_MS + far - 5_000: 1}
    assert split.counts[r.Kind.EARLY] == 3
    assert split.counts[r.Kind.PLANNED] == 4


def test_large_arrow_types_render_the_same_records() -> None:
    # Spark hands strings and binaries over as large ones with
    # spark.sql.execution.arrow.useLargeVarTypes.
    settings = config()
    large = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}
    schema = pa.schema([(f.name, large.get(f.type, f.type)) for f in EVENTS])
    split = split_events(pa.Table.from_pylist(MIXED, schema=schema), settings, 7)
    firer = FakeFirer()
    clock = ManualClock(NOW_MS)
    fire_rows(split.rows, 0, 7, "run", settings, firer, clock, handover=split.handover)
    assert firer.batches[-1] == fired_row_by_row(MIXED, settings)
