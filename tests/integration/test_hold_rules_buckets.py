"""The shared hold suite (tests/unit/holds) against the bucket hold, through Spark.

Records go through the pipeline's Spark SQL validation and then the Java gate, run by
Spark's TwsTester; its ROUTE events become copies (the real codec) in bucket lists that
stand in for the bucket topics, read back by the real layout's ready rule, and judged by
the gate in a later batch. Kafka itself is the e2e tests' (tests/e2e/test_bucket_hold.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import Row
from tests.unit.holds.conftest import MAX_LATENESS_MS, TOPOLOGY, Driver, Seen, from_row
from tests.unit.holds.test_contract_rules import *  # noqa: F403 - the suite itself
from tests.unit.holds.test_rules import *  # noqa: F403

from delayline.contract import ConsumedRecord
from delayline.contract import events as r
from delayline.contract.arrow import with_contracts
from delayline.contract.codec import encode_headers
from delayline.holds.buckets.config import BucketsConfig
from delayline.holds.buckets.copy import encode_copy
from delayline.holds.buckets.hold import gate_input
from delayline.holds.buckets.read import SCHEMA_DDL, CopyRows, Span
from delayline.holds.buckets.route import render_copy
from delayline.holds.jvm import holds_class


class BucketDriver:
    def __init__(self, spark: Any, lead_ms: int = 0) -> None:
        self.spark = spark
        holds_class(spark)  # a clear error when the jar is missing
        self.tester = spark.sparkContext._jvm.dev.delayline.hold.HoldTester.gate(
            MAX_LATENESS_MS, lead_ms
        )
        self.lead_ms = lead_ms
        self.layout = BucketsConfig()
        self.buckets: dict[str, list[tuple[int, bytes]]] = {t: [] for t in self.layout.topics}
        self.read: dict[tuple[str, int, int], ConsumedRecord] = {}
        self.routes = 0

    def batch(self, records: list[ConsumedRecord], now_ms: int) -> list[Seen]:
        for x in records:
            self.read[(x.topic, x.partition, x.offset)] = x
        copies = self._ready(now_ms)
        if not records and not copies:
            return []  # the gate sets no timers: without input it does nothing
        frame = gate_input(
            with_contracts(
                self.spark.createDataFrame([r.source_row(x) for x in records], r.SOURCE_SCHEMA),
                TOPOLOGY,
            )
        )
        if copies:
            frame = frame.unionByName(self.spark.createDataFrame(copies, SCHEMA_DDL))
        events = self.tester.batch(frame._jdf, now_ms)
        from pyspark.sql import DataFrame  # noqa: PLC0415

        out = []
        for row in DataFrame(events, self.spark).collect():
            if row["kind"] == r.Kind.ROUTE:
                self.routes += 1
                copy = render_copy(row.asDict(), self.layout, self.lead_ms)
                assert copy.timestamp_ms == now_ms
                self.buckets[copy.topic].append((now_ms, copy.value or b""))
            elif row["kind"] == r.Kind.SUPERSEDED:
                continue
            elif row["kind"] == r.Kind.REWRITE and row["headers"] is None:
                out.append(from_row(Row(**self._fetched(row.asDict()))))
            else:
                out.append(from_row(row))
        return out

    def held_offset(self, topic: str, schedule_id: str) -> int | None:
        offset = self.tester.heldOffset(topic, bytearray(schedule_id.encode()))
        return None if offset < 0 else int(offset)

    def _ready(self, now_ms: int) -> list[Any]:
        """The copies each bucket's reader would read at ``now_ms``: a prefix of each."""
        rows = CopyRows()
        for bucket, topic in enumerate(self.layout.topics):
            waiting = self.buckets[topic]
            until = self.layout.ready_until_ms(bucket, now_ms)
            n = 0
            while n < len(waiting) and waiting[n][0] <= until:
                n += 1
            for offset, (_, value) in enumerate(waiting[:n]):
                rows.add(value, Span(topic, 0, 0, n), offset)
            del waiting[:n]
        if not rows.size:
            return []
        return list(rows.flush().to_pylist())

    def _fetched(self, row: dict[str, Any]) -> dict[str, Any]:
        """A REWRITE of a version held without its payload, as the fire stage fills it
        in from the schedules topic (:mod:`delayline.fire.rewrite`)."""
        record = self.read[(row["src_topic"], row["src_partition"], row["src_offset"])]
        return {**row, "value": record.value, "headers": encode_headers(record.headers)}


@pytest.fixture
def make_hold(spark: Any) -> Callable[..., Driver]:
    return lambda lead_ms=0: BucketDriver(spark, lead_ms)


@pytest.fixture
def hold(make_hold: Callable[[], Driver]) -> Driver:
    return make_hold()


def test_a_copy_moves_down_the_buckets_and_fires_once_at_its_due_time(spark: Any) -> None:
    """A schedule 100 s out: routed into the 64-128 s bucket, moved down as each bucket
    is read, fired at its due time; a stale copy that comes back later is dropped."""
    driver = BucketDriver(spark)
    now = 1_000_000
    rec = ConsumedRecord(
        "schedules", 0, 7, now, b"x", b"p",
        (("scheduler-epoch", b"1100"), ("scheduler-target-topic", b"t")),
    )  # fmt: skip
    assert [e.kind for e in driver.batch([rec], now)] == [r.Kind.PLANNED]
    assert [len(driver.buckets[t]) for t in driver.layout.topics][7] == 1  # 64-128 s
    seen = []
    for t in range(now + 2_000, 1_101_000, 2_000):
        seen += [(e.kind, t) for e in driver.batch([], t)]
    assert seen == [(r.Kind.RAISE, 1_100_000)]
    assert 2 <= driver.routes <= 9, "one route per bucket on the way down, at most"
    assert all(not copies for copies in driver.buckets.values())
    assert driver.held_offset("schedules", "x") is None


def test_a_copy_that_is_not_the_live_one_is_dropped(spark: Any) -> None:
    """An update while the first copy travels: that copy comes back and is dropped; only
    the new version fires. A copy of an earlier rebuild (another routing time) too."""
    driver = BucketDriver(spark)
    now = 1_000_000
    headers = (("scheduler-epoch", b"1010"), ("scheduler-target-topic", b"t"))
    first = ConsumedRecord("schedules", 0, 1, now, b"x", b"v1", headers)
    second = ConsumedRecord("schedules", 0, 2, now, b"x", b"v2", headers)
    driver.batch([first], now)
    stale = [(t, list(c)) for t, c in driver.buckets.items() if c]
    assert [e.kind for e in driver.batch([second], now + 1)] == [r.Kind.UPDATED]
    forged = encode_copy(
        {"src_topic": "schedules", "src_partition": 0, "src_offset": 2,
         "src_timestamp_ms": now, "id": "x", "due_ms": 1_010_000, "at_ms": now - 5,
         "target_topic": "t", "target_key": None, "headers": encode_headers(headers),
         "value": b"v2"}
    )  # fmt: skip
    driver.buckets[driver.layout.topic(0)].append((now, forged))
    fired = [e for t in range(now, 1_011_000, 500) for e in driver.batch([], t)]
    assert [(e.kind, e.value) for e in fired] == [(r.Kind.RAISE, b"v2")]
    assert stale, "the first version's copy was routed"
