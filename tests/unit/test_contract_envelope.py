"""The JSON envelope contract: every rule of delayline.contract.envelope, and a parser that
never raises, whatever the bytes."""

from __future__ import annotations

import json
import math
import string
import time
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.contract import ConsumedRecord
from delayline.contract import headers as h
from delayline.contract.envelope import (
    MAX_ENVELOPE_BYTES,
    parse_envelope,
    parse_envelope_checked,
    render_envelope,
)
from delayline.core.model import MAX_EPOCH_MS, Cancel, Invalid, Schedule
from delayline.errors import InvalidScheduleError

TS = 1_700_000_000_000


def record(value: bytes | None, *, key: bytes | None = None, headers: Any = ()) -> ConsumedRecord:
    return ConsumedRecord("env", 2, 41, TS, key, value, tuple(headers))


def parse(body: Any, **kw: Any) -> Any:
    return parse_envelope_checked(record(json.dumps(body).encode(), **kw))


def reason(body: Any) -> str:
    parsed = parse_envelope_checked(
        record(body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    assert isinstance(parsed, Invalid), parsed
    return parsed.reason


def test_a_countdown_runs_from_the_record_timestamp() -> None:
    got = parse({"topic": "orders", "message": "hello", "countdown": 120},
                headers=[("CALLER_SERVICE", b"billing"), ("x", None)])  # fmt: skip
    assert got == Schedule("env:2:41", TS + 120_000, "orders", None, b"hello",
                           (("CALLER_SERVICE", b"billing"), ("x", None)))  # fmt: skip


def test_optional_key_and_id() -> None:
    got = parse({"topic": "t", "message": "m", "countdown": 0, "key": "k-é", "id": "order-7"})
    assert isinstance(got, Schedule)
    assert (got.id, got.target_key) == ("order-7", "k-é".encode())
    assert parse({"topic": "t", "message": "m", "countdown": 0, "key": None}).target_key is None


@pytest.mark.parametrize(
    ("message", "delivered"),
    [
        ("plain text", b"plain text"),
        ('{"a": 1}', b'{"a": 1}'),  # a string is delivered as is, never re-encoded
        ("名前", "名前".encode()),
        ({"a": [1, 2.50, True, None], "b": "é"}, '{"a":[1,2.5,true,null],"b":"é"}'.encode()),
        ([], b"[]"),
        (12, b"12"),
        (None, b"null"),
        (False, b"false"),
    ],
)
def test_message_a_string_as_its_bytes_anything_else_as_compact_json(
    message: Any, delivered: bytes
) -> None:
    got = parse({"topic": "t", "message": message, "countdown": 1})
    assert isinstance(got, Schedule)
    assert got.payload == delivered


def test_numbers_in_a_message_keep_their_digits() -> None:
    raw = b'{"topic":"t","countdown":1,"message":{"big":123456789012345678901234567890,"x":1.10,"e":1e5}}'
    got = parse_envelope_checked(record(raw))
    assert isinstance(got, Schedule)
    assert got.payload == b'{"big":123456789012345678901234567890,"x":1.10,"e":1E+5}'


@pytest.mark.parametrize(
    ("at", "due_ms"),
    [
        ("2026-11-23T10:00:00Z", 1_795_428_000_000),
        ("2026-11-23T11:00:00+01:00", 1_795_428_000_000),
        ("2026-11-23T10:00:00.0001Z", 1_795_428_000_001),  # a fraction of a ms rounds up
        (1_795_428_000, 1_795_428_000_000),
        (1_795_428_000.25, 1_795_428_000_250),
        (1_795_428_000.0001, 1_795_428_000_001),
    ],
)
def test_at_is_iso_8601_with_a_zone_or_unix_seconds(at: Any, due_ms: int) -> None:
    got = parse({"topic": "t", "message": "m", "at": at})
    assert isinstance(got, Schedule)
    assert got.due_ms == due_ms


def test_fractional_countdown_rounds_up_exactly() -> None:
    # 1.1 * 1000 in binary floating point is 1100.0000000000002: no extra millisecond.
    assert parse({"topic": "t", "message": "m", "countdown": 1.1}).due_ms == TS + 1_100
    assert parse({"topic": "t", "message": "m", "countdown": 0.0000001}).due_ms == TS + 1


def test_cancel_by_envelope_or_by_tombstone() -> None:
    assert parse({"id": "x", "cancel": True}) == Cancel("x")
    assert parse_envelope(record(None, key=b"x")) == Cancel("x")
    own = parse_envelope(record(None, key=b"env:2:3", headers=[(h.FIRED_OFFSET, b"3")]))
    assert own == Cancel("env:2:3", 3)
    # cancel: false is an ordinary envelope
    assert isinstance(
        parse({"topic": "t", "message": "m", "countdown": 1, "cancel": False}), Schedule
    )


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"not json", "envelope is not JSON: Expecting value: line 1 column 1 (char 0)"),
        (b"\xff\xfe", "envelope is not valid UTF-8"),
        (b'"a string"', "envelope is not a JSON object"),
        (b"[1]", "envelope is not a JSON object"),
        (b'{"topic":"t","message":"m","countdown":NaN}', "envelope is not JSON: NaN is not JSON"),
        (b'{"topic":"t","topic":"u","message":"m","countdown":1}',
         "envelope field 'topic' appears more than once"),
        ({"message": "m", "countdown": 1}, "envelope has no 'topic'"),
        ({"topic": 5, "message": "m", "countdown": 1}, "envelope field 'topic' is not a string"),
        ({"topic": "a b", "message": "m", "countdown": 1},
         "envelope field 'topic' is not a valid topic name: 'a b' has characters other than "
         "ASCII letters, digits, '.', '_', '-'"),
        ({"topic": "__consumer_offsets", "message": "m", "countdown": 1},
         "envelope field 'topic' is an internal Kafka topic: '__consumer_offsets' "
         "(names starting with '__' are reserved to Kafka)"),
        ({"topic": "t", "countdown": 1}, "envelope has no 'message'"),
        ({"topic": "t", "message": "m"}, "envelope has neither 'countdown' nor 'at'"),
        ({"topic": "t", "message": "m", "countdown": 1, "at": 5},
         "envelope has both 'countdown' and 'at'"),
        ({"topic": "t", "message": "m", "countdown": -1}, "envelope field 'countdown' is negative"),
        ({"topic": "t", "message": "m", "countdown": "120"},
         "envelope field 'countdown' is not a number"),
        ({"topic": "t", "message": "m", "countdown": True},
         "envelope field 'countdown' is not a number"),
        ({"topic": "t", "message": "m", "countdown": 1e300},
         "envelope field 'countdown' is beyond year 9999"),
        ({"topic": "t", "message": "m", "at": "2026-11-23T10:00:00"},
         "envelope field 'at' has no time zone (add Z or +HH:MM)"),
        ({"topic": "t", "message": "m", "at": "tomorrow"},
         "envelope field 'at' is neither ISO 8601 nor a number of Unix seconds"),
        ({"topic": "t", "message": "m", "at": "1969-12-31T23:59:59Z"},
         "envelope field 'at' is before 1970"),
        ({"topic": "t", "message": "m", "at": -1}, "envelope field 'at' is negative"),
        ({"topic": "t", "message": "m", "countdown": 1, "key": 7},
         "envelope field 'key' is not a string"),
        ({"topic": "t", "message": "m", "countdown": 1, "id": ""},
         "envelope field 'id' is not a non-empty string"),
        ({"topic": "t", "message": "m", "countdown": 1, "id": 3},
         "envelope field 'id' is not a non-empty string"),
        ({"id": "x", "cancel": "yes"}, "envelope field 'cancel' is not true or false"),
        ({"cancel": True}, "envelope cancel without an 'id'"),
        (b'{"topic":"t","message":"\\ud800","countdown":1}',
         "envelope field 'message' is not valid Unicode (a lone surrogate)"),
        (b"[" * 100_000, "envelope is nested deeper than 100 levels"),
    ],
)  # fmt: skip
def test_malformed_envelopes_get_a_reason(body: Any, why: str) -> None:
    assert reason(body) == why


