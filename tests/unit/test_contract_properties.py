"""Property tests: the writer and the reader agree; the reader's own checks catch every
malformed input (no safety net involved), each with its reason."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.contract import ConsumedRecord, build_schedule, parse_record, render_schedule
from delayline.contract import headers as h
from delayline.contract.contracts import PARSERS
from delayline.contract.records import is_own_tombstone, parse_record_checked
from delayline.core.model import MAX_EPOCH_MS, Cancel, Invalid, Schedule

topic_names = st.text(
    string.ascii_letters + string.digits + "._-", min_size=1, max_size=249
).filter(lambda t: t not in {".", ".."} and not t.startswith("__"))
# A client's own headers: the reserved ones have arguments of their own (build_schedule
# refuses them, tests/unit/test_contract.py); hypothesis draws names from the code's own
# constants too, so it finds them.
header_names = st.text(min_size=1, max_size=20).filter(
    lambda n: not n.startswith("scheduler-") and n not in h.RESERVED_HEADERS
)
header_values = st.one_of(st.none(), st.binary(max_size=40))


@given(
    schedule_id=st.text(min_size=1, max_size=60),
    payload=st.binary(max_size=200),
    target_topic=topic_names,
    due_ms=st.integers(min_value=0, max_value=MAX_EPOCH_MS),
    target_key=st.one_of(st.none(), st.binary(max_size=40)),
    extra=st.lists(st.tuples(header_names, header_values), max_size=5),
    partition=st.integers(min_value=0, max_value=100),
    offset=st.integers(min_value=0, max_value=2**62),
)
def test_what_the_client_writes_parses_back_to_the_same_schedule(
    schedule_id: str,
    payload: bytes,
    target_topic: str,
    due_ms: int,
    target_key: bytes | None,
    extra: list[tuple[str, bytes | None]],
    partition: int,
    offset: int,
) -> None:
    written = build_schedule(
        schedule_id, payload, target_topic, due_ms, target_key=target_key, extra_headers=extra
    )
    out = render_schedule(written, "schedules", partition)
    read = parse_record(
        ConsumedRecord("schedules", partition, offset, 0, out.key, out.value, out.headers)
    )
    assert read == written
    assert isinstance(read, Schedule)
    assert read.source is not None
    assert read.source.offset == offset


control = st.sampled_from(["scheduler-epoch", "scheduler-target-topic", "scheduler-target-key"])
any_header = st.tuples(st.one_of(control, st.text(max_size=20)), header_values)
epochish = st.tuples(
    st.just("scheduler-epoch"),
    st.one_of(
        st.integers().map(lambda i: str(i).encode()),
        st.floats(allow_nan=True, allow_infinity=True).map(lambda f: repr(f).encode()),
        st.decimals(allow_nan=True).map(lambda d: str(d).encode()),
        st.binary(max_size=30),
    ),
)


@given(
    key=st.one_of(st.none(), st.binary(max_size=40)),
    value=st.one_of(st.none(), st.binary(max_size=100)),
    headers=st.lists(st.one_of(any_header, epochish), max_size=8),
    timestamp=st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
def test_arbitrary_records_never_raise(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]], timestamp: int
) -> None:
    # The checked parser has no catch-all: an input that reaches no explicit check fails here.
    parsed = parse_record_checked(ConsumedRecord("t", 0, 0, timestamp, key, value, tuple(headers)))
    assert isinstance(parsed, Schedule | Cancel | Invalid)
    if isinstance(parsed, Invalid):
        assert parsed.reason
    if isinstance(parsed, Schedule):
        assert 0 <= parsed.due_ms <= MAX_EPOCH_MS


E, T, K = "scheduler-epoch", "scheduler-target-topic", "scheduler-target-key"
REASONS: list[tuple[bytes | None, tuple[tuple[str, bytes | None], ...], str]] = [
    (None, ((E, b"1"), (T, b"t")), "missing schedule id"),
    (b"\xff", ((E, b"1"), (T, b"t")), "schedule id (record key) is not valid UTF-8"),
    (b"id", ((E, b"1"), (E, b"2"), (T, b"t")), f"header {E} appears more than once"),
    (b"id", ((K, b"a"), (K, b"b"), (E, b"1"), (T, b"t")), f"header {K} appears more than once"),
    (b"id", ((T, b"t"),), f"missing header {E}"),
    (b"id", ((E, None), (T, b"t")), f"missing header {E}"),
    (b"id", ((E, b"\xff"), (T, b"t")), f"header {E} is not valid UTF-8"),
    (b"id", ((E, b" "), (T, b"t")), f"header {E} empty"),
    (b"id", ((E, b"inf"), (T, b"t")), f"header {E} not a finite number"),
    (b"id", ((E, b"1e9"), (T, b"t")), f"header {E} not a decimal number of seconds"),
    (b"id", ((E, b"-1"), (T, b"t")), f"header {E} negative"),
    (b"id", ((E, b"9" * 40), (T, b"t")), f"header {E} beyond year 9999"),
    (b"id", ((E, b"1"),), f"missing header {T}"),
    (b"id", ((E, b"1"), (T, b"\xff")), f"header {T} is not valid UTF-8"),
    (b"id", ((E, b"1"), (T, b"a b")), f"header {T} is not a valid topic name"),
]


@pytest.mark.parametrize(("key", "headers", "reason"), REASONS)
def test_each_reason_comes_from_its_own_check(
    key: bytes | None, headers: tuple[tuple[str, bytes | None], ...], reason: str
) -> None:
    parsed = parse_record_checked(ConsumedRecord("t", 0, 0, 0, key, b"v", headers))
    assert isinstance(parsed, Invalid)
    assert parsed.reason.startswith(reason), parsed.reason
    assert "unparseable" not in parsed.reason


def test_the_safety_net_dead_letters_a_parser_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(record: ConsumedRecord) -> Schedule:
        raise KeyError("bug")

    monkeypatch.setattr("delayline.contract.records.parse_record_checked", broken)
    parsed = parse_record(ConsumedRecord("t", 0, 5, 0, b"id", b"v", ()))
    assert isinstance(parsed, Invalid)
    assert parsed.reason == "unparseable record: KeyError"


fired_values = st.one_of(
    st.none(),
    st.binary(max_size=22),
    st.integers(min_value=0, max_value=10**20).map(lambda n: str(n).encode()),
)


@given(
    key=st.one_of(st.none(), st.binary(max_size=12), st.text(max_size=12).map(str.encode)),
    headers=st.lists(
        st.tuples(
            st.sampled_from(["delayline-fired-offset", "x", "delayline-copy-of"]), fired_values
        ),
        max_size=4,
    ),
)
def test_an_own_tombstone_is_told_exactly_as_every_parser_tells_it(
    key: bytes | None, headers: list[tuple[str, bytes | None]]
) -> None:
    """The watch skips delayline's own tombstones without parsing them: exactly those
    every contract's parser makes a cancel naming the offset that fired."""
    record = ConsumedRecord("t", 0, 5, 0, key, None, tuple(headers))
    for parser in PARSERS.values():
        parsed = parser(record)
        own = isinstance(parsed, Cancel) and parsed.fired_offset is not None
        assert is_own_tombstone(key, tuple(headers)) == own
