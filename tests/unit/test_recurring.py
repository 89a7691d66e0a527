"""Recurring schedules in the header contract, and the committer's turn of one: pure."""

from __future__ import annotations

import pytest

from delayline.committer.recurring import Turn, take_turn
from delayline.contract import headers as h
from delayline.contract.records import build_schedule, parse_record
from delayline.contract.recurring import (
    at_occurrence,
    describe_recurrence,
    group_of,
    occurrence_number,
    one_off_catch_up,
    own_headers,
    paused_due_ms,
    paused_headers,
    recurrence_of,
    render_rearm,
    resumed_headers,
)
from delayline.contract.topology import Topology
from delayline.core.model import MAX_EPOCH_MS, Schedule, SourceRef
from delayline.core.recurrence import CatchUp, Occurrence, Recurrence, RecurrenceError
from delayline.errors import InvalidScheduleError
from delayline.fire.firing import Firing

MINUTE = 60_000
T0 = 1_893_456_000_000  # 2030-01-01T00:00:00Z, a Tuesday
SOURCE = SourceRef("delayline-schedules", 3, 41, T0 - 5 * MINUTE)


def recurring(
    recurrence: Recurrence, due_ms: int = T0, number: int | None = None, group: str | None = None
) -> Schedule:
    """A recurring version as read from partition 3 at offset 41."""
    built = build_schedule(
        "report",
        b"payload",
        "reports",
        due_ms,
        target_key=b"k",
        own_headers=own_headers(recurrence, group),
        extra_headers=[("trace", b"t1")],
    )
    headers = built.headers
    if number is not None:
        headers = (*headers, (h.OCCURRENCE, str(number).encode()))
    return Schedule(built.id, due_ms, "reports", b"k", b"payload", headers, SOURCE)


def header(headers: tuple[tuple[str, bytes | None], ...], name: str) -> list[bytes | None]:
    return [value for key, value in headers if key == name]


def test_the_headers_state_the_recurrence_they_were_made_from() -> None:
    rec = Recurrence(
        cron="0 9 * * 1-5",
        time_zone="Europe/Berlin",
        until_ms=T0 + 30 * 86_400_000,
        max_occurrences=12,
        catch_up=CatchUp.NONE,
        catch_up_window_ms=5 * MINUTE,
    )
    schedule = recurring(rec, group="reports")
    assert recurrence_of(schedule.headers) == rec
    assert group_of(schedule.headers) == "reports"
    assert describe_recurrence(schedule.headers) == "cron 0 9 * * 1-5 in Europe/Berlin"
    every = recurring(Recurrence(every_ms=15 * MINUTE))
    assert header(every.headers, h.EVERY) == [b"15m"]
    assert header(every.headers, h.TIME_ZONE) == []  # the default is left out
    assert describe_recurrence(every.headers) == "every 15m"
    assert recurrence_of(build_schedule("x", b"", "t", T0).headers) is None
    # The header contract's parser still sees a plain schedule.
    assert parse_record_is_schedule(schedule)


def parse_record_is_schedule(schedule: Schedule) -> bool:
    from delayline.contract import ConsumedRecord  # noqa: PLC0415

    record = ConsumedRecord("s", 0, 1, T0, b"report", schedule.payload, schedule.headers)
    return isinstance(parse_record(record), Schedule)


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        (((h.CRON, b"0 9 * * *"), (h.CRON, b"0 10 * * *")), "header delayline-cron appears more"),
        (((h.CRON, b"\xff"),), "header delayline-cron is not valid UTF-8"),
        (((h.EVERY, b"soon"),), "header delayline-every is 'soon': use a duration"),
        (((h.CRON, b"* * * * *"), (h.CATCH_UP, b"some")), "use all, latest or none"),
        (((h.CRON, b"* * * * *"), (h.MAX_OCCURRENCES, b"0")), "a whole number of 1 or more"),
        (((h.CRON, b"* * * * *"), (h.UNTIL, b"tomorrow")), "header delayline-until not a decimal"),
        (((h.CRON, b"* * * * *"), (h.TIME_ZONE, b"Mars/Olympus")), "Mars/Olympus"),
        (((h.CRON, b"61 * * * *"),), "61 * * * *"),
    ],
)
def test_a_refused_recurrence_says_why(
    headers: tuple[tuple[str, bytes | None], ...], reason: str
) -> None:
    with pytest.raises(RecurrenceError) as caught:
        recurrence_of(headers)
    assert reason in str(caught.value)
    assert describe_recurrence(headers) == f"refused: {caught.value}"