def test_due_time_past_year_9999_is_refused() -> None:
    at = (MAX_EPOCH_MS + 1) / 1000
    assert (
        reason({"topic": "t", "message": "m", "at": at})
        == "envelope's due time is beyond year 9999"
    )


def test_an_oversized_envelope_is_refused_before_parsing() -> None:
    body = json.dumps({"topic": "t", "message": "x" * MAX_ENVELOPE_BYTES, "countdown": 1})
    assert reason(body.encode()) == (
        f"envelope is {len(body)} bytes, over the {MAX_ENVELOPE_BYTES}-byte limit"
    )


def test_a_tombstone_needs_the_id_in_its_key() -> None:
    got = parse_envelope(record(None))
    assert isinstance(got, Invalid)
    assert got.reason == "missing schedule id (record key is empty)"


def test_render_envelope_writes_what_parses_back() -> None:
    out = render_envelope("env", "orders", {"n": 1}, countdown_s=2.5, key="k", schedule_id="s",
                          headers=(("CALLER_SERVICE", b"svc"),))  # fmt: skip
    got = parse_envelope_checked(ConsumedRecord("env", 0, 1, TS, out.key, out.value, out.headers))
    assert got == Schedule(
        "s", TS + 2_500, "orders", b"k", b'{"n":1}', (("CALLER_SERVICE", b"svc"),)
    )
    with pytest.raises(InvalidScheduleError, match="countdown"):
        render_envelope("env", "orders", "m", countdown_s=-1)
    with pytest.raises(InvalidScheduleError, match="exactly one"):
        render_envelope("env", "orders", "m")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=10,
)  # fmt: skip
fields = st.fixed_dictionaries(
    {},
    optional={
        "topic": st.one_of(st.text(string.ascii_letters + "._-", min_size=1, max_size=8), json_values),
        "message": json_values,
        "countdown": st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=False), json_values),
        "at": st.one_of(st.integers(-5, 10**12), st.text(max_size=30), json_values),
        "key": st.one_of(st.text(max_size=5), json_values),
        "id": st.one_of(st.text(max_size=5), json_values),
        "cancel": st.one_of(st.booleans(), json_values),
    },
)  # fmt: skip


