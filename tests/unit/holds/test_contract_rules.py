"""The hold rules for schedules that came in by the envelope and timer-request contracts,
run against every hold: the same rules, with the id each contract gives."""

from __future__ import annotations

import json
from typing import Any

from delayline.contract import ConsumedRecord
from delayline.contract import events as ev
from delayline.contract import headers as h
from delayline.contract.timer_request import render_timer_request
from tests.unit.holds.conftest import Driver, Seen

ENVELOPES = "envelopes"
TIMERS = "timers"
NOW = 1_000_000


def envelope(
    offset: int,
    body: dict[str, Any] | None,
    *,
    partition: int = 1,
    ts: int = NOW - 5,
    key: bytes | None = None,
    extra: tuple[tuple[str, bytes | None], ...] = (),
) -> ConsumedRecord:
    value = None if body is None else json.dumps(body).encode()
    return ConsumedRecord(ENVELOPES, partition, offset, ts, key, value, extra)


def timer(offset: int, second: int, *, partition: int = 0, ts: int = NOW - 5) -> ConsumedRecord:
    request = render_timer_request(TIMERS, second, "target", "k", b"callback")
    return ConsumedRecord(TIMERS, partition, offset, ts, request.key, request.value)


def only(events: list[Seen], kind: str) -> list[Seen]:
    return [e for e in events if e.kind == kind]


def test_envelopes_without_an_id_are_separate_schedules_due_by_their_timestamp(
    hold: Driver,
) -> None:
    """The derived id keeps two id-less envelopes apart; the countdown runs from the
    record's timestamp, not from the batch time."""
    first = envelope(5, {"topic": "target", "message": "one", "countdown": 10})
    second = envelope(6, {"topic": "target", "message": {"n": 2}, "countdown": 20})
    events = hold.batch([first, second], NOW + 3_000)
    assert sorted(str(e.id) for e in only(events, ev.Kind.PLANNED)) == [
        "envelopes:1:5",
        "envelopes:1:6",
    ]
    assert only(hold.batch([], NOW - 5 + 9_999), ev.Kind.RAISE) == []
    (fired,) = only(hold.batch([], NOW - 5 + 10_000), ev.Kind.RAISE)
    assert (fired.id, fired.value, fired.due_ms) == ("envelopes:1:5", b"one", NOW - 5 + 10_000)
    (fired,) = only(hold.batch([], NOW - 5 + 20_000), ev.Kind.RAISE)
    assert (fired.id, fired.value) == ("envelopes:1:6", b'{"n":2}')


def test_an_envelope_with_an_id_is_replaced_by_a_later_one(hold: Driver) -> None:
    hold.batch([envelope(5, {"id": "x", "topic": "target", "message": "a", "countdown": 10})], NOW)
    events = hold.batch(
        [envelope(9, {"id": "x", "topic": "target", "message": "b", "countdown": 30})], NOW + 1
    )
    assert [(e.kind, e.id) for e in events] == [(ev.Kind.UPDATED, "x")]
    assert hold.held_offset(ENVELOPES, "x") == 9
    assert only(hold.batch([], NOW + 20_000), ev.Kind.RAISE) == []
    (fired,) = only(hold.batch([], NOW + 30_000), ev.Kind.RAISE)
    assert (fired.value, fired.offset) == (b"b", 9)


def test_a_cancel_envelope_or_a_tombstone_keyed_by_the_id_cancels(hold: Driver) -> None:
    hold.batch([envelope(1, {"id": "x", "topic": "target", "message": "a", "countdown": 10})], NOW)
    hold.batch([envelope(2, {"id": "y", "topic": "target", "message": "a", "countdown": 10})], NOW)
    events = hold.batch(
        [envelope(3, {"id": "x", "cancel": True}), envelope(4, None, key=b"y")], NOW + 1
    )
    assert sorted((e.kind, e.id) for e in events) == [
        (ev.Kind.CANCELLED, "x"),
        (ev.Kind.CANCELLED, "y"),
    ]
    assert hold.batch([], NOW + 60_000) == []


