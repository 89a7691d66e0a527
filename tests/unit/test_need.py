"""A micro-batch only when the work needs one: the waker's rules and the watch's count
(pure logic and a manual clock; no Kafka, no Spark)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, Message, TopicPartition

from delayline.committer.arrivals import STALE_MS, Arrivals, Arrived
from delayline.committer.watch import InputWatch
from delayline.contract import headers as h
from delayline.contract.contracts import InputParser
from delayline.contract.kinds import INVALID, Kind
from delayline.contract.topology import Topology
from delayline.core.clock import ManualClock
from delayline.core.model import Schedule
from delayline.fire.report import HANDED, BatchReport
from delayline.kafka.reader import to_consumed_record
from delayline.pipeline import wake
from delayline.pipeline.need import (
    BURST_TIMERS,
    DEFAULT_RAISE_US,
    DEFAULT_READ_US,
    MARGIN_DECAY,
    MARGIN_PAD_MS,
    MARGIN_SPARE,
    MIN_MARGIN_MS,
    READ_RECORDS,
    Margin,
    Need,
    arrivals_wake_ms,
    timer_wake_ms,
    timers_wake_ms,
)
from delayline.pipeline.wake import Waker, WakerStats

LEAD = 5_000
HEARTBEAT = 30_000
TRIGGER = 1_000
NEED = Need(LEAD, wait_ms=10_000, records=100)
T0 = 1_000_000


def test_the_margin_has_a_floor_follows_slow_batches_and_forgets_them() -> None:
    margin = Margin()
    assert margin.ms() == MIN_MARGIN_MS
    margin.observe(4_000)  # a cold first batch
    assert margin.ms() == int(4_000 * MARGIN_SPARE) + MARGIN_PAD_MS
    slow = margin.ms()
    for _ in range(3):
        margin.observe(500)
    assert MIN_MARGIN_MS < margin.ms() < slow, "shrinks batch by batch"
    for _ in range(20):
        margin.observe(500)
    assert margin.ms() == MIN_MARGIN_MS
    margin.observe(3_000)
    assert margin.ms() == int(3_000 * MARGIN_SPARE) + MARGIN_PAD_MS, "a slow batch counts at once"


def test_a_timer_is_woken_a_margin_before_its_due_time_never_before_its_raise() -> None:
    raise_at = T0
    assert timer_wake_ms(raise_at, LEAD, 1_500) == raise_at + LEAD - 1_500
    assert timer_wake_ms(raise_at, LEAD, 9_000) == raise_at, "a margin past the lead"
    assert timer_wake_ms(raise_at, 0, 1_500) == raise_at, "no lead: at the due time"


def test_a_few_timers_are_woken_a_margin_before_the_first_due_time() -> None:
    slots = [(T0, 3), (T0 + 700, 2)]
    assert timers_wake_ms(slots, LEAD, 1_500, 100) == T0 + LEAD - 1_500
    # fewer than a burst, whatever a raise was last seen to cost
    slots = [(T0, BURST_TIMERS - 1)]
    assert timers_wake_ms(slots, LEAD, 1_500, 5_000) == T0 + LEAD - 1_500
    assert timers_wake_ms([], LEAD, 1_500, 100) is None


def test_a_burst_is_woken_early_enough_for_its_batch_to_end_a_margin_before_due() -> None:
    # 50,000 raised over a second (ten slots of 5,000), 60 us each to raise: the batch
    # that raises them all takes 3 s, so it must start 4.5 s before the first due time.
    burst = [(T0 + 100 * i, 5_000) for i in range(10)]
    wake = timers_wake_ms(burst, LEAD, 1_500, 60)
    assert wake is not None
    raised = sum(n for slot, n in burst if slot <= wake)
    assert wake + raised * 60 // 1000 <= T0 + LEAD - 1_500, "ends a margin before due"
    assert wake >= T0, "never before the first raise time"
    assert wake < T0 + LEAD - 1_500 - 2_500
    # Where even the first slot alone is too much for the lead: at its raise time.
    assert timers_wake_ms([(T0, 200_000)], LEAD, 1_500, 60) == T0


def test_a_burst_behind_a_few_timers_moves_their_wake_too() -> None:
    # One timer, then a burst raised 2 s later: waking for the one at its usual time
    # would raise the burst in the same batch, and that batch would end late.
    slots = [(T0, 1), (T0 + 2_000, 40_000)]
    wake = timers_wake_ms(slots, LEAD, 1_500, 60)
    assert wake is not None
    assert wake < T0 + 2_000, "woken before the burst rides along"
    assert wake == T0 + 2_000 - 100  # the latest such time: a slot before the burst's


def test_what_a_raise_costs_is_learnt_from_batches_that_raised_many() -> None:
    margin = Margin()
    assert margin.raise_us() == DEFAULT_RAISE_US
    margin.observe(400, raised=BURST_TIMERS - 1)  # the batch's fixed cost dominates
    assert margin.raise_us() == DEFAULT_RAISE_US
    margin.observe(3_000, raised=50_000)
    assert margin.raise_us() == 60 * MARGIN_SPARE
    margin.observe(1_000, raised=50_000)  # faster now: forgotten batch by batch
    assert 20 * MARGIN_SPARE < margin.raise_us() < 60 * MARGIN_SPARE


def first_wake_after(
    waker: Waker, clock: ManualClock, arrivals: Arrivals, written: list[int]
) -> int:
    """Move time on in 100 ms steps, the watch reporting as it does, until a wake."""
    before = len(written)
    while len(written) == before:
        clock.advance(100)
        arrivals.add(0, None, clock.now_ms())
        waker.tick()
    return written[-1]


def test_the_waker_wakes_early_for_a_burst_and_as_before_for_a_few() -> None:
    for burst in (False, True):
        clock, arrivals, gate = ManualClock(T0), Arrivals(), Gate()
        written: list[int] = []
        waker = gated_waker(clock, arrivals, gate, written)
        waker.add([], complete=True)
        arrivals.add(0, None, T0)
        waker.tick()
        waker.batch_done(T0 + 500)
        margin = waker.margin_ms()
        raise_at = T0 + 10_000
        waker.add({raise_at: 1})
        if burst:
            waker.add({raise_at + 100 * i: 2_000 for i in range(10)})
        wake = first_wake_after(waker, clock, arrivals, written)
        usual = raise_at + LEAD - margin
        if burst:
            assert raise_at <= wake <= usual - 20_000 * DEFAULT_RAISE_US // 1000
        else:
            assert wake == usual


def test_what_a_read_costs_is_learnt_from_batches_that_read_many() -> None:
    margin = Margin()
    assert margin.read_us() == DEFAULT_READ_US
    margin.observe(600, read=READ_RECORDS - 1)  # the batch's fixed cost dominates
    assert margin.read_us() == DEFAULT_READ_US
    margin.observe(2_000, read=4_000)
    assert margin.read_us() == 500 * MARGIN_SPARE
    assert margin.raise_us() == DEFAULT_RAISE_US, "a read is no raise"
    margin.observe(1_000, read=4_000)  # faster now: forgotten batch by batch
    assert 250 * MARGIN_SPARE < margin.read_us() < 500 * MARGIN_SPARE
    learnt = margin.read_us()
    margin.observe(600, read=100)  # small batches forget it too
    assert margin.read_us() == learnt * MARGIN_DECAY
    margin.observe(30_000, raised=BURST_TIMERS, read=READ_RECORDS)  # a burst's time
    assert margin.read_us() == learnt * MARGIN_DECAY, "is its raises'"


def test_arrivals_due_soon_are_woken_for_earlier_by_what_reading_them_costs() -> None:
    """1,000 records due 10 s on, 1 ms each to read: woken 1 s before the margin would."""
    need = Need(LEAD, wait_ms=60_000, records=5_000)
    arrived = Arrived(1_000, T0, T0 + 10_000)
    assert arrivals_wake_ms(arrived, need, 1_500, read_us=0) == T0 + 8_500
    assert arrivals_wake_ms(arrived, need, 1_500, read_us=1_000) == T0 + 7_500
    far = Arrived(1_000, T0, T0 + 3_600_000)
    assert arrivals_wake_ms(far, need, 1_500, read_us=1_000) == T0 + 60_000, "due later"


def test_arrivals_are_woken_for_by_due_time_wait_or_count() -> None:
    far = Arrived(3, T0, T0 + 3_600_000)
    assert arrivals_wake_ms(far, NEED, 1_500, read_us=0) == T0 + NEED.wait_ms, (
        "a schedule due later"
    )
    soon = Arrived(3, T0, T0 + 4_000)
    assert arrivals_wake_ms(soon, NEED, 1_500, read_us=0) == T0 + 2_500, (
        "a margin before its due time"
    )
    cancels = Arrived(3, T0, None)
    assert arrivals_wake_ms(cancels, NEED, 1_500, read_us=0) == T0 + NEED.wait_ms
    many = Arrived(NEED.records, T0, T0 + 3_600_000)
    assert arrivals_wake_ms(many, NEED, 1_500, read_us=0) == T0, "enough records: at once"


def test_arrivals_add_up_until_taken_and_say_when_the_feed_is_down() -> None:
    arrivals = Arrivals()
    changes: list[int] = []
    arrivals.listen(lambda: changes.append(1))
    assert not arrivals.live(T0), "nothing reported yet"
    arrivals.add(0, None, T0)
    assert arrivals.live(T0 + STALE_MS)
    assert not arrivals.live(T0 + STALE_MS + 1)
    assert arrivals.peek() is None, "a poll with nothing new"
    assert changes == []
    arrivals.add(2, T0 + 9_000, T0 + 10)
    arrivals.add(1, T0 + 5_000, T0 + 20)
    arrivals.add(4, None, T0 + 30)
    assert arrivals.peek() == Arrived(7, T0 + 10, T0 + 5_000)
    assert len(changes) == 3
    assert arrivals.take() == Arrived(7, T0 + 10, T0 + 5_000)
    assert arrivals.take() is None
    arrivals.stop()
    assert not arrivals.live(T0 + 30)


class Gate:
    def __init__(self) -> None:
        self.opened = 0

    def open(self) -> None:
        self.opened += 1


def gated_waker(clock: ManualClock, arrivals: Arrivals, gate: Gate, written: list[int]) -> Waker:
    def write(now_ms: int) -> bool:
        written.append(now_ms)
        return True

    return Waker(
        "unused:9092", "wake", HEARTBEAT, poll_ms=TRIGGER, clock=clock, write=write,
        need=NEED, arrivals=arrivals, open_gate=gate.open,
    )  # fmt: skip


def test_the_waker_batches_timers_a_margin_before_due_and_arrivals_as_needed() -> None:
    clock, arrivals, gate = ManualClock(T0), Arrivals(), Gate()
    written: list[int] = []
    waker = gated_waker(clock, arrivals, gate, written)

    def step(to_ms: int) -> int:
        """Move to ``to_ms`` with the watch reporting as it does (every poll)."""
        clock.advance(to_ms - clock.now_ms())
        arrivals.add(0, None, to_ms)
        return min(waker.tick(), to_ms + STALE_MS + 1)

    waker.add([], complete=True)
    assert step(T0) == T0 + STALE_MS + 1
    assert written == [T0]
    assert gate.opened == 1
    waker.batch_done(T0 + 500)
    # Timers raised at T0+10 s and T0+10.5 s: one wake, a margin before the first due time.
    waker.add([T0 + 10_000, T0 + 10_500])
    margin = waker.margin_ms()
    assert margin == MIN_MARGIN_MS
    first_wake = T0 + 10_000 + LEAD - margin
    assert step(first_wake - 1) == first_wake
    assert step(first_wake) == first_wake + STALE_MS + 1, "the second was raised by then"
    assert written == [T0, first_wake]
    assert gate.opened == 2
    # A schedule due in 3 s arrives: read a margin before its due time.
    now = first_wake + 100
    step(now)
    arrivals.add(1, now + 3_000, now)
    reading = DEFAULT_READ_US // 1000  # one record to read
    assert waker.tick() == now + 3_000 - margin - reading
    # The batch woken at first_wake ends 1.5 s after: the margin widens, the same
    # arrival is woken for sooner.
    waker.batch_done(first_wake + 1_500)
    assert waker.margin_ms() == int(1_500 * MARGIN_SPARE) + MARGIN_PAD_MS
    assert waker.tick() == now + 3_000 - waker.margin_ms() - reading
    assert written == [T0, first_wake]


def test_without_the_watch_the_waker_wakes_every_trigger_interval() -> None:
    clock, arrivals, gate = ManualClock(T0), Arrivals(), Gate()
    written: list[int] = []
    waker = gated_waker(clock, arrivals, gate, written)
    waker.add([], complete=True)
    assert waker.tick() == T0 + TRIGGER, "no report yet: every trigger interval"
    clock.advance(TRIGGER)
    arrivals.add(0, None, T0 + TRIGGER)
    assert waker.tick() == T0 + TRIGGER + STALE_MS + 1, "live: until it goes quiet"
    clock.advance(STALE_MS + 1)
    assert waker.tick() == T0 + 2 * TRIGGER + STALE_MS + 1
    assert written == [T0, T0 + TRIGGER + STALE_MS + 1], "not while it was live"


def test_a_failed_wake_neither_opens_the_gate_nor_forgets_the_arrivals() -> None:
    clock, arrivals, gate = ManualClock(T0), Arrivals(), Gate()
    results = iter([False, True])
    waker = Waker(
        "unused:9092", "wake", HEARTBEAT, poll_ms=TRIGGER, clock=clock,
        write=lambda _now: next(results), need=NEED, arrivals=arrivals, open_gate=gate.open,
    )  # fmt: skip
    arrivals.add(NEED.records, None, T0)
    waker.add([], complete=True)
    waker.tick()
    assert gate.opened == 0
    assert arrivals.peek() is not None
    assert waker.stats() == WakerStats(
        wakes=0,
        margin_ms=MIN_MARGIN_MS,
        unread=NEED.records,
        waiting_since_ms=T0,  # owed from the failed write on
        heartbeat_ms=HEARTBEAT,
    )
    clock.advance(1_000)
    waker.tick()
    assert gate.opened == 1
    assert arrivals.peek() is None


TOPIC = "schedules"
PARSE = InputParser(Topology(schedules_topics=(TOPIC,)))


def record(offset: int, value: bytes | None, headers: tuple[tuple[str, bytes | None], ...]) -> Message:  # fmt: skip
    """A record as the watch's consumer returns it."""
    return Message(
        topic=TOPIC, partition=0, offset=offset, key=b"a", value=value,
        headers=list(headers), timestamp=(1, T0),
    )  # fmt: skip


