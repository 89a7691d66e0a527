"""The committer's pure parts: the in-flight codec, the due plan, the broker clock
bounds and the hand-off decision of the fire stage."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.committer import broker_clock as clock
from delayline.committer.due_plan import BUCKET_MS, DuePlan, burst_start_ms, group_width_ms
from delayline.committer.tally import ITEM_MARGIN, ITEM_MS, Tally
from delayline.committer.warming import (
    WARM_AHEAD_MS,
    WARM_COVERS_MS,
    WARM_MARGIN_MS,
    warm_plan,
    warm_within_ms,
)
from delayline.contract import ConsumedRecord, OutgoingRecord
from delayline.contract import events as r
from delayline.contract.kinds import HoldEvent
from delayline.contract.topology import Topology
from delayline.core.clock import ManualClock
from delayline.core.model import Schedule, SourceRef
from delayline.errors import ConfigError, FormatVersionError
from delayline.fire.firing import Firing
from delayline.fire.inflight import (
    HEADER,
    InflightRecordError,
    inflight_partition,
    render_inflight,
    render_inflight_tombstone,
)
from delayline.fire.partition import fire_rows
from delayline.fire.refusals import TopicFacts
from delayline.fire.report import HANDED, REFUSED, Delivered
from delayline.fire.topic_catalog import TopicCatalog
from delayline.kafka.topics import INFLIGHT_MAX_BYTES
from delayline.pipeline.config import MAX_LEAD_MS, PipelineConfig
from tests.inflight import handed_of, read_into

INFLIGHT = "pipeline-inflight"


def schedule(sid: str, due_ms: int, offset: int = 0, key: bytes | None = b"k") -> Schedule:
    return Schedule(
        sid, due_ms, "target", key, b"payload",
        (("scheduler-epoch", b"1"), ("x-null", None), ("x", b"\x00\xff")),
        SourceRef("schedules", 1, offset, 1_000),
    )  # fmt: skip


def consumed(record_offset: int, out: object) -> ConsumedRecord:
    o = out  # an OutgoingRecord, as read back from its partition
    return ConsumedRecord(o.topic, 0, record_offset, 5, o.key, o.value, o.headers)  # type: ignore[attr-defined]


@given(
    sid=st.text(min_size=1, max_size=20),
    due=st.integers(0, 2**53),
    key=st.one_of(st.none(), st.binary(max_size=20)),
    payload=st.binary(max_size=40),
)
def test_inflight_record_round_trips_every_field(
    sid: str, due: int, key: bytes | None, payload: bytes
) -> None:
    s = Schedule(sid, due, "t", key, payload, (("h", None), ("h", b"1")), SourceRef("s", 3, 9, 7))
    handed = handed_of(consumed(0, render_inflight(s, INFLIGHT)))
    back = handed.schedule
    assert back == s
    assert back.source == s.source
    assert (handed.batch, handed.missed) == (None, False)
    later = handed_of(consumed(0, render_inflight(s, INFLIGHT, 12, missed=True)))
    assert (later.schedule, later.batch, later.missed) == (s, 12, True)


def test_inflight_keys_are_unique_per_version_and_tombstones_go_to_their_partition() -> None:
    a = render_inflight(schedule("a", 10, offset=1), INFLIGHT)
    b = render_inflight(schedule("a", 10, offset=2), INFLIGHT)
    assert a.key != b.key
    tomb = render_inflight_tombstone(INFLIGHT, a.key, 3)
    assert (tomb.topic, tomb.partition, tomb.key, tomb.value) == (INFLIGHT, 3, a.key, None)


def test_an_inflight_record_of_an_earlier_version_is_read() -> None:
    """Its JSON header, written before the upgrade (a topic handed over to before it is
    delivered after it)."""
    facts = (
        b'{"id":"a","due_ms":10,"target_topic":"t","target_key":"azE=",'
        b'"source":["s",3,9,7],"batch":4,"missed":true}'
    )
    handed = handed_of(
        ConsumedRecord(INFLIGHT, 0, 4, 0, b"k", b"v", (("h", b"1"), (HEADER, facts)))
    )
    s = Schedule("a", 10, "t", b"k1", b"v", (("h", b"1"),), SourceRef("s", 3, 9, 7))
    assert (handed.schedule, handed.schedule.source, handed.batch, handed.missed) == (
        s,
        s.source,
        4,
        True,
    )


def test_a_cut_or_newer_inflight_header_is_refused() -> None:
    whole = render_inflight(schedule("a", 10, offset=1), INFLIGHT).headers[-1][1]
    assert whole is not None
    for raw in (whole[:-1], whole + b"x", bytes([1]) + whole[1:]):
        with pytest.raises(InflightRecordError, match="unreadable"):
            handed_of(ConsumedRecord(INFLIGHT, 0, 4, 0, b"k", b"v", ((HEADER, raw),)))
    newer = bytes([3]) + whole[1:]  # a newer release's: stop, never skip it
    with pytest.raises(FormatVersionError, match="written by a newer delayline"):
        handed_of(ConsumedRecord(INFLIGHT, 0, 4, 0, b"k", b"v", ((HEADER, newer),)))


@pytest.mark.parametrize(
    "headers",
    [(), (("x", b"1"),), ((HEADER, b"not json"),), ((HEADER, b'{"id": "a"}'),)],
)
def test_foreign_inflight_records_are_refused_clearly(
    headers: tuple[tuple[str, bytes], ...],
) -> None:
    with pytest.raises(InflightRecordError, match="offset 4"):
        handed_of(ConsumedRecord(INFLIGHT, 0, 4, 0, b"k", b"v", headers))


def plan_with(*dues: int) -> tuple[DuePlan, list[ConsumedRecord]]:
    plan, records = DuePlan(), []
    for offset, due in enumerate(dues):
        record = consumed(offset, render_inflight(schedule(f"s{offset}", due, offset), INFLIGHT))
        read_into(plan, record)
        records.append(record)
    return plan, records


def test_groups_take_what_is_due_within_the_width_and_commit_at_the_latest() -> None:
    plan, _ = plan_with(1_000, 1_004, 1_005, 2_000)
    group = plan.take(now_ms=900, width_ms=5)
    assert group is not None
    assert [p.due_ms for p in group.items] == [1_000, 1_004]
    assert group.commit_ms == 1_004
    assert plan.next_release_ms() == 1_005


def test_behind_a_group_takes_everything_already_due() -> None:
    plan, _ = plan_with(1_000, 1_500, 1_900, 2_000)
    group = plan.take(now_ms=1_950, width_ms=5)
    assert group is not None
    assert [p.due_ms for p in group.items] == [1_000, 1_500, 1_900]
    assert group.commit_ms == 1_900


def test_a_group_holds_at_most_max_items_in_due_order_and_the_rest_come_next() -> None:
    plan, _ = plan_with(1_003, 1_000, 1_002, 1_001, 1_000)
    first = plan.take(now_ms=2_000, width_ms=5, max_items=2)
    second = plan.take(now_ms=2_000, width_ms=5, max_items=2)
    third = plan.take(now_ms=2_000, width_ms=5, max_items=2)
    assert first is not None
    assert second is not None
    assert third is not None
    assert [p.due_ms for p in first.items] == [1_000, 1_000]
    assert first.commit_ms == 1_000
    assert [p.due_ms for p in second.items] == [1_001, 1_002]
    assert [p.due_ms for p in third.items] == [1_003]
    assert plan.take(now_ms=2_000, width_ms=5, max_items=2) is None


def test_offsets_never_pass_a_pending_schedule() -> None:
    plan, _ = plan_with(3_000, 1_000, 2_000)  # offsets 0, 1, 2
    assert plan.offsets() == {0: 0}
    plan.take(now_ms=0, width_ms=1)  # the one due at 1,000 (offset 1)
    assert plan.offsets() == {0: 0}, "offset 0 is still pending"
    plan.take(now_ms=0, width_ms=1)  # 2,000
    plan.take(now_ms=0, width_ms=1)  # 3,000
    assert plan.offsets() == {0: 3}
    assert plan.take(now_ms=0, width_ms=1) is None


def test_a_tombstone_read_after_a_restart_drops_what_was_delivered() -> None:
    plan, records = plan_with(1_000, 2_000)
    dropped = plan.tombstone(0, 7, records[0].key)
    assert dropped
    assert plan.next_release_ms() == 2_000
    assert len(plan) == 1
    assert not plan.tombstone(0, 8, b"unknown")
    assert plan.offsets() == {0: 1}


def read_at(plan: DuePlan, partition: int, offset: int, sid: str, due: int) -> None:
    out = render_inflight(schedule(sid, due, offset), INFLIGHT)
    record = ConsumedRecord(INFLIGHT, partition, offset, 5, out.key, out.value, out.headers)
    read_into(plan, record)


def test_a_group_holds_one_partition_and_each_partition_keeps_its_own_offsets() -> None:
    plan = DuePlan()
    read_at(plan, 0, 0, "a", 1_000)
    read_at(plan, 1, 0, "b", 1_001)
    read_at(plan, 1, 1, "c", 1_002)
    read_at(plan, 0, 1, "d", 3_000)
    assert plan.next_release_ms() == 1_000
    assert plan.next_release_ms([1]) == 1_001
    assert plan.next_release_ms([2]) is None
    group = plan.take(now_ms=0, width_ms=5)  # the partition due first, and only it
    assert group is not None
    assert [(p.partition, p.schedule.id) for p in group.items] == [(0, "a")]
    group = plan.take(now_ms=0, width_ms=5, partition=1)
    assert group is not None
    assert [p.schedule.id for p in group.items] == ["b", "c"]
    assert plan.offsets() == {0: 1, 1: 2}
    assert plan.offsets([1]) == {1: 2}
    assert plan.take(now_ms=0, width_ms=5, partition=1) is None


def test_a_partition_given_up_is_forgotten_whole() -> None:
    plan = DuePlan()
    read_at(plan, 0, 0, "a", 1_000)
    read_at(plan, 2, 0, "b", 900)
    read_at(plan, 2, 1, "c", 950)
    assert plan.drop_partition(2) == 2
    assert len(plan) == 1
    assert plan.next_release_ms() == 1_000
    assert plan.pending_of("schedules", "b") == []
    assert plan.offsets() == {0: 0}
    assert [p.schedule.id for p in plan.take_new()] == ["a"]


@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3_000)), max_size=60),
    st.integers(0, 2),
    st.integers(0, 3_000),
    st.integers(1, 2_000),
    st.integers(0, 30),
)
def test_due_within_counts_what_is_pending_to_a_bucket_either_side(
    dues: list[tuple[int, int]], partition: int, start: int, width: int, taken: int
) -> None:
    """Against a scan of what is pending, after reads, takes and a tombstone."""
    plan = DuePlan()
    for offset, (p, due) in enumerate(dues):
        read_at(plan, p, offset, f"s{offset}", due)
    for _ in range(taken % 4):
        plan.take(now_ms=0, width_ms=taken, partition=partition)
    if dues:
        first = render_inflight(schedule("s0", dues[0][1], 0), INFLIGHT)
        plan.tombstone(dues[0][0], 999, first.key)
    pending = [
        d
        for offset, (p, d) in enumerate(dues)
        if p == partition and plan.pending_of("schedules", f"s{offset}")
    ]
    counted = plan.due_within(partition, start, start + width)
    exact = sum(1 for d in pending if start <= d < start + width)
    loose = sum(1 for d in pending if start - BUCKET_MS < d < start + width + BUCKET_MS)
    assert exact <= counted <= loose


def test_a_partition_given_up_counts_nothing_due() -> None:
    plan = DuePlan()
    read_at(plan, 1, 0, "a", 1_000)
    plan.drop_partition(1)
    assert plan.due_within(1, 0, 10_000) == 0


def test_a_busy_partition_takes_wider_groups() -> None:
    """Three schedules released within 10 ms keep 5 ms groups (a trickle's precision),
    four widen them to 10 ms (fewer transactions); only in their own partition. Counted
    in whole buckets: from 1,001, what is released by 1,019 counts too."""

    def width(partition: int, from_ms: int, busy_ms: int = 10) -> int:
        return group_width_ms(plan, partition, from_ms, 5, busy_ms, 4)

    plan = DuePlan()
    for i, due in enumerate((1_000, 1_003, 1_006)):
        read_at(plan, 0, i, f"a{i}", due)
    read_at(plan, 1, 0, "b0", 1_000)
    assert width(0, 1_000) == 5
    read_at(plan, 0, 3, "a3", 1_008)
    assert width(0, 1_000) == 10
    assert width(1, 1_000) == 5, "another partition stays narrow"
    assert width(0, 1_000, busy_ms=3) == 5, "no wider than the narrow width: off"
    group = plan.take(1_000, width(0, 1_000), partition=0)
    assert group is not None
    assert (len(group.items), group.commit_ms) == (4, 1_008)
    for i, due in enumerate((1_001, 1_004, 1_012, 1_019, 1_021)):
        read_at(plan, 0, 4 + i, f"c{i}", due)
    assert width(0, 1_001) == 10, "four in the buckets of 1,000 and 1,010"
    assert width(0, 1_012) == 5, "three in the buckets of 1,010 and 1,020"


def test_a_burst_starts_as_long_before_its_first_due_time_as_writing_it_takes() -> None:
    plan = DuePlan()
    for i in range(3_000):  # 3,000 due over 300 ms, then 1,000 more a second later
        read_at(plan, 0, i, f"b{i}", 10_000 + i // 10)
    for i in range(1_000):
        read_at(plan, 0, 3_000 + i, f"c{i}", 11_000)
    # More than 2,000 within 500 ms: a burst; two groups of 500 ms hold all 3,000.
    assert burst_start_ms(plan, 0, 10_000, 0.5, 500, 2, 2_000) == 10_000 - 1_500
    # Four groups reach the 1,000 due a second later.
    assert burst_start_ms(plan, 0, 10_000, 0.5, 500, 4, 2_000) == 10_000 - 2_000
    assert burst_start_ms(plan, 0, 10_000, 0.5, 500, 2, 3_000) is None, "not more than 3,000"
    assert burst_start_ms(plan, 0, 10_000, 0.5, 100, 2, 2_000) is None, "1,000 within 100 ms"
    assert plan.due_within(1, 0, 100_000) == 0, "nothing pending there"
    first = plan.next_pending(0)
    assert first is not None
    assert first.schedule.id == "b0"
    assert plan.next_pending(1) is None


@given(st.text(min_size=1, max_size=30), st.integers(1, 64))
def test_every_version_of_a_schedule_goes_to_one_inflight_partition(
    sid: str, partitions: int
) -> None:
    first = render_inflight(schedule(sid, 10, offset=1), INFLIGHT, partitions=partitions)
    later = render_inflight(schedule(sid, 99, offset=7), INFLIGHT, partitions=partitions)
    assert first.partition == later.partition == inflight_partition(sid, partitions)
    assert first.partition is not None
    assert 0 <= first.partition < partitions


def test_inflight_partitions_spread_and_never_change_across_processes() -> None:
    # CRC-32: the same on every host and in every process (Python's hash is salted).
    # Pinned: another function would split an upgraded pipeline's versions of one id.
    assert [inflight_partition(f"order-{i}", 4) for i in range(8)] == [1, 3, 1, 3, 0, 2, 0, 2]
    counts = [0] * 4
    for i in range(4_000):
        counts[inflight_partition(f"order-{i}", 4)] += 1
    assert min(counts) > 800, counts


def test_a_probe_bounds_the_broker_clock_offset() -> None:
    # The broker stamped 10,005 while the host went from 10,000 to 10,004.
    offset = clock.bound(stamp_ms=10_005, sent_ms=10_000, acked_ms=10_004)
    assert (offset.low_ms, offset.high_ms) == (0, 6)


def test_a_large_skew_refuses_and_a_small_one_passes() -> None:
    assert clock.judge(clock.BrokerOffset(-3, 3)).mid_ms == 0
    with pytest.raises(clock.ClockSkewError, match="NTP"):
        clock.judge(clock.BrokerOffset(5_000, 5_010))


def test_a_lead_outside_its_range_is_refused() -> None:
    with pytest.raises(ConfigError, match="cancel"):
        PipelineConfig(lead_ms=MAX_LEAD_MS + 1)
    with pytest.raises(ConfigError):
        PipelineConfig(lead_ms=-1)


def test_a_lead_the_trigger_interval_and_a_batch_do_not_fit_in_is_warned_of() -> None:
    assert PipelineConfig().lead_warning() is None  # 5 s lead, 1 s trigger
    assert PipelineConfig(lead_ms=0, trigger_interval_ms=10_000).lead_warning() is None
    assert PipelineConfig(lead_ms=5_000, trigger_interval_ms=3_000).lead_warning() is None
    warning = PipelineConfig(lead_ms=5_000, trigger_interval_ms=3_001).lead_warning()
    assert warning is not None
    assert "--lead to 5001 ms" in warning


class _Recorder:
    """Stands in for the transactional writer: keeps what a batch would commit."""

    def __init__(self) -> None:
        self.records: list[object] = []

    def commit_batch(self, run: str, batch_id: int, records: list[object], **_: object) -> object:
        self.records = list(records)
        from delayline.fire.transactional import Committed  # noqa: PLC0415

        return Committed(replay=False)


@pytest.mark.parametrize(
    ("lead_ms", "due_ms", "payload_bytes", "outcome"),
    [
        (3_000, 10_500, 10, HANDED),
        (3_000, 10_000, 10, HANDED),  # due: the committer delivers it at once, watched
        (0, 10_500, 10, r.Kind.RAISE),  # no lead: delivered in the batch
        (3_000, 10_500, 1_048_000, HANDED),  # over a producer's default limit
        (3_000, 10_500, INFLIGHT_MAX_BYTES, REFUSED),  # in the batch it would be early
        (0, 10_500, INFLIGHT_MAX_BYTES, r.Kind.RAISE),  # no lead: in the batch, on time
    ],
)
def test_with_a_lead_the_fire_stage_hands_over_all_but_what_is_too_large(
    lead_ms: int, due_ms: int, payload_bytes: int, outcome: str
) -> None:
    config = PipelineConfig(Topology(), lead_ms=lead_ms)
    big = replace(schedule("a", due_ms), payload=b"p" * payload_bytes)
    row = r.event_row(HoldEvent(r.Kind.RAISE, 9_000, "a", schedule=big))
    firer = _Recorder()
    report = fire_rows([row], 0, 1, "run", config, firer, ManualClock(10_000))  # type: ignore[arg-type]
    topics = [getattr(x, "topic", "firing") for x in firer.records]
    counted = {k: n for k, n in report.counts.items() if n}
    assert counted == {outcome: 1}
    if outcome == HANDED:
        assert topics == [config.inflight_topic_name, "schedules"]  # in-flight, tombstone
        assert report.lateness_ms == []
    elif outcome == REFUSED:  # a dead letter and its tombstone, nothing delivered
        assert topics == [config.topology.dead_letter_topic, "schedules"]
        assert "larger than the in-flight limit" in report.notes[0]
    else:
        assert topics == ["firing"]


def test_a_committer_delivery_is_stamped_with_its_due_time_and_writes_no_tombstone() -> None:
    s = schedule("a", 10_500)
    firing = Firing(s, "dead", "history", timestamp_ms=10_500, forget=False)
    delivery, history = firing.records()
    assert (delivery.topic, delivery.timestamp_ms) == ("target", 10_500)
    assert (history.topic, history.timestamp_ms) == ("history", 10_500)
    dead_letter, *rest = firing.refused("too large")
    assert (dead_letter.topic, rest) == ("dead", [])
    tombstones = Firing(s, "dead").records()[1:]
    assert [(t.topic, t.value) for t in tombstones] == [("schedules", None)]


def test_a_group_is_written_as_far_ahead_as_the_slowest_recent_write() -> None:
    tally = Tally(lambda _d: None, write_ahead_ms=5, max_write_ahead_ms=100)
    # Nothing measured: the most (a fresh producer's first transaction is the slowest).
    assert tally.write_ahead_ms() == 100
    for ms in (4, 12, 6):
        tally.add(Delivered(delivered=1, refused=0, write_ms=ms), size=1, pending=0)
    assert tally.write_ahead_ms() == 12 + 5
    tally.add(Delivered(delivered=1, refused=0, write_ms=400), size=1, pending=0)
    assert tally.write_ahead_ms() == 100
    assert tally.delivered == 4


def test_the_time_per_delivery_is_measured_on_large_groups_only() -> None:
    tally = Tally(lambda _d: None, write_ahead_ms=5, max_write_ahead_ms=100)
    assert tally.item_ms() == ITEM_MS * ITEM_MARGIN, "unmeasured: the default"
    tally.add(Delivered(delivered=10, refused=0, write_ms=500), size=10, pending=0)
    assert tally.item_ms() == ITEM_MS * ITEM_MARGIN, "a small group says nothing"
    tally.add(Delivered(delivered=1_000, refused=0, write_ms=150), size=1_000, pending=0)
    tally.add(Delivered(delivered=3_000, refused=0, write_ms=450), size=3_000, pending=0)
    assert tally.item_ms() == 600 / 4_000 * ITEM_MARGIN


def test_target_facts_read_with_a_burst_raised_early_outlive_its_due_time() -> None:
    """A burst raised 30 s early waits that long in the committer: the facts of its target,
    read 35 s ago, are read again when it is read, so none expires before it is due
    (one that did would be looked up inside the delivery's write)."""
    now = [0]
    asked: list[str] = []

    def describe(topics: Any, authorization: bool) -> dict[str, TopicFacts | None]:
        asked.extend(topics)
        return {t: TopicFacts() for t in topics}

    catalog = TopicCatalog(describe, clock=lambda: now[0])
    catalog.confirm({"orders"})
    now[0], due = 35_000, 65_000  # read 35 s after its facts, due 30 s later
    assert catalog.stale({"orders"}, WARM_AHEAD_MS) == set()  # the lead's rule alone
    within, later = warm_plan({"orders": due}, now[0])
    assert within == {"orders": 40_000}
    assert later == {}  # facts read now outlive it
    catalog.confirm(catalog.stale({"orders"}, within["orders"]))
    asked.clear()
    now[0] = due
    assert catalog.check({0: OutgoingRecord("orders", b"k", b"v")}) == {}
    assert asked == []  # nothing read at delivery time


def test_target_facts_are_warmed_again_for_a_due_time_past_their_lifetime() -> None:
    """Due further ahead than facts read now last, a topic is warmed again on later
    steps; facts read less than the margin ago are never read again, however far the
    due time; each topic is judged by its own due time."""
    now = 100_000
    within, later = warm_plan({"far": now + 120_000, "near": now + 5_000}, now)
    assert within == {"far": WARM_COVERS_MS, "near": WARM_AHEAD_MS}
    assert later == {"far": now + 120_000}  # warmed again until its due time is in reach
    catalog = TopicCatalog(lambda topics, auth: {t: TopicFacts() for t in topics},
                           clock=lambda: now)  # fmt: skip
    catalog.confirm({"far"})
    now += WARM_MARGIN_MS - 1  # read just under the margin ago: kept
    assert catalog.stale({"far"}, warm_within_ms(now + 120_000, now)) == set()
    now += 1
    assert catalog.stale({"far"}, warm_within_ms(now + 120_000, now)) == {"far"}
    _, later = warm_plan({"far": now + WARM_COVERS_MS}, now)
    assert later == {}  # in reach now: a read covers it
