"""Hold pending schedules in Spark state: ``transformWithState`` with processing-time timers.

One grouping key per schedule: ``(source topic, schedule id)``. The state is the
latest version of the schedule; one timer at its due time. The processor's
rules (the guarantees the rest of the pipeline relies on):

* A newer version (higher offset) of an id replaces the held one and moves its
  timer; an older or equal offset is ignored (replays are harmless).
* A tombstone cancels: state and timer removed. A tombstone delayline wrote after
  a delivery (``delayline-fired-offset``) cancels only the version that fired or
  older, never a newer one that arrived meanwhile; that newer one is then appended
  again (``rewrite``) so log compaction keeps it on the topic for a rebuild.
* All records of a key in one micro-batch are applied in offset order before
  anything fires, so only the last version counts.
* A schedule already due on arrival fires in the same micro-batch; one more than
  ``max_lateness_ms`` late goes to the dead-letter topic with reason ``expired``
  instead. The same rule applies to timers that fell due while the job was down.
* Output is a pure function of input rows, state and the batch timestamp, so a
  replayed micro-batch emits the same events (what makes the fire stage's
  exactly-once check sound).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from delayline.contract import parse_record
from delayline.core.model import Cancel, Invalid, Schedule
from delayline.pipeline import rows as r

EXPIRED = r.EXPIRED


class HoldProcessor(StatefulProcessor):
    """Keeps the latest version of each schedule and a timer at its due time.

    Args:
        max_lateness_ms: A schedule more than this late when it would fire is
            dead-lettered as ``expired``; ``None`` fires everything.
    """

    def __init__(self, max_lateness_ms: int | None = None) -> None:
        self.max_lateness_ms = max_lateness_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.held = handle.getValueState("schedule", r.STATE_SCHEMA)

    def handleInputRows(
        self, key: Any, rows: Iterator[Any], timerValues: TimerValues
    ) -> Iterator[Row]:
        now_ms = timerValues.getCurrentProcessingTimeInMs()
        topic = key[0]
        before = self._held(topic)
        held = before
        rewrite = False
        # Fold every record of this key in the batch first, then act on the result:
        # a schedule followed by its cancel in one batch (a rebuild reads both at
        # once) must not fire, even if it is long past due.
        for record in sorted((r.input_to_record(row) for row in rows), key=lambda x: x.offset):
            parsed = parse_record(record)
            if isinstance(parsed, Invalid):
                yield r.record_event(r.DEAD, record, now_ms, parsed.reason)
            elif isinstance(parsed, Cancel):
                kind, held = _apply_cancel(held, parsed)
                # Our tombstone of a fired version now follows the held, newer one.
                rewrite = kind == r.STALE
                yield r.count_event(kind, parsed.id, now_ms)
            else:
                if not _newer(parsed, held):
                    yield r.count_event(r.STALE, parsed.id, now_ms)
                    continue
                held = parsed
                rewrite = False
        if rewrite and held is not None and held.due_ms > now_ms:
            yield r.schedule_event(r.REWRITE, held, now_ms)
        if held is before:
            return
        if before is not None:
            # The held version's timer is always at its due time: delete it directly
            # (listing timers would cost one more round trip to the JVM per record).
            self.handle.deleteTimer(before.due_ms)
        if held is None:
            self.held.clear()
        elif held.due_ms <= now_ms:
            if before is not None:
                self.held.clear()
            yield r.count_event(r.MISSED, held.id, now_ms)
            yield self._due(held, now_ms)
        else:
            self.held.update(r.schedule_to_state(held))
            self.handle.registerTimer(held.due_ms)
            kind = r.PLANNED if before is None else r.UPDATED
            yield r.count_event(kind, held.id, now_ms, held.due_ms)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        now_ms = timerValues.getCurrentProcessingTimeInMs()
        held = self._held(key[0])
        if held is None or held.due_ms > now_ms:
            return  # a stale timer: the schedule was replaced or cancelled
        self.held.clear()
        yield self._due(held, now_ms)

    def close(self) -> None:
        pass

    def _due(self, schedule: Schedule, now_ms: int) -> Row:
        if self.max_lateness_ms is not None and now_ms - schedule.due_ms > self.max_lateness_ms:
            return r.schedule_event(r.DEAD, schedule, now_ms, EXPIRED)
        return r.schedule_event(r.FIRE, schedule, now_ms)

    def _held(self, topic: str) -> Schedule | None:
        # ``get`` answers None for an empty state: asking ``exists`` first would cost
        # a second round trip to the JVM, and those round trips bound the throughput.
        state = self.held.get()
        return None if state is None else r.state_to_schedule(topic, state)


def _apply_cancel(held: Schedule | None, cancel: Cancel) -> tuple[str, Schedule | None]:
    """Apply a tombstone to the held version: (event kind, what is held after)."""
    if held is None:
        return (r.UNKNOWN_CANCEL if cancel.fired_offset is None else r.OWN_TOMBSTONE), None
    assert held.source is not None
    if cancel.fired_offset is not None and held.source.offset > cancel.fired_offset:
        # delayline's own tombstone for an older, fired version: keep the newer one.
        return r.STALE, held
    return r.CANCELLED, None


def _newer(candidate: Schedule, held: Schedule | None) -> bool:
    """Whether ``candidate`` replaces ``held``: the higher offset wins (replays are no-ops)."""
    if held is None or held.source is None or candidate.source is None:
        return True
    return candidate.source.offset > held.source.offset
