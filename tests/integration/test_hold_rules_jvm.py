"""The shared hold suite (tests/unit/holds) against the JVM hold, through Spark.

Records go through the pipeline's own Spark SQL validation (contract.columns) and then
the Java processor, run by Spark's TwsTester in the session's JVM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.unit.holds.conftest import MAX_LATENESS_MS, Driver, Seen, from_row
from tests.unit.holds.test_rules import *  # noqa: F403 - the suite itself

from delayline.contract import ConsumedRecord
from delayline.contract.columns import parsed
from delayline.pipeline import rows as r
from delayline.stores.jvm import holds_class


class JvmDriver:
    def __init__(self, spark: Any) -> None:
        self.spark = spark
        holds_class(spark)  # a clear error when the jar is missing
        self.tester = spark.sparkContext._jvm.dev.delayline.hold.HoldTester(MAX_LATENESS_MS)

    def batch(self, records: list[ConsumedRecord], now_ms: int) -> list[Seen]:
        frame = parsed(
            self.spark.createDataFrame([r.source_row(x) for x in records], r.SOURCE_SCHEMA)
        )
        events = self.tester.batch(frame._jdf, now_ms)
        from pyspark.sql import DataFrame  # noqa: PLC0415

        return [from_row(row) for row in DataFrame(events, self.spark).collect()]

    def held_offset(self, topic: str, schedule_id: str) -> int | None:
        offset = self.tester.heldOffset(topic, bytearray(schedule_id.encode()))
        return None if offset < 0 else int(offset)


@pytest.fixture
def make_hold(spark: Any) -> Callable[[], Driver]:
    return lambda: JvmDriver(spark)


@pytest.fixture
def hold(make_hold: Callable[[], Driver]) -> Driver:
    return make_hold()