@given(body=fields, key=st.one_of(st.none(), st.binary(max_size=8)))
def test_the_checks_alone_catch_any_json_object(body: dict[str, Any], key: bytes | None) -> None:
    """No safety net involved: every object is a schedule, a cancel or refused with a reason."""
    got = parse_envelope_checked(record(json.dumps(body).encode(), key=key))
    assert isinstance(got, Schedule | Cancel | Invalid)
    if isinstance(got, Schedule):
        assert got.due_ms >= 0
        assert got.id
        assert got.target_topic


@given(
    value=st.one_of(st.none(), st.binary(max_size=300)),
    key=st.one_of(st.none(), st.binary(max_size=8)),
)
def test_any_bytes_are_parsed_without_raising(value: bytes | None, key: bytes | None) -> None:
    got = parse_envelope_checked(record(value, key=key))
    assert isinstance(got, Schedule | Cancel | Invalid)


@given(
    message=st.one_of(st.text(max_size=30), json_values),
    countdown=st.one_of(st.integers(0, 10**9), st.floats(0, 10**9)),
    key=st.one_of(st.none(), st.text(max_size=10)),
)
def test_what_a_producer_writes_parses_back(
    message: Any, countdown: float, key: str | None
) -> None:
    """A string message is delivered as its bytes; any other value decodes to the same JSON."""
    out = render_envelope("env", "orders", message, countdown_s=countdown, key=key)
    got = parse_envelope_checked(ConsumedRecord("env", 0, 9, TS, None, out.value, ()))
    assert isinstance(got, Schedule)
    assert got.id == "env:0:9"
    assert got.target_key == (None if key is None else key.encode())
    # The countdown as written (its decimal text), in exact arithmetic, rounded up.
    assert got.due_ms == TS + math.ceil(Fraction(json.dumps(countdown)) * 1000)
    if isinstance(message, str):
        assert got.payload == message.encode()
    else:
        assert json.loads(got.payload) == message


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b'{"topic":"t","message":1e99999999999999999999,"countdown":1}',
         "envelope holds a number out of range"),
        (b'{"topic":"t","message":"m","countdown":1,"other":-1E-99999999999999999999}',
         "envelope holds a number out of range"),
        (b'{"topic":"t","message":"m","countdown":1,"id":"env:0:3"}',
         "envelope field 'id' has the form of this topic's own ids: 'env:0:3'"),
    ],
)  # fmt: skip
def test_numbers_past_any_range_and_reserved_ids_are_refused(raw: bytes, why: str) -> None:
    assert reason(raw) == why


