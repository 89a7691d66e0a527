"""The schedules-topic contract: every rejection has a reason, nothing raises."""

from __future__ import annotations

from typing import Any

import pytest

from delayline.contract import (
    ConsumedRecord,
    build_schedule,
    parse_record,
    render_delivery,
    render_schedule,
    render_tombstone,
)
from delayline.contract import headers as h
from delayline.contract.checks import ScheduleFields, schedule_fields
from delayline.contract.topics import target_topic_problem, topic_name_problem
from delayline.core.model import Cancel, Headers, Invalid, Schedule, SourceRef
from delayline.errors import InvalidScheduleError

GOOD: Headers = (
    ("scheduler-epoch", b"1893456000.250"),
    ("scheduler-target-topic", b"online-videos"),
    ("scheduler-target-key", b"vid1"),
    ("customer-header", b"dummy"),
)


def record(
    key: bytes | None = b"vid1-online", value: bytes | None = b"video 1", headers: Headers = GOOD
) -> ConsumedRecord:
    return ConsumedRecord("schedules", 2, 41, 1_607_918_336_000, key, value, headers)


def replace(name: str, value: bytes | None) -> Headers:
    return tuple((n, value if n == name else v) for n, v in GOOD)


def without(name: str) -> Headers:
    return tuple((n, v) for n, v in GOOD if n != name)


def test_parses_the_kafka_message_scheduler_example() -> None:
    parsed = parse_record(record())
    assert isinstance(parsed, Schedule)
    assert parsed.id == "vid1-online"
    assert parsed.due_ms == 1_893_456_000_250
    assert parsed.target_topic == "online-videos"
    assert parsed.target_key == b"vid1"
    assert parsed.payload == b"video 1"
    assert parsed.headers == GOOD
    assert parsed.source is not None
    assert (parsed.source.topic, parsed.source.partition, parsed.source.offset) == (
        "schedules",
        2,
        41,
    )


def test_target_key_is_optional_and_binary_keys_pass() -> None:
    parsed = parse_record(record(headers=without("scheduler-target-key")))
    assert isinstance(parsed, Schedule)
    assert parsed.target_key is None
    binary = parse_record(record(headers=replace("scheduler-target-key", b"\xff\x00")))
    assert isinstance(binary, Schedule)
    assert binary.target_key == b"\xff\x00"


def test_null_value_is_a_cancel_whatever_the_headers() -> None:
    assert parse_record(record(value=None)) == Cancel("vid1-online")
    assert parse_record(record(value=None, headers=())) == Cancel("vid1-online")


def test_empty_value_is_a_schedule_not_a_cancel() -> None:
    parsed = parse_record(record(value=b""))
    assert isinstance(parsed, Schedule)
    assert parsed.payload == b""


@pytest.mark.parametrize(
    ("rec", "reason"),
    [
        (record(key=None), "missing schedule id"),
        (record(key=b""), "missing schedule id"),
        (record(key=b"\xff\xfe"), "schedule id (record key) is not valid UTF-8"),
        (
            record(headers=without("scheduler-target-topic")),
            "missing header scheduler-target-topic",
        ),
        (record(headers=replace("scheduler-target-topic", b"")), "not a valid topic name: empty"),
        (
            record(headers=replace("scheduler-target-topic", None)),
            "missing header scheduler-target-topic",
        ),
        (
            record(headers=replace("scheduler-target-topic", b"bad topic!")),
            "not a valid topic name",
        ),
        (record(headers=replace("scheduler-target-topic", b"..")), "not a valid topic name"),
        (record(headers=replace("scheduler-target-topic", b"a" * 250)), "longer than 249"),
        (
            record(headers=replace("scheduler-target-topic", b"\xc3\x28")),
            "scheduler-target-topic is not valid UTF-8",
        ),
        (record(headers=without("scheduler-epoch")), "missing header scheduler-epoch"),
        (record(headers=replace("scheduler-epoch", None)), "missing header scheduler-epoch"),
        (
            record(headers=replace("scheduler-epoch", b"soon")),
            "scheduler-epoch not a decimal number",
        ),
        (record(headers=replace("scheduler-epoch", b"-5")), "scheduler-epoch negative"),
        (record(headers=replace("scheduler-epoch", b"nan")), "scheduler-epoch not a finite number"),
        (
            record(headers=replace("scheduler-epoch", b"Infinity")),
            "scheduler-epoch not a finite number",
        ),
        (record(headers=replace("scheduler-epoch", b"253402300800")), "beyond year 9999"),
        (record(headers=replace("scheduler-epoch", b"\xff")), "scheduler-epoch is not valid UTF-8"),
        (
            record(headers=(*GOOD, ("scheduler-epoch", b"1"))),
            "scheduler-epoch appears more than once",
        ),
        (
            record(headers=(*GOOD, ("scheduler-target-topic", b"x"))),
            "scheduler-target-topic appears more",
        ),
        (
            record(headers=(*GOOD, ("scheduler-target-key", b"x"))),
            "scheduler-target-key appears more",
        ),
    ],
)
def test_rejects_with_a_reason(rec: ConsumedRecord, reason: str) -> None:
    parsed = parse_record(rec)
    assert isinstance(parsed, Invalid), parsed
    assert reason in parsed.reason
    assert parsed.source == rec.source


