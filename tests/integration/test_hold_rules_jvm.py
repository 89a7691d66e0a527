"""The shared hold suite (tests/unit/holds) against the JVM hold, through Spark.

Records go through the pipeline's own Spark SQL validation (contract.columns) and then
the Java processor, run by Spark's TwsTester in the session's JVM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.unit.holds.conftest import MAX_LATENESS_MS, TOPOLOGY, Driver, Seen, from_row
from tests.unit.holds.test_contract_rules import *  # noqa: F403 - the suite itself
from tests.unit.holds.test_rules import *  # noqa: F403

from delayline.contract import ConsumedRecord
from delayline.contract import events as r
from delayline.contract import headers as h
from delayline.contract.arrow import with_contracts
from delayline.contract.codec import decode_headers, encode_headers
from delayline.contract.columns import parsed
from delayline.holds.jvm import holds_class


class JvmDriver:
    def __init__(self, spark: Any, lead_ms: int = 0) -> None:
        self.spark = spark
        holds_class(spark)  # a clear error when the jar is missing
        tester = spark.sparkContext._jvm.dev.delayline.hold.HoldTester
        self.tester = tester(MAX_LATENESS_MS, lead_ms)

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
