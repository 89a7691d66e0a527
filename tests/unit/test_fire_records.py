"""What the fire stage writes for each event, and the codecs it relies on."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.contract import (
    ConsumedRecord,
    parse_record,
    render_dead_letter,
    render_delivery,
    render_history,
    render_tombstone,
)
from delayline.contract import events as r
from delayline.contract import headers as h
from delayline.contract.codec import decode_headers, encode_headers
from delayline.contract.topology import Topology
from delayline.core.model import Cancel, Schedule, SourceRef
from delayline.fire.partition import to_records
from delayline.pipeline.config import PipelineConfig

SOURCE = SourceRef("schedules", 2, 41, 1_607_918_336_000)
SCHEDULE = Schedule(
    "vid1-online", 1_893_456_000_000, "online-videos", b"vid1", b"video 1",
    (("scheduler-epoch", b"1893456000"), ("scheduler-target-topic", b"online-videos"), ("x", None)),
    SOURCE,
)  # fmt: skip


@given(
    st.lists(
        st.tuples(st.text(max_size=30), st.one_of(st.none(), st.binary(max_size=50))), max_size=10
    )
)
def test_header_codec_round_trips(headers: list[tuple[str, bytes | None]]) -> None:
    assert decode_headers(encode_headers(tuple(headers))) == tuple(headers)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x02",
        encode_headers((("a", b"bc"),))[:-1],  # value cut short
        b"\x01\x00\x00",  # name length cut short
        b"\x01\x00\x00\x00\x01a\x00\x00",  # value length cut short
        b"\x01\x00\x00\x00\x09a",  # name longer than the data
        b"\x01\xff\xff\xff\xffa",  # negative name length
    ],
)
def test_header_codec_rejects_unknown_or_truncated(data: bytes) -> None:
    with pytest.raises(ValueError, match=r"version|truncated"):
        decode_headers(data)


@given(st.binary(max_size=60))
def test_header_codec_raises_only_value_error_on_any_bytes(data: bytes) -> None:
    """Its documented error and no other (a truncated length raised struct.error)."""
    with contextlib.suppress(ValueError):
        decode_headers(b"\x01" + data)


def test_tombstone_names_the_fired_offset_and_parses_back() -> None:
    tomb = render_tombstone(SCHEDULE)
    assert tomb.headers == (("delayline-fired-offset", b"41"),)
    read = parse_record(ConsumedRecord("schedules", 2, 50, 0, tomb.key, tomb.value, tomb.headers))
    assert read == Cancel("vid1-online", fired_offset=41)
    junk = ConsumedRecord("s", 0, 1, 0, b"a", None, (("delayline-fired-offset", b"x"),))
    assert parse_record(junk) == Cancel("a", fired_offset=None)


def test_dead_letter_keeps_the_record_and_adds_reason_and_source() -> None:
    record = ConsumedRecord("schedules", 1, 7, 0, b"k", b"v", (("a", b"1"),))
    dead = render_dead_letter(record, "missing header scheduler-epoch", "dlq")
    assert (dead.topic, dead.key, dead.value, dead.partition) == ("dlq", b"k", b"v", None)
    assert dead.headers == (
        ("a", b"1"),
        ("delayline-error", b"missing header scheduler-epoch"),
        ("delayline-source", b"schedules/1/7"),
    )


def test_fire_event_becomes_delivery_tombstone_and_history() -> None:
    event = r.schedule_event(r.Kind.RAISE, SCHEDULE, at_ms=1)
    config = PipelineConfig(Topology(history_topic="hist", dead_letter_topic="dlq"))
    delivery, tomb, history = to_records(event, config)
    assert (delivery.topic, delivery.key, delivery.value) == ("online-videos", b"vid1", b"video 1")
    assert delivery.headers[:3] == SCHEDULE.headers
    assert dict(delivery.headers[3:]) == {
        "scheduler-timestamp": b"1607918336",
        "scheduler-key": b"vid1-online",
        "scheduler-topic": b"schedules",
    }
    assert (tomb.topic, tomb.partition, tomb.value) == ("schedules", 2, None)
    assert (history.topic, history.key, history.headers) == (
        "hist",
        b"vid1-online",
        (
            *delivery.headers,
            ("delayline-source", b"schedules/2/41"),
            ("delayline-due", b"1893456000"),
            ("delayline-target-topic", b"online-videos"),
        ),
    )
    assert len(to_records(event, PipelineConfig(Topology(history_topic=None)))) == 2


def test_expired_schedule_is_dead_lettered_and_tombstoned() -> None:
    event = r.schedule_event(r.Kind.DEAD, SCHEDULE, at_ms=1, reason="expired")
    dead, tomb = to_records(event, PipelineConfig(Topology(dead_letter_topic="dlq")))
    assert (dead.topic, dead.key, dead.value) == ("dlq", b"vid1-online", b"video 1")
    assert dict(dead.headers)["delayline-error"] == b"expired"
    assert dict(dead.headers)["delayline-source"] == b"schedules/2/41"
    assert (tomb.topic, tomb.partition) == ("schedules", 2)


def test_invalid_record_is_only_dead_lettered_and_bookkeeping_writes_nothing() -> None:
    record = ConsumedRecord("schedules", 0, 3, 0, b"k", b"v", ())
    (dead,) = to_records(r.record_event(r.Kind.DEAD, record, 1, "bad"), PipelineConfig())
    assert dead.topic == "delayline-dead-letters"
    for kind in (
        r.Kind.PLANNED,
        r.Kind.UPDATED,
        r.Kind.CANCELLED,
        r.Kind.UNKNOWN_CANCEL,
        r.Kind.OWN_TOMBSTONE,
        r.Kind.STALE,
    ):
        assert to_records(r.record_event(kind, record, 1, sid="k"), PipelineConfig()) == []


def test_rewrite_appends_the_held_version_as_it_was() -> None:
    (again,) = to_records(r.schedule_event(r.Kind.REWRITE, SCHEDULE, at_ms=1), PipelineConfig())
    assert (again.topic, again.partition, again.key, again.value) == (
        "schedules",
        2,
        b"vid1-online",
        b"video 1",
    )
    assert again.headers == (*SCHEDULE.headers, (h.COPY_OF, str(SOURCE.offset).encode()))
    assert again.timestamp_ms == SOURCE.timestamp_ms


def test_a_rewrite_read_back_is_its_original_and_delivers_without_the_copy_header() -> None:
    """The copy parses to the version it copies (same place in the order), a copy of
    the copy names the same original, and the delivery carries no copy-of header."""
    (again,) = to_records(r.schedule_event(r.Kind.REWRITE, SCHEDULE, at_ms=1), PipelineConfig())
    read = ConsumedRecord(again.topic, 2, SOURCE.offset + 9, SOURCE.timestamp_ms, again.key,
                          again.value, again.headers)  # fmt: skip
    parsed = parse_record(read)
    assert isinstance(parsed, Schedule)
    assert parsed.source == SOURCE
    (twice,) = to_records(r.schedule_event(r.Kind.REWRITE, parsed, at_ms=2), PipelineConfig())
    assert twice.headers == again.headers
    assert h.COPY_OF not in dict(render_delivery(parsed).headers)
    assert h.COPY_OF not in dict(render_history(parsed, "history").headers)


def test_a_rewrite_is_written_only_to_compacted_topics_a_retire_to_any() -> None:
    """A rewrite writes the header contract's record again, for compaction: in an
    envelope topic (not compacted) it would be dead-lettered as a malformed envelope. A
    retire is delayline's own tombstone, which every contract reads as such."""
    config = PipelineConfig(Topology(envelope_topics=("env",), timer_request_topics=("timers",)))
    assert to_records(r.schedule_event(r.Kind.REWRITE, SCHEDULE, at_ms=1), config)
    for topic in ("env", "timers"):
        moved = Schedule(**{**_fields(SCHEDULE), "source": SourceRef(topic, 2, 41, 0)})
        assert to_records(r.schedule_event(r.Kind.REWRITE, moved, at_ms=1), config) == []
        (tomb,) = to_records(r.schedule_event(r.Kind.RETIRE, moved, at_ms=1), config)
        assert (tomb.topic, tomb.partition, tomb.value) == (topic, 2, None)
        assert tomb.headers == (("delayline-fired-offset", b"41"),)


def test_an_envelope_dead_letter_has_the_envelope_parsers_reason() -> None:
    config = PipelineConfig(Topology(envelope_topics=("env",), dead_letter_topic="dlq"))
    bad = ConsumedRecord(
        "env", 0, 3, 0, None, b'{"topic":"t","message":"m"}', (("CALLER_SERVICE", b"s"),)
    )
    (dead,) = to_records(r.record_event(r.Kind.DEAD, bad, at_ms=1), config)
    assert (dead.topic, dead.value) == ("dlq", bad.value)
    assert dict(dead.headers)["delayline-error"] == b"envelope has neither 'countdown' nor 'at'"


def _fields(schedule: Schedule) -> dict[str, Any]:
    return {name: getattr(schedule, name) for name in Schedule.__slots__}
