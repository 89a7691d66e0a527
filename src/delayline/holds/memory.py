"""A hold in the driver's memory: the rules of :mod:`delayline.holds.fold` over a dict.

Not durable: a crash or restart forgets every pending schedule. It exists for fast
runs of the shared hold suite and for trying the pipeline without Spark state
(``delayline run --hold memory``). Micro-batches are processed on the driver.
"""

from __future__ import annotations

import heapq
import threading
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from delayline.contract import ConsumedRecord
from delayline.contract import events as r
from delayline.contract.contracts import InputParser
from delayline.contract.kinds import HoldEvent
from delayline.core.clock import Clock, SystemClock
from delayline.core.model import Schedule
from delayline.holds.fold import fold, raise_ms, timer_event
from delayline.holds.hold import Deliver, Hold, RunSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Key = tuple[str, bytes]
"""(source topic, record key): one pending version at most per key."""


class MemoryHold(Hold):
    """Pending schedules in a dict, timers in a heap.

    Args:
        config: The pipeline settings (``max_lateness_ms`` and ``lead_ms`` are used).
        deliver: Unused (see :class:`Hold`).
        clock: The batch time source for :meth:`batch_events`.
    """

    name: ClassVar[str] = "memory"
    durable: ClassVar[bool] = False

    def __init__(
        self, config: RunSettings, deliver: Deliver | None = None, clock: Clock | None = None
    ) -> None:
        super().__init__(config, deliver)
        self.clock = clock or SystemClock()
        self._parse = InputParser(config.topology)
        self._held: dict[Key, Schedule] = {}
        self._timers: list[tuple[int, Key]] = []
        # Batches run on the query's thread, due_times() on the pipeline's timers thread.
        self._lock = threading.Lock()

    def offer(self, records: Iterable[ConsumedRecord], now_ms: int) -> list[HoldEvent]:
        """Apply one micro-batch's records at batch time ``now_ms``, then fire what is
        due, in that order (as Spark runs input before timers)."""
        by_key: dict[Key, list[ConsumedRecord]] = defaultdict(list)
        for record in records:
            by_key[(record.topic, self._parse.group_key(record))].append(record)
        with self._lock:
            return self._offer(by_key, now_ms)

    def _offer(self, by_key: dict[Key, list[ConsumedRecord]], now_ms: int) -> list[HoldEvent]:
        events: list[HoldEvent] = []
        for key in sorted(by_key):
            folded = fold(
                self._held.get(key),
                by_key[key],
                now_ms,
                self.config.max_lateness_ms,
                self.config.lead_ms,
                self._parse,
                self.notice,
            )
            events.extend(folded.events)
            if folded.held is None:
                self._held.pop(key, None)
            else:
                self._held[key] = folded.held
            if folded.timer_to is not None:
                heapq.heappush(self._timers, (folded.timer_to, key))
        return events + self._advance(now_ms)

    def advance(self, now_ms: int) -> list[HoldEvent]:
        """Fire every held version due by ``now_ms`` (a micro-batch without records)."""
        with self._lock:
            return self._advance(now_ms)

    def _advance(self, now_ms: int) -> list[HoldEvent]:
        events: list[HoldEvent] = []
        while self._timers and self._timers[0][0] <= now_ms:
            timer_ms, key = heapq.heappop(self._timers)
            held = self._held.get(key)
            if held is None or raise_ms(held.due_ms, self.config.lead_ms) != timer_ms:
                continue  # the timer of a replaced or cancelled version
            del self._held[key]
            events.append(timer_event(held, now_ms, self.config.max_lateness_ms))
        return events

    def held(self, topic: str, schedule_id: str) -> Schedule | None:
        """The version pending for ``schedule_id`` on ``topic``."""
        return self._held.get((topic, schedule_id.encode()))

    def due_times(self) -> list[int]:
        """When each pending version is handed over (its timer), earliest first."""
        with self._lock:
            return sorted(raise_ms(s.due_ms, self.config.lead_ms) for s in self._held.values())

    def stage(self, records: DataFrame) -> DataFrame:
        return records

    def batch_events(self, frame: DataFrame, batch_id: int) -> DataFrame:
        records = [r.input_to_record(row) for row in frame.collect()]
        events = [r.event_row(e) for e in self.offer(records, self.clock.now_ms())]
        # One partition: the memory hold is not durable, a replay has nothing to match.
        return frame.sparkSession.createDataFrame(events, r.EVENT_SCHEMA).coalesce(1)

    def pending_due_times(self, spark: SparkSession) -> list[int]:
        del spark
        return self.due_times()