def test_delaylines_own_tombstone_read_back_after_a_delivery_changes_nothing(
    hold: Driver,
) -> None:
    hold.batch([envelope(5, {"topic": "target", "message": "a", "countdown": 0})], NOW)
    own = envelope(8, None, key=b"envelopes:1:5", extra=((h.FIRED_OFFSET, b"5"),))
    assert [(e.kind, e.id) for e in hold.batch([own], NOW + 1)] == [
        (ev.Kind.OWN_TOMBSTONE, "envelopes:1:5")
    ]


def test_delaylines_own_tombstone_of_an_older_version_keeps_the_newer_one(
    hold: Driver,
) -> None:
    """A version fired, then an envelope of the same id arrived before the tombstone of
    the fired one was read: that tombstone ends only the version it names."""
    first = {"id": "x", "topic": "target", "message": "a", "countdown": 0}
    hold.batch([envelope(5, first)], NOW)
    later = {"id": "x", "topic": "target", "message": "b", "countdown": 60}
    own = envelope(7, None, key=b"x", extra=((h.FIRED_OFFSET, b"5"),))
    events = hold.batch([envelope(6, later), own], NOW + 1)
    assert (ev.Kind.CANCELLED, "x") not in [(e.kind, e.id) for e in events]
    assert hold.held_offset(ENVELOPES, "x") == 6
    (fired,) = only(hold.batch([], NOW - 5 + 60_000), ev.Kind.RAISE)
    assert fired.value == b"b"


def test_an_envelope_already_due_fires_at_once(hold: Driver) -> None:
    events = hold.batch(
        [envelope(5, {"topic": "target", "message": "late", "at": (NOW - 1_000) / 1000})], NOW
    )
    assert kinds_of(events) == [ev.Kind.MISSED, ev.Kind.RAISE]


def test_a_malformed_envelope_is_dead_lettered_with_its_reason(hold: Driver) -> None:
    bad = envelope(5, {"topic": "target", "message": "a", "countdown": -1}, key=b"k")
    (dead,) = hold.batch([bad], NOW)
    assert (dead.kind, dead.offset, dead.reason) == (
        ev.Kind.DEAD,
        5,
        "envelope field 'countdown' is negative",
    )


def test_a_timer_request_fires_at_its_second_with_its_callback(hold: Driver) -> None:
    second = (NOW + 60_000) // 1000
    events = hold.batch([timer(3, second)], NOW)
    assert [(e.kind, e.id, e.due_ms) for e in events] == [
        (ev.Kind.PLANNED, "timers:0:3", second * 1000)
    ]
    (fired,) = only(hold.batch([], second * 1000), ev.Kind.RAISE)
    assert (fired.id, fired.value) == ("timers:0:3", b"callback")


def test_a_timer_request_already_due_fires_at_once(hold: Driver) -> None:
    """The original design dropped these silently."""
    events = hold.batch([timer(3, NOW // 1000 - 1)], NOW)
    assert kinds_of(events) == [ev.Kind.MISSED, ev.Kind.RAISE]


def test_a_timer_request_is_cancelled_by_a_tombstone_keyed_by_its_id(hold: Driver) -> None:
    second = (NOW + 60_000) // 1000
    hold.batch([timer(3, second), timer(4, second)], NOW)
    cancel = ConsumedRecord(TIMERS, 0, 9, NOW, b"timers:0:3", None)
    assert [(e.kind, e.id) for e in hold.batch([cancel], NOW + 1)] == [
        (ev.Kind.CANCELLED, "timers:0:3")
    ]
    assert [e.id for e in only(hold.batch([], second * 1000), ev.Kind.RAISE)] == ["timers:0:4"]


def kinds_of(events: list[Seen]) -> list[str]:
    return [e.kind for e in events]