def test_the_watch_counts_what_the_pipeline_must_read_not_its_own_tombstones() -> None:
    arrivals = Arrivals()
    watch = InputWatch("unused:9092", PARSE, lambda: T0, arrivals=arrivals)
    try:
        soon = record(1, b"v", ((h.EPOCH, b"20"), (h.TARGET_TOPIC, b"t")))
        later = record(2, b"v", ((h.EPOCH, b"90"), (h.TARGET_TOPIC, b"t")))
        parsed = PARSE(to_consumed_record(soon))
        assert isinstance(parsed, Schedule)
        watch.take_batch(
            [
                soon,
                later,
                record(3, None, ()),  # a cancel
                record(4, b"bad", ()),  # invalid: the hold dead-letters it
                record(5, None, ((h.FIRED_OFFSET, b"1"),)),  # delayline's own
            ],
            T0,
        )
        watch._later_of(later, T0, arrived=False)  # read again after a take-over
        watch._report_arrived(T0 + 5)
        assert arrivals.take() == Arrived(4, T0 + 5, parsed.due_ms)
        watch._report_arrived(T0 + 6)
        assert arrivals.peek() is None
        assert arrivals.live(T0 + 6)
    finally:
        watch.close()
    assert not arrivals.live(T0 + 6), "a closed watch tells nothing"


