"""The timer-request contract, derived ids, and the parser of every input topic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.contract import ConsumedRecord
from delayline.contract import headers as h
from delayline.contract.contracts import (
    CONTRACTS,
    ENVELOPE,
    HEADER,
    TIMER_REQUEST,
    InputParser,
    compacted,
)
from delayline.contract.future_pb2 import Future
from delayline.contract.ids import derived_id, parse_derived_id
from delayline.contract.timer_request import parse_timer_request_checked, render_timer_request
from delayline.contract.topology import Topology
from delayline.core.model import Cancel, Invalid, Schedule
from delayline.errors import ConfigError, InvalidScheduleError

# Future{callBackTopic: "out", callBackKey: "k1", callBack: b"\x00cb"}, encoded by hand from
# the protobuf wire format (field 1, 2, 3: tag, length, bytes), not by the generated code.
WIRE = b"\x0a\x03out" + b"\x12\x02k1" + b"\x1a\x03\x00cb"


def request(key: bytes | None, value: bytes | None, headers: tuple = ()) -> ConsumedRecord:  # type: ignore[type-arg]
    return ConsumedRecord("timers", 3, 77, 5, key, value, headers)


def test_a_request_as_a_plain_producer_writes_it() -> None:
    got = parse_timer_request_checked(request(b"1893456000", WIRE, (("trace", b"t"),)))
    assert got == Schedule(
        "timers:3:77", 1_893_456_000_000, "out", b"k1", b"\x00cb", (("trace", b"t"),)
    )


def test_an_empty_callback_key_delivers_a_null_key_and_an_empty_callback_is_kept() -> None:
    got = parse_timer_request_checked(
        request(b"0", Future(callBackTopic="out").SerializeToString())
    )
    assert isinstance(got, Schedule)
    assert (got.target_key, got.payload, got.due_ms) == (None, b"", 0)


def test_render_writes_the_same_bytes_as_the_hand_encoding() -> None:
    out = render_timer_request("timers", 1_893_456_000, "out", "k1", b"\x00cb")
    assert (out.key, out.value) == (b"1893456000", WIRE)


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        (None, WIRE, "missing expiry second (record key is empty)"),
        (b"", WIRE, "missing expiry second (record key is empty)"),
        (b"12.5", WIRE, "expiry second (record key) is not Unix seconds: '12.5'"),
        (b"-5", WIRE, "expiry second (record key) is not Unix seconds: '-5'"),
        (b" 5", WIRE, "expiry second (record key) is not Unix seconds: ' 5'"),
        (b"9" * 13, WIRE, f"expiry second (record key) is not Unix seconds: '{'9' * 13}'"),
        (b"999999999999", WIRE, "expiry second (record key) is beyond year 9999"),
        (b"5", b"\xff\xff\xff", "value is not a Future protobuf: Error parsing message with type "
         "'delayline.timers.Future': Wire format was corrupt"),
        (b"5", b"", "Future has no callBackTopic"),
        (b"5", b"\x12\x02k1", "Future has no callBackTopic"),
        (b"5", b"\x0a\x02__", "Future's callBackTopic is an internal Kafka topic: '__' "
         "(names starting with '__' are reserved to Kafka)"),
    ],
)  # fmt: skip
def test_malformed_requests_get_a_reason(key: bytes | None, value: bytes, why: str) -> None:
    got = parse_timer_request_checked(request(key, value))
    assert isinstance(got, Invalid)
    assert got.reason == why


def test_a_callback_topic_that_is_not_utf8_is_refused() -> None:
    got = parse_timer_request_checked(request(b"5", b"\x0a\x02\xff\xfe"))
    assert isinstance(got, Invalid)
    assert got.reason.startswith("value is not a Future protobuf")


def test_a_tombstone_keyed_by_the_derived_id_cancels() -> None:
    assert parse_timer_request_checked(request(b"timers:3:70", None)) == Cancel("timers:3:70")
    own = request(b"timers:3:70", None, ((h.FIRED_OFFSET, b"70"),))
    assert parse_timer_request_checked(own) == Cancel("timers:3:70", 70)


@given(
    key=st.one_of(st.none(), st.binary(max_size=14)),
    value=st.one_of(st.none(), st.binary(max_size=60)),
)
def test_any_bytes_are_parsed_without_raising(key: bytes | None, value: bytes | None) -> None:
    got = parse_timer_request_checked(request(key, value))
    assert isinstance(got, Schedule | Cancel | Invalid)


@given(
    second=st.integers(0, 253_402_300_799),
    topic=st.text("abc._-", min_size=1, max_size=20).filter(
        lambda t: t not in {".", ".."} and not t.startswith("__")
    ),
    key=st.text(max_size=10),
    callback=st.binary(max_size=50),
)
def test_what_a_producer_writes_parses_back(
    second: int, topic: str, key: str, callback: bytes
) -> None:
    out = render_timer_request("timers", second, topic, key, callback)
    got = parse_timer_request_checked(ConsumedRecord("timers", 0, 1, 0, out.key, out.value))
    assert got == Schedule("timers:0:1", second * 1000, topic, key.encode() or None, callback)


def test_render_refuses_what_would_be_dead_lettered() -> None:
    with pytest.raises(InvalidScheduleError, match="callBackTopic is not a valid topic name"):
        render_timer_request("timers", 5, "a b", "", b"")
    with pytest.raises(InvalidScheduleError, match="negative"):
        render_timer_request("timers", -1, "out", "", b"")


def test_derived_ids_parse_back() -> None:
    assert derived_id("my.topic-1", 4, 12) == "my.topic-1:4:12"
    assert parse_derived_id("my.topic-1:4:12") == ("my.topic-1", 4, 12)
    for other in ("order-7", "a:b:c", "t:1", "t:-1:2", "bad topic:1:2", ":1:2", "t:1:2:3"):
        assert parse_derived_id(other) is None


def test_the_input_parser_picks_the_contract_by_topic() -> None:
    topology = Topology(envelope_topics=("env",), timer_request_topics=("timers",))
    assert [topology.contract_of(t) for t in ("delayline-schedules", "env", "timers", "other")] == [
        HEADER, ENVELOPE, TIMER_REQUEST, HEADER,
    ]  # fmt: skip
    parse = InputParser(topology)
    timer = ConsumedRecord("timers", 3, 77, 5, b"1893456000", WIRE)
    assert parse.group_key(timer) == b"timers:3:77"
    envelope = ConsumedRecord("env", 0, 1, 5, b"key", b'{"id":"x","cancel":true}')
    assert parse.group_key(envelope) == b"x"
    # An invalid one is grouped alone, by where it sits (never with schedule "key").
    assert parse.group_key(ConsumedRecord("env", 0, 1, 5, b"key", b"junk")) == b"env:0:1"
    header = ConsumedRecord("delayline-schedules", 0, 1, 5, b"id", None)
    assert (parse(header), parse.group_key(header)) == (Cancel("id"), b"id")
    assert [compacted(c) for c in (HEADER, ENVELOPE, TIMER_REQUEST)] == [True, False, False]


def test_an_input_topic_has_one_role() -> None:
    with pytest.raises(ConfigError, match="must be distinct"):
        Topology(envelope_topics=("x",), timer_request_topics=("x",))
    with pytest.raises(ConfigError, match="must be distinct"):
        Topology(envelope_topics=("delayline-schedules",))
    with pytest.raises(ConfigError, match="invalid"):
        Topology(timer_request_topics=("bad topic",))


def test_the_contract_type_names_every_contract() -> None:
    from typing import get_args  # noqa: PLC0415

    from delayline.contract.contracts import Contract  # noqa: PLC0415

    assert get_args(Contract) == CONTRACTS