def test_an_id_of_another_topics_form_is_an_ordinary_id() -> None:
    got = parse({"topic": "t", "message": "m", "countdown": 1, "id": "other:0:3"})
    assert isinstance(got, Schedule)
    assert got.id == "other:0:3"


def test_nesting_is_refused_past_a_fixed_depth_wherever_it_is_parsed() -> None:
    def nested(depth: int) -> bytes:
        return (
            b'{"topic":"t","countdown":1,"message":'
            + b"[" * (depth - 1)
            + b"]" * (depth - 1)
            + b"}"
        )

    assert isinstance(parse_envelope_checked(record(nested(100))), Schedule)
    assert reason(nested(101)) == "envelope is nested deeper than 100 levels"
    # Brackets inside strings do not count.
    assert isinstance(parse({"topic": "t", "message": "[" * 500, "countdown": 1}), Schedule)


def test_the_smallest_countdown_is_still_a_millisecond() -> None:
    raw = b'{"topic":"t","message":"m","countdown":1e-1000000}'
    got = parse_envelope_checked(record(raw))
    assert isinstance(got, Schedule)
    assert got.due_ms == TS + 1


number_text = st.from_regex(
    r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,25})?", fullmatch=True
)


@given(number=number_text, field=st.sampled_from(["countdown", "at", "message", "key", "extra"]))
def test_any_number_text_in_any_field_is_parsed_without_raising(number: str, field: str) -> None:
    """Numbers as a producer may write them, past float's and Decimal's ranges too."""
    fields = {"topic": '"t"', "message": '"m"', "countdown": "1"}
    if field == "at":
        del fields["countdown"]
    fields[field] = number
    raw = "{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}"
    got = parse_envelope_checked(record(raw.encode()))
    assert isinstance(got, Schedule | Cancel | Invalid)
    if isinstance(got, Schedule) and field in ("countdown", "at"):
        assert got.due_ms >= 0


def test_a_megabyte_of_unterminated_escapes_is_refused_quickly() -> None:
    """The nesting check must stay linear: an unterminated string of escaped quotes made
    it quadratic (a minute for 80 kB)."""
    raw = b'{"topic":"t","message":"' + b'\\"' * 500_000
    started = time.monotonic()
    got = parse_envelope_checked(record(raw))
    assert isinstance(got, Invalid)
    assert time.monotonic() - started < 5  # about 0.4 s here; quadratic took hours


def test_a_countdown_from_a_record_without_a_timestamp_is_refused() -> None:
    raw = json.dumps({"topic": "t", "message": "m", "countdown": 0}).encode()
    got = parse_envelope_checked(ConsumedRecord("env", 0, 1, -1, None, raw))
    assert isinstance(got, Invalid)
    assert got.reason == "envelope's due time is before 1970 (the record has no timestamp)"