def test_the_holds_own_wake_times_are_kept_exactly() -> None:
    """A lease's end (the Redis hold's take-over) is not a raise time: no margin."""
    clock, arrivals, gate = ManualClock(T0), Arrivals(), Gate()
    written: list[int] = []
    waker = gated_waker(clock, arrivals, gate, written)
    arrivals.add(0, None, T0)
    waker.add([], complete=True)
    waker.tick()
    waker.wake_at([T0 + 1_000])
    waker.add([T0 + 1_000])
    assert waker.tick() == T0 + 1_000, "the exact time, before the timer's"
    clock.advance(1_000)
    arrivals.add(0, None, T0 + 1_000)
    waker.tick()
    assert written == [T0, T0 + 1_000]
    assert waker.tick() == T0 + 1_000 + STALE_MS + 1, "the timer was raised by that wake"


@dataclass
class _At:
    """What ``Consumer.position`` answers for a partition."""

    topic: str
    partition: int
    offset: int
    error: KafkaError | None = None


class _Positions:
    """A consumer whose ``position`` answers are set by the test."""

    def __init__(self, answers: list[_At]) -> None:
        self.answers = answers

    def position(self, _partitions: list[TopicPartition]) -> list[_At]:
        return self.answers

    def close(self) -> None:
        pass


