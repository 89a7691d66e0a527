"""Every hold runs the same suite: add a driver here for a new hold.

A driver feeds one micro-batch of records at a batch time and reports the events in
one shape, whatever the hold emits (``HoldEvent`` objects or Spark event rows).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import pytest
from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from delayline.contract import ConsumedRecord
from delayline.contract import events as r
from delayline.contract.contracts import InputParser
from delayline.contract.kinds import HoldEvent
from delayline.contract.notice import NoticeRules
from delayline.contract.topology import Topology
from delayline.holds.memory import MemoryHold
from delayline.holds.spark_state import HoldProcessor
from delayline.pipeline.config import PipelineConfig

MAX_LATENESS_MS = 60_000
TOPOLOGY = Topology(envelope_topics=("envelopes",), timer_request_topics=("timers",))
"""The suite's topics: ``schedules`` (the default contract), ``envelopes``, ``timers``."""
PARSE = InputParser(TOPOLOGY)


class Seen(NamedTuple):
    """One event as the suite compares it."""

    kind: str
    id: str | None
    partition: int | None
    offset: int | None
    value: bytes | None
    due_ms: int | None
    reason: str | None


class Driver(Protocol):
    def batch(self, records: list[ConsumedRecord], now_ms: int) -> list[Seen]:
        """One micro-batch at ``now_ms``: the records (possibly none), then due timers."""

    def held_offset(self, topic: str, schedule_id: str) -> int | None:
        """Offset of the version held for ``schedule_id``, if any."""


class MemoryDriver:
    def __init__(self, lead_ms: int = 0, notice: NoticeRules | None = None) -> None:
        config = PipelineConfig(TOPOLOGY, max_lateness_ms=MAX_LATENESS_MS, lead_ms=lead_ms)
        self.hold = MemoryHold(config)
        self.hold.notice = notice

    def batch(self, records: list[ConsumedRecord], now_ms: int) -> list[Seen]:
        return [_from_event(e) for e in self.hold.offer(records, now_ms)]

    def held_offset(self, topic: str, schedule_id: str) -> int | None:
        held = self.hold.held(topic, schedule_id)
        return None if held is None or held.source is None else held.source.offset


class _BatchTester(TwsTester):
    """Spark runs a batch's input rows first, then the timers due at the same batch
    time; TwsTester's public calls only fire timers when time moves forward, so this
    sets the time and runs the two steps itself."""

    def batch(self, key: Any, rows: list[Row] | None, now_ms: int) -> list[Row]:
        self._currentProcessingTimeMs = now_ms
        out = [] if rows is None else self.test(key, rows)
        return out + list(self._handleExpiredTimers())


class SparkDriver:
    """The Spark-state hold's own processor, through Spark's TwsTester (no JVM)."""

    def __init__(self, lead_ms: int = 0) -> None:
        processor = HoldProcessor(MAX_LATENESS_MS, lead_ms, PARSE)
        self.tester = _BatchTester(processor, timeMode="ProcessingTime")

    def batch(self, records: list[ConsumedRecord], now_ms: int) -> list[Seen]:
        groups: dict[tuple[str, bytes], list[Row]] = defaultdict(list)
        for record in records:
            groups[(record.topic, PARSE.group_key(record))].append(_input_row(record))
        out: list[Row] = []
        for key in sorted(groups):
            self.tester._currentProcessingTimeMs = now_ms
            out.extend(self.tester.test(key, groups[key]))
        out.extend(self.tester.batch(None, None, now_ms))
        return [from_row(row) for row in out]

    def held_offset(self, topic: str, schedule_id: str) -> int | None:
        state = self.tester.peekValueState("schedule", (topic, schedule_id.encode()))
        return None if state is None else int(state[2])


DRIVERS: dict[str, Callable[..., Driver]] = {"memory": MemoryDriver, "spark": SparkDriver}
"""Hold name to its driver; a driver takes ``lead_ms`` (0 unless given)."""


@pytest.fixture(params=sorted(DRIVERS))
def make_hold(request: pytest.FixtureRequest) -> Callable[..., Driver]:
    """Makes a fresh driver of one hold (the JVM hold's suite overrides this)."""
    return DRIVERS[request.param]


@pytest.fixture
def make_noticed() -> Callable[..., Driver]:
    """Makes a fresh driver of a hold that honours notice rules: it takes ``lead_ms`` and
    ``notice`` (the JVM hold's suite overrides this)."""
    return MemoryDriver


@pytest.fixture
def hold(make_hold: Callable[[], Driver]) -> Driver:
    return make_hold()


def _input_row(record: ConsumedRecord) -> Row:
    headers = [Row(key=name, value=value) for name, value in record.headers]
    return Row(topic=record.topic, gkey=PARSE.group_key(record), key=record.key, value=record.value,
               partition=record.partition, offset=record.offset,
               timestamp_ms=record.timestamp_ms, headers=headers)  # fmt: skip


def _from_event(e: HoldEvent) -> Seen:
    return (
        from_row(r.event_row(e))
        if e.schedule or e.record
        else Seen(e.kind, e.id, None, None, None, e.due_ms, e.reason)
    )


def from_row(row: Row) -> Seen:
    """An event row as the suite compares it (a dead letter with its reason)."""
    value = row["value"]
    reason = r.dead_reason(row, PARSE) if row["kind"] == r.Kind.DEAD else row["reason"]
    return Seen(row["kind"], row["id"], row["src_partition"], row["src_offset"],
                None if value is None else bytes(value), row["due_ms"], reason)  # fmt: skip
