"""The default hold: pending schedules in Spark state, through ``transformWithState``.

One grouping key per schedule: ``(source topic, record key)``. The state is the held
version; one processing-time timer at its due time; RocksDB keeps both in the
checkpoint, so the hold is durable. The rules are :func:`delayline.holds.fold.fold`
and :func:`delayline.holds.fold.timer_event`, unchanged; this module only moves state and
timers in and out of Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from delayline.contract import ConsumedRecord, parse_record
from delayline.contract import events as r
from delayline.contract.contracts import InputParser
from delayline.core.clock import GRANULARITY_MS
from delayline.core.model import Parsed, Schedule
from delayline.holds.fold import fold, raise_ms, timer_event
from delayline.holds.hold import Hold

__all__ = ["HoldProcessor", "SparkStateHold", "checkpoint_timers"]


class HoldProcessor(StatefulProcessor):
    """Keeps the held version of each schedule and a timer at its due time.

    Args:
        max_lateness_ms: A schedule more than this late when it would fire is
            dead-lettered as ``expired``; ``None`` fires everything.
        lead_ms: How long before its due time a schedule is handed over.
    """

    def __init__(
        self,
        max_lateness_ms: int | None = None,
        lead_ms: int = 0,
        parse: Callable[[ConsumedRecord], Parsed] = parse_record,
    ) -> None:
        self.max_lateness_ms = max_lateness_ms
        self.lead_ms = lead_ms
        self.parse = parse

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.held = handle.getValueState("schedule", r.STATE_SCHEMA)

    def handleInputRows(
        self, key: Any, rows: Iterator[Any], timerValues: TimerValues
    ) -> Iterator[Row]:
        now_ms = timerValues.getCurrentProcessingTimeInMs()
        before = self._held(key[0])
        records = [r.input_to_record(row) for row in rows]
        folded = fold(before, records, now_ms, self.max_lateness_ms, self.lead_ms, self.parse)
        if folded.timer_from is not None:
            # The held version's timer is always at its raise time: delete it directly
            # (listing timers would cost one more round trip to the JVM per record).
            self.handle.deleteTimer(folded.timer_from)
        if folded.held is not before:
            if folded.held is None:
                if before is not None:
                    self.held.clear()
            else:
                self.held.update(r.schedule_to_state(folded.held))
        if folded.timer_to is not None:
            self.handle.registerTimer(folded.timer_to)
        for event in folded.events:
            yield r.event_row(event)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        now_ms = timerValues.getCurrentProcessingTimeInMs()
        held = self._held(key[0])
        if held is None:
            return  # a stale timer: the schedule was cancelled
        if raise_ms(held.due_ms, self.lead_ms) > now_ms:
            # A timer of a replaced version, or one set under a longer lead than now: the
            # held version's own timer must exist (registering it again changes nothing).
            self.handle.registerTimer(raise_ms(held.due_ms, self.lead_ms))
            return
        self.held.clear()
        yield r.event_row(timer_event(held, now_ms, self.max_lateness_ms))

    def close(self) -> None:
        pass

    def _held(self, topic: str) -> Schedule | None:
        # ``get`` answers None for an empty state: asking ``exists`` first would cost
        # a second round trip to the JVM, and those round trips bound the throughput.
        state = self.held.get()
        return None if state is None else r.state_to_schedule(topic, state)


class SparkStateHold(Hold):
    """Pending schedules in Spark state (RocksDB in the checkpoint): durable."""

    name: ClassVar[str] = "spark"
    durable: ClassVar[bool] = True

    def stage(self, records: DataFrame) -> DataFrame:
        return records.groupBy("topic", "gkey").transformWithState(
            HoldProcessor(
                self.config.max_lateness_ms,
                self.config.lead_ms,
                InputParser(self.config.topology),
            ),
            r.EVENT_SCHEMA,
            "Append",
            "ProcessingTime",
        )

    def batch_events(self, frame: DataFrame, batch_id: int) -> DataFrame:
        return frame

    def pending_due_times(self, spark: SparkSession) -> list[int]:
        return checkpoint_timers(spark, self.config.checkpoint_dir)


def checkpoint_timers(spark: SparkSession, checkpoint_dir: Path) -> list[int]:
    """The distinct wake slots of the timers stored in the checkpoint (none before
    the first committed batch).

    Spark rounds and aggregates them (as :func:`wake_slot` does), so only distinct
    slots reach the driver.

    Raises:
        Exception: whatever Spark's state reader raises.
    """
    commits = checkpoint_dir / "commits"
    if not commits.is_dir() or not any(p.name.isdigit() for p in commits.iterdir()):
        return []
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark's own convention

    # The state reader needs the session's state store coordinator, which Spark
    # registers with the streaming query manager.
    _ = spark.streams
    timers = (
        spark.read.format("statestore")
        .option("path", str(checkpoint_dir))
        .option("readRegisteredTimers", "true")
        .load()
    )
    step = GRANULARITY_MS
    slot = (F.ceil(F.col("expiration_timestamp_ms") / step) * step).cast("long")
    return [int(row["slot"]) for row in timers.select(slot.alias("slot")).distinct().collect()]