def test_the_watch_takes_the_consumers_position_only_forward() -> None:
    """Past a transaction's marker by the consumer's position, never back, never an
    invalid one (-1001 before anything was taken) or one with an error."""
    watch = InputWatch("unused:9092", PARSE, lambda: T0)
    real = watch._consumer
    try:
        watch.positions = {(TOPIC, 0): 5, (TOPIC, 1): 9, (TOPIC, 2): 3}
        invalid = _At(TOPIC, 1, OFFSET_INVALID)
        failed = _At(TOPIC, 2, 8, KafkaError(KafkaError._STATE))
        fake = _Positions([_At(TOPIC, 0, 7), invalid, failed])
        watch._consumer = fake  # type: ignore[assignment]
        watch._take_positions()
        assert watch.positions == {(TOPIC, 0): 7, (TOPIC, 1): 9, (TOPIC, 2): 3}
        fake.answers = [_At(TOPIC, 0, 6)]
        watch._take_positions()
        assert watch.positions[(TOPIC, 0)] == 7
    finally:
        watch._consumer = real
        watch.close()


def test_a_batch_reads_as_many_records_as_its_input_events() -> None:
    """Planned, updated, cancelled, short, invalid... one each; a raise, a hand-over or
    an early timer follows a record read before, and is not one more."""
    counts = Counter(
        {Kind.PLANNED: 5, Kind.UPDATED: 2, Kind.CANCELLED: 1, Kind.UNKNOWN_CANCEL: 1,
         Kind.STALE: 1, Kind.MISSED: 1, Kind.SHORT: 2, INVALID: 1, Kind.EARLY: 4,
         Kind.RAISE: 3, HANDED: 7, Kind.OWN_TOMBSTONE: 9}
    )  # fmt: skip
    report = BatchReport(1, counts)
    assert (report.read, report.raised) == (14, 10)


