"""The shared hold suite (tests/unit/holds) against the JVM hold, through Spark.

Records go through the pipeline's own Spark SQL validation (contract.columns) and then
the Java processor, run by Spark's TwsTester in the session's JVM.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from tests.unit.holds.conftest import (
    MAX_LATENESS_MS,
    TOPOLOGY,
    Driver,
    MemoryDriver,
    Seen,
    from_row,
)
from tests.unit.holds.test_contract_rules import *  # noqa: F403 - the suite itself
from tests.unit.holds.test_notice_rules import *  # noqa: F403
from tests.unit.holds.test_rules import *  # noqa: F403

from delayline.contract import ConsumedRecord
from delayline.contract import events as r
from delayline.contract import headers as h
from delayline.contract.arrow import with_contracts
from delayline.contract.codec import decode_headers, encode_headers
from delayline.contract.columns import parsed
from delayline.contract.notice import Epoch, NoticeRules
from delayline.holds.fold import BURST_LEAD_MS
from delayline.holds.jvm import holds_class


class JvmDriver:
    def __init__(self, spark: Any, lead_ms: int = 0, notice: NoticeRules | None = None) -> None:
        self.spark = spark
        holds_class(spark)  # a clear error when the jar is missing
        tester = spark.sparkContext._jvm.dev.delayline.hold.HoldTester
        self.tester = (
            tester(MAX_LATENESS_MS, lead_ms)
            if notice is None
            else tester.notice(MAX_LATENESS_MS, lead_ms, notice.for_jvm())
        )

    def batch(self, records: list[ConsumedRecord], now_ms: int) -> list[Seen]:
        rows = self.spark.createDataFrame([r.source_row(x) for x in records], r.SOURCE_SCHEMA)
        frame = parsed(with_contracts(rows, TOPOLOGY))
        events = self.tester.batch(frame._jdf, now_ms)
        from pyspark.sql import DataFrame  # noqa: PLC0415

        return [from_row(row) for row in DataFrame(events, self.spark).collect()]

    def held_offset(self, topic: str, schedule_id: str) -> int | None:
        offset = self.tester.heldOffset(topic, bytearray(schedule_id.encode()))
        return None if offset < 0 else int(offset)


@pytest.fixture
def make_hold(spark: Any) -> Callable[..., Driver]:
    return lambda lead_ms=0: JvmDriver(spark, lead_ms)


@pytest.fixture
def make_noticed(spark: Any) -> Callable[..., Driver]:
    return lambda lead_ms=0, notice=None: JvmDriver(spark, lead_ms, notice)


@pytest.fixture
def hold(make_hold: Callable[[], Driver]) -> Driver:
    return make_hold()


def test_the_jvm_hold_encodes_headers_as_the_python_codec(spark: Any) -> None:
    """The Java processor keeps headers in the codec's format: odd names, null values,
    repeats and order survive into the event a delivery is made from."""
    headers = (
        (h.EPOCH, b"1000"),
        ("x-empty", b""),
        ("x-null", None),
        ("ünïcode-名前", "värde".encode()),
        ("x-null", None),
        (h.TARGET_TOPIC, b"target"),
        ("x-bytes", bytes(range(256))),
    )
    record = ConsumedRecord("schedules", 0, 7, 5, b"id", b"p", headers)
    driver = JvmDriver(spark)
    frame = parsed(spark.createDataFrame([r.source_row(record)], r.SOURCE_SCHEMA))
    from pyspark.sql import DataFrame  # noqa: PLC0415

    rows = DataFrame(driver.tester.batch(frame._jdf, 1_000_500), spark).collect()
    (fired,) = [row for row in rows if row["kind"] == r.Kind.RAISE]
    assert bytes(fired["headers"]) == encode_headers(headers)
    assert decode_headers(bytes(fired["headers"])) == headers


NOW_MS = 1_000_000
DENSE = 3
"""A small burst for the tests: more than 3 planned with one due second in a batch."""


def numbered(i: int, due_s: float | None, offset: int | None = None) -> ConsumedRecord:
    """A schedule of id ``b<i>`` (a cancel without ``due_s``), at offset ``i`` unless
    given."""
    headers = () if due_s is None else ((h.EPOCH, str(due_s).encode()), (h.TARGET_TOPIC, b"t"))
    value = None if due_s is None else b"p"
    at = i if offset is None else offset
    return ConsumedRecord("schedules", 0, at, NOW_MS - 5, f"b{i:02d}".encode(), value, headers)


def burst_driver(spark: Any, lead_ms: int) -> JvmDriver:
    driver = JvmDriver(spark, lead_ms)
    tester = spark.sparkContext._jvm.dev.delayline.hold.HoldTester
    driver.tester = tester.bursts(MAX_LATENESS_MS, lead_ms, BURST_LEAD_MS, DENSE)
    return driver


def ids(events: list[Seen], kind: str) -> set[str]:
    return {e.id for e in events if e.kind == kind and e.id is not None}


def names(numbers: range) -> set[str]:
    return {f"b{i:02d}" for i in numbers}


def test_a_burst_is_raised_its_burst_lead_before_its_due_time(spark: Any) -> None:
    """Of the versions planned in a batch with one due second, those past the first
    ``DENSE`` (in key order) are raised the burst lead before their due time, or in the
    batch when that time has come, each with an ``early`` event; the others, and a
    second with few, keep the lead. An update or a cancel takes the early timer away."""
    driver = burst_driver(spark, lead_ms=5_000)
    far = [numbered(i, 1060.25) for i in range(6)]  # due in 60.25 s
    near = [numbered(i, 1020) for i in range(10, 15)]  # due in 20 s: within the burst lead
    planned = driver.batch([*far, *near, numbered(20, 1061)], NOW_MS)
    early = ids(planned, r.Kind.EARLY)
    far_early = early & names(range(6))
    near_early = early - far_early
    assert len(far_early) == len(far) - DENSE
    assert len(near_early) == len(near) - DENSE
    assert ids(planned, r.Kind.RAISE) == near_early, "its burst's time come: raised at once"
    assert len(ids(planned, r.Kind.PLANNED)) == 12, "each is planned all the same"
    assert {e.due_ms for e in planned if e.kind == r.Kind.EARLY and e.id in far_early} == {
        1_060_250
    }

    updated, cancelled, kept = sorted(far_early)
    moved = numbered(int(updated[1:]), 1070, offset=100)  # alone in its second: the lead
    changed = driver.batch([moved, numbered(int(cancelled[1:]), None, offset=101)], NOW_MS + 1)
    assert ids(changed, r.Kind.UPDATED) == {updated}
    assert ids(changed, r.Kind.EARLY) == set()
    assert ids(driver.batch([], 1_015_000), r.Kind.RAISE) == names(range(10, 15)) - near_early
    assert driver.batch([], 1_029_999) == []
    # at the start of their due second less the burst lead
    assert ids(driver.batch([], 1_030_000), r.Kind.RAISE) == {kept}, "the early timers moved"
    assert driver.batch([], 1_055_249) == []
    assert ids(driver.batch([], 1_055_250), r.Kind.RAISE) == names(range(6)) - far_early
    assert ids(driver.batch([], 1_056_000), r.Kind.RAISE) == {"b20"}
    assert ids(driver.batch([], 1_065_000), r.Kind.RAISE) == {updated}
    assert driver.batch([], 1_200_000) == [], "each raised once, the cancelled one never"


def test_a_version_raised_early_in_the_batch_that_hides_it_is_not_rewritten(
    spark: Any,
) -> None:
    """An invalid record that compaction would keep instead of a held version makes the
    hold write the version again, unless it is raised in that batch: a copy read back
    after the raise would be planned again. A version whose early timer falls due in the
    batch is raised, not rewritten; before that time it is rewritten."""
    for now_ms, rewritten in ((1_030_000, False), (1_020_000, True)):
        driver = burst_driver(spark, lead_ms=5_000)
        planned = driver.batch([numbered(i, 1060.25) for i in range(6)], NOW_MS)
        hidden = sorted(ids(planned, r.Kind.EARLY))[0]
        headers = ((h.EPOCH, b"soon"), (h.TARGET_TOPIC, b"t"))
        invalid = ConsumedRecord("schedules", 0, 100, NOW_MS, hidden.encode(), b"p", headers)
        seen = driver.batch([invalid], now_ms)
        assert (ids(seen, r.Kind.REWRITE) == {hidden}) is rewritten, seen
        assert (hidden in ids(seen, r.Kind.RAISE)) is not rewritten, seen


def test_without_a_lead_nothing_is_raised_early(spark: Any) -> None:
    """With a lead of 0 the executors deliver what is raised: a burst waits for its due
    time like any schedule."""
    driver = burst_driver(spark, lead_ms=0)
    planned = driver.batch([numbered(i, 1060) for i in range(6)], NOW_MS)
    assert ids(planned, r.Kind.EARLY) == set()
    assert ids(planned, r.Kind.RAISE) == set()
    assert driver.batch([], 1_059_999) == []
    assert len(ids(driver.batch([], 1_060_000), r.Kind.RAISE)) == 6


def test_the_java_and_python_folds_judge_notice_alike(spark: Any) -> None:
    """Generated versions over three partitions and three epochs (one off): the two
    folds hold and skip exactly the same ones (each version has an id of its own)."""
    rules = NoticeRules(
        (
            Epoch(20_000, 2),
            Epoch(0, 2, {"schedules": {0: 30, 1: 10}}),
            Epoch(5_000, 4, {"schedules": {0: 60, 1: 10, 2: 40}}),
        )
    )
    rng = random.Random(7)
    records = []
    for i in range(240):
        partition, offset = i % 3, i // 3
        written = NOW_MS - rng.randrange(0, 50_000)
        due_ms = written + rng.choice((-1_000, 0, 4_999, 5_000, 19_999, 20_000, 60_000))
        headers = ((h.EPOCH, f"{due_ms / 1000:.3f}".encode()), (h.TARGET_TOPIC, b"t"))
        key = f"n{i:03d}".encode()
        records.append(ConsumedRecord("schedules", partition, offset, written, key, b"p", headers))
    lead_ms = 2_000
    python = MemoryDriver(lead_ms, rules).batch(records, NOW_MS)
    java = JvmDriver(spark, lead_ms, rules).batch(records, NOW_MS)
    assert ids(java, r.Kind.DIRECT) == ids(python, r.Kind.DIRECT)
    assert ids(java, r.Kind.PLANNED) == ids(python, r.Kind.PLANNED)
    assert len(ids(python, r.Kind.DIRECT)) > 40, "a table that tells nothing apart"
    assert len(ids(python, r.Kind.PLANNED)) > 40, "a table that tells nothing apart"
    raised = ids(python, r.Kind.SHORT) | ids(python, r.Kind.MISSED)
    assert ids(java, r.Kind.SHORT) | ids(java, r.Kind.MISSED) == raised
    everything = ids(python, r.Kind.DIRECT) | ids(python, r.Kind.PLANNED) | raised
    assert everything == {f"n{i:03d}" for i in range(240)}


def test_the_java_hold_refuses_notice_rules_it_cannot_read(spark: Any) -> None:
    """Refused when the processor is made (on the driver), not in a task."""
    tester = spark.sparkContext._jvm.dev.delayline.hold.HoldTester
    for spec in ("20000", "x;schedules:0:1", "20000;schedules:0", "20000;schedules:x:1", "1;:0:1"):
        with pytest.raises(Exception, match=r"not a notice|For input string"):
            tester.notice(MAX_LATENESS_MS, 2_000, spec)