def test_occurrence_numbers_default_to_one_and_must_be_whole() -> None:
    assert occurrence_number(()) == 1
    assert occurrence_number(((h.OCCURRENCE, b"17"),)) == 17
    with pytest.raises(RecurrenceError, match="whole number"):
        occurrence_number(((h.OCCURRENCE, b"-2"),))


def test_the_rearm_is_the_version_due_at_its_next_occurrence_in_its_own_partition() -> None:
    schedule = recurring(Recurrence(every_ms=MINUTE), number=4)
    copy = Schedule(
        schedule.id, T0, "reports", b"k", b"payload",
        (*schedule.headers, (h.COPY_OF, b"12")), SOURCE,
    )  # fmt: skip
    record = render_rearm(copy, Occurrence(T0 + MINUTE, 5))
    assert (record.topic, record.partition, record.key) == (SOURCE.topic, 3, b"report")
    assert record.value == b"payload"
    assert header(record.headers, h.EPOCH) == [h.format_epoch(T0 + MINUTE).encode()]
    assert header(record.headers, h.OCCURRENCE) == [b"5"]
    assert header(record.headers, h.COPY_OF) == []  # a copy's mark is not carried on
    assert header(record.headers, "trace") == [b"t1"]
    due = at_occurrence(schedule, Occurrence(T0 + 2 * MINUTE, 6))
    assert (due.due_ms, due.source) == (T0 + 2 * MINUTE, SOURCE)


def test_a_turn_delivers_the_occurrence_and_rearms_the_next() -> None:
    schedule = recurring(Recurrence(every_ms=MINUTE), number=2)
    turn = take_turn(Firing(schedule, "dead", forget=False), T0 + 10)
    (firing,) = turn.firings
    assert turn.rearm is not None
    assert firing.rearm is turn.rearm
    assert not firing.forget
    delivered = firing.delivery
    assert header(delivered.headers, h.OCCURRENCE) == [b"2"]
    assert header(delivered.headers, h.EPOCH) == [h.format_epoch(T0).encode()]
    assert header(turn.rearm.headers, h.OCCURRENCE) == [b"3"]
    records = firing.records()
    assert [r.topic for r in records] == ["reports", SOURCE.topic]  # no tombstone
    # Refused, the series ends: dead letter and tombstone, no re-arm.
    refused = firing.refused("topic missing")
    assert [r.topic for r in refused] == ["dead", SOURCE.topic]
    assert refused[1].value is None


def test_the_last_occurrence_forgets_the_schedule() -> None:
    schedule = recurring(Recurrence(every_ms=MINUTE, max_occurrences=3), number=3)
    turn = take_turn(Firing(schedule, "dead", forget=False), T0)
    (firing,) = turn.firings
    assert turn.rearm is None
    assert firing.forget
    tombstone = firing.records()[1]
    assert (tombstone.value, header(tombstone.headers, h.FIRED_OFFSET)) == (None, [b"41"])


def numbers(turn_firings: list[Firing]) -> list[bytes | None]:
    return [header(f.delivery.headers, h.OCCURRENCE)[0] for f in turn_firings]


def rearmed_number(turn: Turn) -> bytes | None:
    assert turn.rearm is not None
    return header(turn.rearm.headers, h.OCCURRENCE)[0]


def test_a_turn_settles_every_occurrence_due_by_now_by_the_catch_up_policy() -> None:
    """Ten minutes and five seconds late, every minute, a window of one minute:
    occurrences 1-10 are missed, 11 (five seconds late) is not."""
    late = T0 + 10 * MINUTE + 5_000

    def turn(policy: CatchUp) -> Turn:
        schedule = recurring(Recurrence(every_ms=MINUTE, catch_up=policy), number=1)
        return take_turn(Firing(schedule, "dead", forget=False), late)

    every = turn(CatchUp.ALL)
    assert numbers(every.firings) == [str(n).encode() for n in range(1, 12)]
    assert every.skipped == 0
    latest = turn(CatchUp.LATEST)
    assert numbers(latest.firings) == [b"11"]
    assert latest.skipped == 10
    none = turn(CatchUp.NONE)
    assert numbers(none.firings) == [b"11"]
    assert none.skipped == 10
    for each in (every, latest, none):
        assert rearmed_number(each) == b"12"