def test_the_waker_walks_its_timers_again_only_once_they_or_its_margin_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walks: list[int | None] = []  # what each walk of the plan's window gave

    def counted(*args: Any) -> int | None:
        walks.append(timers_wake_ms(*args))
        return walks[-1]

    monkeypatch.setattr(wake, "timers_wake_ms", counted)
    clock, arrivals, gate = ManualClock(T0), Arrivals(), Gate()
    waker = gated_waker(clock, arrivals, gate, [])
    waker.add([], complete=True)
    arrivals.add(0, None, T0)
    waker.tick()
    waker.add({T0 + 10_000 + 100 * i: 2_000 for i in range(10)})  # a burst
    waker.tick()
    walked, burst = len(walks), walks[-1]
    assert burst is not None
    for _ in range(5):  # arrivals each plan the next wake again; the timers are the same
        clock.advance(10)
        arrivals.add(1, T0 + 60_000, clock.now_ms())
        waker.tick()
    assert len(walks) == walked
    waker.add({T0 + 9_000: 3_000})  # an earlier timer: walked again, woken earlier
    waker.tick()
    assert len(walks) == walked + 1
    assert (walks[-1] or burst) < burst
    waker.batch_done(T0 + 2_000)  # the margin widens: walked again
    waker.tick()
    assert len(walks) == walked + 2