def test_other_headers_pass_through_even_when_repeated_or_null() -> None:
    headers = (*GOOD, ("trace", b"1"), ("trace", b"2"), ("empty", None))
    parsed = parse_record(record(headers=headers))
    assert isinstance(parsed, Schedule)
    assert parsed.headers == headers


def test_delivery_carries_every_input_header_plus_three() -> None:
    parsed = parse_record(record())
    assert isinstance(parsed, Schedule)
    out = render_delivery(parsed)
    assert (out.topic, out.key, out.value, out.partition) == (
        "online-videos",
        b"vid1",
        b"video 1",
        None,
    )
    assert out.headers == (
        *GOOD,
        ("scheduler-timestamp", b"1607918336"),
        ("scheduler-key", b"vid1-online"),
        ("scheduler-topic", b"schedules"),
    )


def test_tombstone_goes_to_the_exact_source_partition() -> None:
    parsed = parse_record(record())
    assert isinstance(parsed, Schedule)
    tomb = render_tombstone(parsed)
    assert (tomb.topic, tomb.partition, tomb.key, tomb.value) == (
        "schedules",
        2,
        b"vid1-online",
        None,
    )


def test_delivery_and_tombstone_need_a_source() -> None:
    schedule = build_schedule("a", b"p", "t", 5)
    with pytest.raises(ValueError, match="no source"):
        render_delivery(schedule)
    with pytest.raises(ValueError, match="no source"):
        render_tombstone(schedule)


def test_build_schedule_writes_control_headers_first() -> None:
    schedule = build_schedule(
        "id-1", b"p", "target", 1_893_456_000_250, target_key=b"k", extra_headers=[("x", b"y")]
    )
    out = render_schedule(schedule, "schedules", 3)
    assert out.headers == (
        ("scheduler-epoch", b"1893456000.250"),
        ("scheduler-target-topic", b"target"),
        ("scheduler-target-key", b"k"),
        ("x", b"y"),
    )
    assert (out.topic, out.partition, out.key, out.value) == ("schedules", 3, b"id-1", b"p")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schedule_id": ""}, "must not be empty"),
        ({"target_topic": "no spaces"}, "not a valid topic name"),
        ({"due_ms": -1}, "before 1970"),
        ({"due_ms": 10**16}, "beyond year 9999"),
        ({"extra_headers": [("scheduler-epoch", b"1")]}, "reserved"),
        ({"extra_headers": [("scheduler-key", b"1")]}, "reserved"),
        ({"extra_headers": [("delayline-catch-up", None)]}, "reserved"),
    ],
)
def test_build_schedule_refuses_what_the_reader_would_reject(
    kwargs: dict[str, Any], message: str
) -> None:
    args: dict[str, Any] = {"schedule_id": "a", "payload": b"p", "target_topic": "t", "due_ms": 1}
    args.update(kwargs)
    with pytest.raises(InvalidScheduleError, match=message):
        build_schedule(**args)