def test_a_turn_that_skips_everything_only_rearms() -> None:
    """Every ten minutes, 25 minutes late, none: occurrences 1-3 are missed, nothing
    is within the window, the schedule is re-armed at occurrence 4."""
    schedule = recurring(Recurrence(every_ms=10 * MINUTE, catch_up=CatchUp.NONE), number=1)
    turn = take_turn(Firing(schedule, "dead", forget=False), T0 + 25 * MINUTE)
    assert turn.firings == []
    assert turn.records == [turn.rearm]
    assert turn.skipped == 3
    assert rearmed_number(turn) == b"4"


def test_a_refused_recurrence_turns_into_a_dead_letter_and_a_tombstone() -> None:
    bad = Schedule(
        "bad", T0, "reports", None, b"p",
        ((h.EPOCH, b"1893456000"), (h.TARGET_TOPIC, b"reports"), (h.CRON, b"every day")),
        SOURCE,
    )  # fmt: skip
    turn = take_turn(Firing(bad, "dead", forget=False), T0)
    assert turn.firings == []
    assert turn.rearm is None
    assert turn.reason is not None
    assert turn.reason.startswith("recurrence refused: ")
    dead, tombstone = turn.records
    assert dead.topic == "dead"
    assert header(dead.headers, h.ERROR) == [turn.reason.encode()]
    assert tombstone.topic == SOURCE.topic
    assert tombstone.value is None


def test_pausing_keeps_everything_but_the_due_time() -> None:
    schedule = recurring(Recurrence(cron="0 9 * * *"), group="g")
    paused = paused_headers(schedule.headers, schedule.due_ms)
    assert header(paused, h.EPOCH) == [h.format_epoch(MAX_EPOCH_MS).encode()]
    assert paused_due_ms(paused) == schedule.due_ms
    assert paused_due_ms(schedule.headers) is None
    resumed = resumed_headers(paused, schedule.due_ms)
    assert paused_due_ms(resumed) is None
    assert sorted(resumed) == sorted(schedule.headers)


def test_one_offs_may_state_a_catch_up_policy_for_their_resume() -> None:
    assert one_off_catch_up(()) == (CatchUp.LATEST, MINUTE)
    stated = ((h.CATCH_UP, b"none"), (h.CATCH_UP_WINDOW, b"5m"))
    assert one_off_catch_up(stated) == (CatchUp.NONE, 5 * MINUTE)
    assert one_off_catch_up(((h.CATCH_UP, b"junk"),)) == (CatchUp.LATEST, MINUTE)


def test_groups_are_printable_and_bounded() -> None:
    assert own_headers(None, "team-a") == ((h.GROUP, b"team-a"),)
    for bad in ("", "a\nb", "x" * 201):
        with pytest.raises(InvalidScheduleError, match="group"):
            own_headers(None, bad)
    with pytest.raises(InvalidScheduleError, match="reserved"):
        build_schedule("x", b"", "t", T0, extra_headers=[(h.CRON, b"* * * * *")])


def test_only_the_header_contract_recurs() -> None:
    """An envelope's headers are delivered as they are: a cron header there recurs
    nothing (a re-arm would be a header-contract record on the envelope topic)."""
    topology = Topology(schedules_topics=(SOURCE.topic,), envelope_topics=("envelopes",))
    schedule = recurring(Recurrence(every_ms=MINUTE))
    assert topology.recurs(schedule)
    enveloped = Schedule(
        schedule.id, T0, "reports", None, b"p", schedule.headers,
        SourceRef("envelopes", 0, 1, T0),
    )  # fmt: skip
    assert not topology.recurs(enveloped)
    assert not topology.recurs(build_schedule("x", b"", "t", T0))
