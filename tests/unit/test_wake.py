"""When the waker wakes the pipeline: the plan of wake times (pure logic, no Kafka)."""

from __future__ import annotations

from delayline.core.clock import GRANULARITY_MS, ManualClock, wake_slot
from delayline.pipeline.wake import Waker
from delayline.pipeline.wake_plan import WakePlan, next_wake_ms

HEARTBEAT = 30_000


def test_a_wake_is_never_before_the_due_time_and_at_most_one_step_after() -> None:
    for due in (0, 1, 99, 100, 101, 1_795_000_000_123):
        assert due <= wake_slot(due) < due + GRANULARITY_MS


def test_plan_keeps_one_wake_per_step_in_time_order() -> None:
    plan = WakePlan()
    for due in (5_050, 1_001, 1_099, 3_000, 5_001):
        plan.add(due)
    assert len(plan) == 3  # 1_100, 3_000, 5_100
    assert plan.next_ms() == 1_100
    assert plan.take_due(1_099) == 0
    assert plan.take_due(3_000) == 2
    assert plan.next_ms() == 5_100
    plan.add(1_050)  # a wake time already past stays due
    assert plan.take_due(3_001) == 1
    assert plan.take_due(10_000) == 1
    assert plan.next_ms() is None


def test_a_wake_taken_can_be_planned_again() -> None:
    plan = WakePlan()
    plan.add(1_000)
    assert plan.take_due(1_000) == 1
    plan.add(1_000)
    assert plan.next_ms() == 1_000


def test_next_wake_follows_the_plan_within_the_heartbeat() -> None:
    plan = WakePlan()
    assert next_wake_ms(plan.next_ms(), 1_000, 0, HEARTBEAT, None) == HEARTBEAT
    plan.add(7_000)
    assert next_wake_ms(plan.next_ms(), 1_000, 0, HEARTBEAT, None) == 7_000
    plan.add(900)  # already due
    assert next_wake_ms(plan.next_ms(), 1_000, 0, HEARTBEAT, None) == 1_000


def test_until_the_plan_is_complete_it_wakes_every_interval() -> None:
    plan = WakePlan()
    plan.add(7_000)
    assert next_wake_ms(plan.next_ms(), 1_000, 800, HEARTBEAT, poll_ms=500) == 1_300
    assert next_wake_ms(plan.next_ms(), 1_000, 0, HEARTBEAT, poll_ms=500) == 1_000


def test_waker_writes_at_due_times_heartbeats_and_retries_without_sleeping() -> None:
    clock = ManualClock(1_000_000)
    written: list[int] = []
    results = iter([True, False, True])

    def write(now_ms: int) -> bool:
        ok = next(results)
        if ok:
            written.append(now_ms)
        return ok

    waker = Waker("unused:9092", "wake", HEARTBEAT, poll_ms=500, clock=clock, write=write)
    assert waker.tick() == 1_000_500  # a first wake at once, then every poll interval
    assert written == [1_000_000]
    waker.add([1_005_050], complete=True)  # the plan is complete: wake only when due
    clock.advance(500)
    assert waker.tick() == 1_005_100
    clock.advance(4_600)
    assert waker.tick() == 1_005_100 + 1_000  # the write failed: retried a second later
    assert written == [1_000_000]
    clock.advance(1_000)
    assert waker.tick() == 1_006_100 + HEARTBEAT  # nothing planned: the heartbeat
    assert written == [1_000_000, 1_006_100]
    assert waker.wakes_written == 2


def test_a_failed_write_while_polling_is_retried_after_a_second_not_at_once() -> None:
    clock = ManualClock(1_000_000)
    attempts: list[int] = []

    def write(now_ms: int) -> bool:
        attempts.append(now_ms)
        if len(attempts) == 2:
            raise RuntimeError("broker gone")  # a raising writer must not end the waker
        return len(attempts) > 3

    waker = Waker("unused:9092", "wake", HEARTBEAT, poll_ms=200, clock=clock, write=write)
    assert waker.tick() == 1_001_000  # failed: the next try in RETRY_MS, not the poll
    clock.advance(999)
    assert waker.tick() == 1_001_000
    clock.advance(1)
    assert waker.tick() == 1_002_000  # raised: treated as failed
    clock.advance(1_000)
    assert waker.tick() == 1_003_000
    clock.advance(1_000)
    assert waker.tick() == 1_003_200  # written: back to polling
    assert attempts == [1_000_000, 1_001_000, 1_002_000, 1_003_000]
    assert waker.wakes_written == 1


def test_plan_counts_the_timers_of_each_slot_and_shows_a_window_in_order() -> None:
    plan = WakePlan()
    plan.add_all({5_050: 2, 1_001: 1, 1_099: 4})
    plan.add(3_000, 7)
    plan.add(5_001)
    assert plan.window(3_000) == [(1_100, 5), (3_000, 7)]
    assert plan.window(10_000) == [(1_100, 5), (3_000, 7), (5_100, 3)]
    assert plan.take_due(3_000) == 2
    assert plan.window(10_000) == [(5_100, 3)]


def test_a_checkpoints_timers_are_planned_in_bulk_in_order() -> None:
    plan = WakePlan()
    plan.add(50)
    plan.add_all({due: 1 for due in range(100_000, 0, -100)})  # 1,000 slots, unordered
    assert len(plan) == 1_000
    assert plan.window(300) == [(100, 2), (200, 1), (300, 1)]
    assert plan.take_due(99_950) == 999
    assert plan.next_ms() == 100_000


def test_a_batch_is_owed_from_the_first_unread_wake_until_one_planned_after_it_ends() -> None:
    clock = ManualClock(1_000_000)
    waker = Waker("unused:9092", "wake", HEARTBEAT, poll_ms=500, clock=clock, write=lambda _: True)
    assert waker.stats().waiting_since_ms is None
    assert waker.stats().heartbeat_ms == HEARTBEAT
    waker.tick()  # a wake at 1_000_000
    assert waker.stats().waiting_since_ms == 1_000_000
    clock.advance(500)
    waker.tick()  # another: the first still decides since when
    assert waker.stats().waiting_since_ms == 1_000_000
    waker.batch_done(1_000_700, planned_ms=999_900)  # planned before the wake: not read
    assert waker.stats().waiting_since_ms == 1_000_000
    waker.batch_done(1_001_200, planned_ms=1_000_000)  # read the first, not the second
    assert waker.stats().waiting_since_ms == 1_000_500
    waker.batch_done(1_001_900, planned_ms=1_001_300)
    assert waker.stats().waiting_since_ms is None
    assert waker.margin_ms() >= 1_400  # from the first wake a batch read to its end


def test_failing_writes_owe_a_batch_from_the_first_failure() -> None:
    clock = ManualClock(1_000_000)
    results = iter([False, False, True])
    waker = Waker(
        "unused:9092", "wake", HEARTBEAT, poll_ms=500, clock=clock, write=lambda _: next(results)
    )
    waker.tick()
    clock.advance(1_000)
    waker.tick()
    assert waker.stats().waiting_since_ms == 1_000_000  # no wake written, still owed
    waker.batch_done(1_001_500, planned_ms=1_001_400)  # nothing was written: owes on
    assert waker.stats().waiting_since_ms == 1_000_000
    clock.advance(1_000)
    waker.tick()  # written at 1_002_000
    assert waker.stats().waiting_since_ms == 1_002_000
    waker.batch_done(1_002_600, planned_ms=1_002_100)
    assert waker.stats().waiting_since_ms is None