@pytest.mark.parametrize("topic", [b"__consumer_offsets", b"__transaction_state", b"__x"])
def test_internal_target_topic_is_invalid(topic: bytes) -> None:
    parsed = parse_record(record(headers=replace("scheduler-target-topic", topic)))
    assert isinstance(parsed, Invalid)
    assert "internal" in parsed.reason
    assert topic.decode() in parsed.reason
    assert parsed.reason.startswith("header scheduler-target-topic ")


@pytest.mark.parametrize("topic", ["_single", "a__b", "x__"])
def test_topics_with_underscores_elsewhere_are_targets(topic: str) -> None:
    parsed = parse_record(record(headers=replace("scheduler-target-topic", topic.encode())))
    assert isinstance(parsed, Schedule)
    assert build_schedule("a", b"p", topic, 1).target_topic == topic


def test_build_schedule_refuses_an_internal_target_topic() -> None:
    with pytest.raises(InvalidScheduleError, match=r"internal.*__consumer_offsets"):
        build_schedule("a", b"p", "__consumer_offsets", 1)


def test_target_topic_problem_keeps_the_topic_name_rules() -> None:
    assert target_topic_problem("orders") is None
    assert target_topic_problem("a b") == f"not a valid topic name: {topic_name_problem('a b')}"
    # delayline's own topic names may still start with "__" (only targets may not).
    assert topic_name_problem("__delayline_internal") is None
    problem = target_topic_problem("__consumer_offsets")
    assert problem is not None
    assert "internal" in problem


@pytest.mark.parametrize(
    ("extra", "version"),
    [
        ((), 50),
        (((h.COPY_OF, b"7"),), 7),
        (((h.COPY_OF, b"7"), (h.COPY_OF, b"3")), 7),  # the first copy-of header only
        (((h.COPY_OF, None), (h.COPY_OF, b"3")), 50),  # the first is null: none named
        (((h.COPY_OF, b"x7"), (h.COPY_OF, b"3")), 50),  # the first is no offset
        (((h.COPY_OF, b"50"),), 50),  # not earlier than its own place
        (((h.COPY_OF, b"51"),), 50),
        (((h.COPY_OF, b"1" * 19),), 50),  # over 18 digits
        (((h.COPY_OF, b"0"),), 0),
    ],
)
def test_a_copy_holds_the_version_its_first_copy_of_header_names_if_earlier(
    extra: tuple[tuple[str, bytes | None], ...], version: int
) -> None:
    """Where a schedule sits among its id's versions: its own offset, or for a copy the
    earlier offset its first copy-of header names. The parser and the classifying reader
    (the committer's watch) agree, and the copy-of header may come anywhere."""
    control = ((h.EPOCH, b"20"), (h.TARGET_TOPIC, b"out"))
    for headers in ((*control, *extra), (*extra, *control)):
        record = ConsumedRecord("schedules", 3, 50, 1_000, b"a", b"v", headers)
        parsed = parse_record(record)
        assert isinstance(parsed, Schedule)
        assert parsed.source == SourceRef("schedules", 3, version, 1_000)
        fields = schedule_fields(record)
        assert isinstance(fields, ScheduleFields)
        assert fields.version_offset == version


def test_a_duplicate_control_header_is_invalid_wherever_the_copy_of_header_is() -> None:
    for headers in (
        ((h.COPY_OF, b"3"), (h.EPOCH, b"20"), (h.EPOCH, b"21"), (h.TARGET_TOPIC, b"out")),
        ((h.EPOCH, b"20"), (h.TARGET_TOPIC, b"out"), (h.EPOCH, b"21"), (h.COPY_OF, b"3")),
    ):
        record = ConsumedRecord("schedules", 3, 50, 1_000, b"a", b"v", headers)
        for parsed in (parse_record(record), schedule_fields(record)):
            assert parsed == Invalid(f"header {h.EPOCH} appears more than once", record.source)
