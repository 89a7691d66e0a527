"""The hold rules, run through Spark's own TwsTester (no JVM)."""

from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from delayline.pipeline import rows as r
from delayline.stores.spark_state import EXPIRED, HoldProcessor

KEY = ("schedules", b"a")
NOW = 1_000_000


def record(
    offset: int, due_s: float | None = None, value: bytes | None = b"p", **extra: bytes
) -> Row:
    headers = []
    if due_s is not None:
        headers = [Row(key="scheduler-epoch", value=str(due_s).encode()),
                   Row(key="scheduler-target-topic", value=b"target")]  # fmt: skip
    headers += [Row(key=k.replace("_", "-"), value=v) for k, v in extra.items()]
    return Row(topic="schedules", gkey=b"a", key=b"a", value=value, partition=1, offset=offset,
               timestamp_ms=NOW - 5, headers=headers)  # fmt: skip


def tombstone(offset: int, fired_offset: int | None = None) -> Row:
    extra = {} if fired_offset is None else {"delayline_fired_offset": str(fired_offset).encode()}
    return record(offset, value=None, **extra)


@pytest.fixture
def tester() -> TwsTester:
    t = TwsTester(HoldProcessor(max_lateness_ms=60_000), timeMode="ProcessingTime")
    t.setProcessingTime(NOW)
    return t


def kinds(rows: list[Row]) -> list[str]:
    return [row.kind for row in rows]


def held_offset(t: TwsTester) -> int | None:
    state = t.peekValueState("schedule", KEY)
    return None if state is None else state[2]


def test_plans_then_fires_at_the_due_time_exactly_once(tester: TwsTester) -> None:
    assert kinds(tester.test(KEY, [record(0, due_s=1010)])) == [r.PLANNED]
    assert tester.setProcessingTime(1_009_999) == []
    fired = tester.setProcessingTime(1_010_000)
    assert kinds(fired) == [r.FIRE]
    assert (fired[0].id, fired[0].due_ms, fired[0].src_offset, fired[0].value) == (
        "a",
        1_010_000,
        0,
        b"p",
    )
    assert held_offset(tester) is None
    assert tester.setProcessingTime(1_100_000) == []


def test_newer_version_replaces_and_moves_the_timer(tester: TwsTester) -> None:
    tester.test(KEY, [record(0, due_s=1010)])
    assert kinds(tester.test(KEY, [record(1, due_s=1020, value=b"v2")])) == [r.UPDATED]
    assert tester.setProcessingTime(1_015_000) == [], "old timer must be gone"
    (fired,) = tester.setProcessingTime(1_020_000)
    assert (fired.kind, fired.value) == (r.FIRE, b"v2")


def test_older_or_replayed_offset_is_ignored(tester: TwsTester) -> None:
    tester.test(KEY, [record(5, due_s=1010)])
    assert kinds(tester.test(KEY, [record(5, due_s=1002), record(3, due_s=1001)])) == [
        r.STALE,
        r.STALE,
    ]
    assert held_offset(tester) == 5


def test_cancel_removes_state_and_timer(tester: TwsTester) -> None:
    tester.test(KEY, [record(0, due_s=1010)])
    assert kinds(tester.test(KEY, [tombstone(1)])) == [r.CANCELLED]
    assert held_offset(tester) is None
    assert tester.setProcessingTime(1_020_000) == []


def test_cancel_of_unknown_id_is_counted(tester: TwsTester) -> None:
    assert kinds(tester.test(KEY, [tombstone(0)])) == [r.UNKNOWN_CANCEL]
    assert kinds(tester.test(KEY, [tombstone(1, fired_offset=0)])) == [r.OWN_TOMBSTONE]


def test_own_tombstone_of_a_fired_version_keeps_the_newer_one(tester: TwsTester) -> None:
    tester.test(KEY, [record(7, due_s=1010)])
    stale, rewrite = tester.test(KEY, [tombstone(8, fired_offset=3)])
    assert (stale.kind, rewrite.kind) == (r.STALE, r.REWRITE)
    # The kept version is appended again, as it was, so compaction cannot drop it.
    assert (rewrite.src_offset, rewrite.src_partition, rewrite.value) == (7, 1, b"p")
    assert held_offset(tester) == 7
    assert kinds(tester.test(KEY, [tombstone(9, fired_offset=7)])) == [r.CANCELLED]


def test_no_rewrite_when_a_newer_version_follows_the_tombstone(tester: TwsTester) -> None:
    tester.test(KEY, [record(7, due_s=1010)])
    out = tester.test(KEY, [tombstone(8, fired_offset=3), record(9, due_s=1020)])
    assert kinds(out) == [r.STALE, r.UPDATED]


def test_past_due_fires_at_once_and_too_late_is_expired(tester: TwsTester) -> None:
    missed, fired = tester.test(KEY, [record(0, due_s=990)])
    assert (missed.kind, fired.kind) == (r.MISSED, r.FIRE)
    missed, dead = tester.test(KEY, [record(1, due_s=900)])  # 100 s late, max 60 s
    assert missed.kind == r.MISSED
    assert (dead.kind, dead.reason, dead.due_ms) == (r.DEAD, EXPIRED, 900_000)
    assert held_offset(tester) is None


def test_timer_that_fell_due_while_down_obeys_max_lateness(tester: TwsTester) -> None:
    tester.test(KEY, [record(0, due_s=1010)])
    (dead,) = tester.setProcessingTime(1_010_000 + 60_001)
    assert (dead.kind, dead.reason) == (r.DEAD, EXPIRED)


def test_schedule_then_cancel_in_one_batch_never_fires(tester: TwsTester) -> None:
    """What a rebuild reads: a fired (past-due) schedule followed by its tombstone."""
    out = tester.test(KEY, [tombstone(1, fired_offset=0), record(0, due_s=990)])
    assert kinds(out) == [r.CANCELLED]
    assert held_offset(tester) is None


def test_only_the_last_version_in_a_batch_counts(tester: TwsTester) -> None:
    out = tester.test(KEY, [record(0, due_s=990), record(1, due_s=1030, value=b"v2")])
    assert kinds(out) == [r.PLANNED]
    assert held_offset(tester) == 1


def test_invalid_record_is_dead_lettered_and_keeps_the_held_version(tester: TwsTester) -> None:
    tester.test(KEY, [record(0, due_s=1010)])
    bad = record(1, **{"scheduler_epoch": b"soon", "scheduler_target_topic": b"t"})
    (dead,) = tester.test(KEY, [bad])
    assert (dead.kind, dead.src_offset) == (r.DEAD, 1)
    assert "not a decimal number" in dead.reason
    assert held_offset(tester) == 0


def test_no_max_lateness_fires_anything() -> None:
    t = TwsTester(HoldProcessor(), timeMode="ProcessingTime")
    t.setProcessingTime(10**12)
    assert kinds(t.test(KEY, [record(0, due_s=1)])) == [r.MISSED, r.FIRE]
