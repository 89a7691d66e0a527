"""The committer's watch: which later records withhold a handed-over version (pure)."""

from __future__ import annotations

from pathlib import Path

from delayline.contract import ConsumedRecord
from delayline.contract import headers as h
from delayline.contract.contracts import InputParser
from delayline.contract.topology import Topology
from delayline.core.model import Schedule, SourceRef
from delayline.fire.due_plan import DuePlan, Group, InLanes, Pending
from delayline.fire.inflight import read_inflight, render_inflight
from delayline.fire.watch import (
    CANCEL,
    UPDATE,
    Later,
    LaterRecords,
    checkpoint_positions,
    has_read,
    latest_logged_batch,
    what_it_names,
)

TOPIC = "schedules"
PARSE = InputParser(Topology(schedules_topics=(TOPIC,)))
VERSION = Schedule("a", 10_000, "target", None, b"v1", (), SourceRef(TOPIC, 0, 5, 1_000))


def record(offset: int, value: bytes | None = b"v2", *, partition: int = 0, ts: int = 2_000,
           headers: tuple[tuple[str, bytes | None], ...] | None = None) -> ConsumedRecord:  # fmt: skip
    if headers is None:
        headers = () if value is None else ((h.EPOCH, b"20"), (h.TARGET_TOPIC, b"target"))
    return ConsumedRecord(TOPIC, partition, offset, ts, b"a", value, headers)


def ends(*records: ConsumedRecord, read_ms: int = 0) -> str | None:
    later = LaterRecords(PARSE, memory_ms=30_000)
    for r in records:
        later.note(TOPIC, "a", Later(r, read_ms))
    return later.ends(VERSION)


def test_a_later_cancel_or_valid_version_ends_the_handed_over_one() -> None:
    assert ends(record(6, None)) == CANCEL
    assert ends(record(6)) == UPDATE
    assert ends(record(3, None, partition=1, ts=5_000)) == CANCEL, "newer by time, elsewhere"


def test_what_ends_nothing() -> None:
    assert ends(record(4, None)) is None, "older"
    assert ends(record(5)) is None, "the version itself, read again"
    assert ends(record(7, b"bad", headers=())) is None, "invalid"
    own = record(7, None, headers=((h.FIRED_OFFSET, b"5"),))
    assert ends(own) is None, "delayline's own tombstone of the hand-over"
    copy = record(8, headers=((h.EPOCH, b"20"), (h.TARGET_TOPIC, b"t"), (h.COPY_OF, b"5")))
    assert ends(copy) is None, "a copy of the version itself"
    assert ends(record(3, None, partition=1, ts=500)) is None, "older by time, elsewhere"


def test_any_of_several_records_ends_it() -> None:
    assert ends(record(6, b"bad", headers=()), record(7, None)) == CANCEL


def test_records_are_forgotten_after_the_memory() -> None:
    later = LaterRecords(PARSE, memory_ms=30_000)
    later.note(TOPIC, "a", Later(record(6, None), 1_000))
    later.note(TOPIC, "a", Later(record(7), 20_000))
    later.expire(31_001)
    assert later.ends(VERSION) == UPDATE
    later.expire(50_001)
    assert later.ends(VERSION) is None
    assert len(later) == 0


def test_the_plan_finds_pending_versions_by_id_until_taken() -> None:
    plan = DuePlan()
    handed = render_inflight(VERSION, "inflight")
    as_read = ConsumedRecord("inflight", 0, 0, 9_000, handed.key, handed.value, handed.headers)
    plan.read(as_read, read_inflight(as_read), now_ms=9_000)
    (new,) = plan.take_new()
    assert plan.take_new() == []
    assert plan.pending_of(TOPIC, "a") == [new]
    assert plan.earliest_handed_ms() == 9_000
    assert plan.take(10_000, 5) is not None
    assert plan.pending_of(TOPIC, "a") == []


def test_positions_come_from_the_checkpoints_offsets_log(tmp_path: Path) -> None:
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
    (offsets / "4").write_text(f'v1\n{meta}\n{{"s":{{"0":10,"1":7}},"wake":{{"0":3}}}}\n')
    (offsets / "6").write_text(f'v1\n{meta}\n{{"s":{{"0":12,"1":9}}}}\n{{"buckets":[1,2]}}\n')
    (offsets / ".6.tmp").write_text("partial")
    assert latest_logged_batch(tmp_path) == 6
    assert checkpoint_positions(tmp_path, 4) == {("s", 0): 10, ("s", 1): 7, ("wake", 0): 3}
    assert checkpoint_positions(tmp_path, 5) == {("s", 0): 12, ("s", 1): 9}, "the next logged"
    assert checkpoint_positions(tmp_path, 7) == {}
    assert latest_logged_batch(tmp_path / "none") is None


def test_what_a_record_names_and_what_is_not_remembered() -> None:
    """A keyed record names its key unparsed; a plain cancel names its id; delayline's
    own tombstone, a record without an id, and an invalid payload record name nothing."""
    assert what_it_names(record(6), True, PARSE) == ("a", None)
    found = what_it_names(record(6, None), True, PARSE)
    assert found is not None
    assert found[0] == "a"
    assert ends(record(6, None)) == CANCEL
    own = record(6, None, headers=((h.FIRED_OFFSET, b"5"),))
    assert what_it_names(own, True, PARSE) is None
    assert what_it_names(own, False, PARSE) is None
    no_key = ConsumedRecord(TOPIC, 0, 7, 2_000, None, b"v", ())
    assert what_it_names(no_key, True, PARSE) is None
    bad_utf8 = ConsumedRecord(TOPIC, 0, 7, 2_000, b"\xff", b"v", ())
    assert what_it_names(bad_utf8, True, PARSE) is None
    invalid = record(8, headers=())  # no target topic: invalid
    assert what_it_names(invalid, False, PARSE) is None
    parsed = what_it_names(record(9), False, PARSE)
    assert parsed is not None
    assert parsed[0] == "a"
    assert isinstance(parsed[1], Schedule)


def pending(schedule_id: str, offset: int) -> Pending:
    version = Schedule(
        schedule_id, 10_000, "target", None, b"v", (), SourceRef(TOPIC, 0, offset, 1)
    )
    return Pending(ConsumedRecord("inflight", 0, offset, 1, schedule_id.encode(), b"", ()), version)


def test_groups_in_lanes_are_found_by_id_until_reported() -> None:
    first, second, again = pending("a", 1), pending("b", 2), pending("a", 3)
    lanes = InLanes()
    lanes.append(Group((first, second), 10_000))
    lanes.append(Group((again,), 10_000))
    assert len(lanes) == 2
    assert lanes.of(TOPIC, "a") == [first, again]
    assert lanes.of("other", "a") == []
    assert lanes.popleft().items == (first, second)
    assert lanes.of(TOPIC, "a") == [again]
    assert lanes.of(TOPIC, "b") == []
    lanes.clear()
    assert len(lanes) == 0
    assert lanes.of(TOPIC, "a") == []


def test_read_to_the_ends_only_when_every_partition_is_past_its_end() -> None:
    ends = {(TOPIC, 0): 5, (TOPIC, 1): 0}
    assert has_read({(TOPIC, 0): 5}, ends)  # an empty partition needs nothing read
    assert has_read({(TOPIC, 0): 7, (TOPIC, 1): 2}, ends)
    assert not has_read({(TOPIC, 0): 4, (TOPIC, 1): 9}, ends)
    assert not has_read({}, ends)
    assert has_read({}, {})
