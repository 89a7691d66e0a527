"""The committer's watch: which later records withhold a handed-over version (pure)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Message

from delayline.committer import later_runs
from delayline.committer.checkpoint_log import checkpoint_positions, latest_logged_batch
from delayline.committer.due_plan import DuePlan
from delayline.committer.later import CANCEL, UPDATE, Later, LaterRecords, later_of
from delayline.committer.later_columns import LaterColumns
from delayline.committer.ownership import InLanes
from delayline.committer.pending import Group, Pending
from delayline.committer.read_barrier import has_read
from delayline.committer.rereads import Rereads
from delayline.committer.reviews import ReviewCounts
from delayline.committer.watch import InputWatch
from delayline.contract import ConsumedRecord, OutgoingRecord
from delayline.contract import headers as h
from delayline.contract.contracts import InputParser
from delayline.contract.topology import Topology
from delayline.core.model import Parsed, Schedule, SourceRef
from delayline.fire.inflight import render_inflight
from tests.inflight import read_into

TOPIC = "schedules"
PARSE = InputParser(Topology(schedules_topics=(TOPIC,)))
VERSION = Schedule("a", 10_000, "target", None, b"v1", (), SourceRef(TOPIC, 0, 5, 1_000))


def record(offset: int, value: bytes | None = b"v2", *, partition: int = 0, ts: int = 2_000,
           headers: tuple[tuple[str, bytes | None], ...] | None = None) -> ConsumedRecord:  # fmt: skip
    if headers is None:
        headers = () if value is None else ((h.EPOCH, b"20"), (h.TARGET_TOPIC, b"target"))
    return ConsumedRecord(TOPIC, partition, offset, ts, b"a", value, headers)


HOT: list[int] = []
"""The records kept as objects in the test running (see :func:`layout`)."""


@pytest.fixture(autouse=True, params=["objects", "columns", "files"])
def layout(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test of :class:`LaterRecords` runs three times: with its records kept as
    objects; with each moved to columns as it is noted (``hot_records=0``; runs of at
    most 500 rows, so many of them); and the same with every array in a file, handed
    back after each call, found through fences of 4 rows."""
    if request.param != "objects":
        monkeypatch.setattr(later_runs, "RUN_ROWS", 500)
    if request.param == "files":
        monkeypatch.setattr(later_runs, "MAPPED_BYTES", 1)
        monkeypatch.setattr(later_runs, "FENCE", 4)
    HOT.append(1_000 if request.param == "objects" else 0)
    yield
    HOT.pop()


def memory(memory_ms: int = 30_000) -> LaterRecords:
    return LaterRecords(memory_ms=memory_ms, hot_records=HOT[-1], columns_every_ms=0)


def ends(*records: ConsumedRecord, read_ms: int = 0) -> str | None:
    later = memory()
    for r in records:
        remember(later, r, read_ms)
    return later.ends(VERSION)


def remember(later: LaterRecords, r: ConsumedRecord, read_ms: int, *, again: bool = False) -> None:
    found = later_of(r, PARSE, read_ms)
    if found is not None:
        if again:
            later.note_again([(TOPIC, *found)])
        else:
            later.note(TOPIC, *found)


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


def test_the_first_read_that_ends_it_says_how() -> None:
    assert ends(record(4, None), record(6), record(7, None)) == UPDATE
    assert ends(record(7, None), record(6)) == CANCEL


def test_the_same_id_in_another_topic_ends_nothing() -> None:
    later = memory()
    found = later_of(record(6, None), PARSE, 0)
    assert found is not None
    later.note("other", *found)
    assert later.ends(VERSION) is None
    later.note(TOPIC, *found)
    assert later.ends(VERSION) == CANCEL


def test_columns_answer_as_objects_do_over_many_records() -> None:
    """Thousands of records over three topics and four partitions, noted and forgotten
    by time in steps: the columns (moved in batches of every size, merged) answer every
    version as records kept as objects do, and forget the same records."""
    rng = random.Random(7)
    objects = LaterRecords(memory_ms=1_000, hot_records=10**9)
    mixed = LaterRecords(memory_ms=1_000, hot_records=HOT[-1] or 300, columns_every_ms=0)
    for step, noted in enumerate(random_records(rng, 40)):
        for topic, sid, later in noted:
            objects.note(topic, sid, later)
            mixed.note(topic, sid, later)
        objects.expire(step * 100)
        mixed.expire(step * 100)
        assert len(mixed) == len(objects)
        versions = list(random_versions(rng, 200))
        for version in versions:
            assert mixed.ends(version) == objects.ends(version), (step, version)
        assert mixed.ends_each(versions) == [objects.ends(v) for v in versions]
    mixed.expire(10**6)
    assert len(mixed) == 0


def test_columns_keep_every_record_the_pipeline_has_not_read() -> None:
    """The same, forgotten as the pipeline reads: every record the pipeline has not read
    (or read within the memory) still ends what it ends, and the columns never end a
    version records kept as objects do not (they may forget sooner: each record on its
    own, not in the order read)."""
    rng = random.Random(11)
    objects = LaterRecords(memory_ms=1_000, hot_records=10**9)
    mixed = LaterRecords(memory_ms=1_000, hot_records=HOT[-1] or 300, columns_every_ms=0)
    taken: dict[tuple[str, int], int] = {}
    everything: list[tuple[str, str, Later]] = []
    for step, noted in enumerate(random_records(rng, 40)):
        for topic, sid, later in noted:
            objects.note(topic, sid, later)
            mixed.note(topic, sid, later)
        everything += noted
        for topic, _, later in noted:  # the pipeline 1-4 s behind
            place = (topic, later.partition)
            taken[place] = max(taken.get(place, 0), later.offset - rng.randrange(200, 700))
        now = step * 100
        objects.expire(now, taken)
        mixed.expire(now, taken)
        for topic, sid, later in rng.sample(everything, min(len(everything), 400)):
            kept = later.offset >= taken.get((topic, later.partition), 0)
            if (kept or later.read_ms >= now - 1_000) and later.version_offset > 0:
                source = SourceRef(
                    topic, later.partition, later.version_offset - 1, later.version_timestamp_ms
                )
                assert mixed.ends(replace(VERSION, id=sid, source=source)) is not None
        for version in random_versions(rng, 200):
            if mixed.ends(version) is not None:
                assert objects.ends(version) is not None, (step, version)


def random_records(rng: random.Random, steps: int) -> Iterator[list[tuple[str, str, Later]]]:
    """``steps`` batches of records (topic, id, what it ends), each read 100 ms after the
    one before."""
    offsets: dict[tuple[str, int], int] = {}
    for step in range(steps):
        noted = []
        for _ in range(rng.randrange(1, 400)):
            topic, partition = rng.choice(("s0", "s1", "s2")), rng.randrange(4)
            offset = offsets[(topic, partition)] = offsets.get((topic, partition), -1) + 1
            at = offset if rng.random() < 0.9 else rng.randrange(offset + 1)  # a copy
            kind = rng.choice((CANCEL, UPDATE))
            later = Later(kind, partition, at, rng.randrange(10_000), offset, step * 100)
            noted.append((topic, f"id-{rng.randrange(5_000)}", later))
        yield noted


def random_versions(rng: random.Random, count: int) -> Iterator[Schedule]:
    for _ in range(count):
        topic = rng.choice(("s0", "s1", "s2"))
        source = SourceRef(topic, rng.randrange(4), rng.randrange(2_000), rng.randrange(10_000))
        yield replace(VERSION, id=f"id-{rng.randrange(5_200)}", source=source)


def test_records_are_forgotten_after_the_memory() -> None:
    later = memory()
    remember(later, record(6, None), 1_000)
    remember(later, record(7), 20_000)
    later.expire(31_001)
    assert later.ends(VERSION) == UPDATE
    later.expire(50_001)
    assert later.ends(VERSION) is None
    assert len(later) == 0


def test_what_the_pipeline_has_not_read_is_kept_past_the_memory() -> None:
    """Known, the pipeline's progress keeps a record until the pipeline has read it,
    however long ago it was read."""
    later = memory()
    remember(later, record(6, None), 1_000)  # ends VERSION
    remember(later, record(7, None, partition=1, ts=500), 2_000)  # older by time: ends nothing
    later.expire(31_500, {(TOPIC, 0): 6, (TOPIC, 1): 7})
    assert later.ends(VERSION) == CANCEL, "offset 6 of partition 0 is not read yet: kept"
    assert len(later) == 2
    later.expire(31_500, {(TOPIC, 1): 7})
    assert later.ends(VERSION) == CANCEL, "a partition the pipeline has not read: kept"
    later.expire(31_500, {(TOPIC, 0): 7, (TOPIC, 1): 7})
    assert later.ends(VERSION) is None, "read by the pipeline and older than the memory"
    assert len(later) == 1, "offset 7 of partition 1 is not read yet"
    later.expire(31_999, {(TOPIC, 0): 7, (TOPIC, 1): 8})
    assert len(later) == 1, "read, but within the memory"
    later.expire(32_001, {(TOPIC, 0): 7, (TOPIC, 1): 8})
    assert len(later) == 0
    copy = record(9, headers=((h.EPOCH, b"20"), (h.TARGET_TOPIC, b"t"), (h.COPY_OF, b"5")))
    remember(later, copy, 0)
    later.expire(100_000, {(TOPIC, 0): 9})
    assert len(later) == 1, "a copy is kept by its own offset, not the one it copies"
    later.expire(100_000, None)
    assert len(later) == 0, "the pipeline's progress unknown: the time alone decides"


def test_the_plan_finds_pending_versions_by_id_until_taken() -> None:
    plan = DuePlan()
    handed = render_inflight(VERSION, "inflight")
    as_read = ConsumedRecord("inflight", 0, 0, 9_000, handed.key, handed.value, handed.headers)
    read_into(plan, as_read, now_ms=9_000)
    (new,) = plan.take_new()
    assert plan.take_new() == []
    assert plan.pending_of(TOPIC, "a") == [new]
    assert plan.earliest_handed_ms() == 9_000
    assert plan.take(10_000, 5) is not None
    assert plan.pending_of(TOPIC, "a") == []


def test_the_earliest_hand_over_of_some_partitions_only() -> None:
    """A committer taking a partition over reads the input again for that partition's
    pending schedules only: from the batch and the time of their earliest hand-over."""
    plan = DuePlan()
    for partition, offset, at_ms, batch in ((0, 0, 5_000, 3), (1, 0, 9_000, 7), (1, 1, 8_000, 8)):
        handed = render_inflight(replace(VERSION, id=f"s{partition}{offset}"), "inflight", batch)
        record = ConsumedRecord(
            "inflight", partition, offset, at_ms, handed.key, handed.value, handed.headers
        )
        read_into(plan, record, now_ms=at_ms)
    assert (plan.earliest_handed_batch(), plan.earliest_handed_ms()) == (3, 5_000)
    assert (plan.earliest_handed_batch([1]), plan.earliest_handed_ms([1])) == (7, 8_000)
    assert (plan.earliest_handed_batch([2]), plan.earliest_handed_ms([2])) == (None, None)


def test_a_record_read_again_is_remembered_once() -> None:
    later = memory()
    remember(later, record(6, None), 1_000)
    remember(later, record(6, None), 50_000, again=True)  # read again after a take-over
    remember(later, record(7), 50_000)
    assert later.ends(VERSION) == CANCEL
    later.expire(31_001)
    assert later.ends(VERSION) == UPDATE, "offset 6 is forgotten as first read; 7 is kept"
    later.expire(80_001)
    assert len(later) == 0


def test_it_tells_up_to_where_each_partition_has_forgotten_records() -> None:
    """A re-read after a take-over reads no further than that: from there on, what was
    read is remembered."""
    later = memory()
    for offset, partition, read_ms in ((6, 0, 1_000), (3, 1, 1_000), (7, 0, 2_000), (9, 0, 50_000)):
        remember(later, record(offset, None, partition=partition), read_ms)
    assert later.forgotten == {}
    later.expire(31_500)
    assert later.forgotten == {(TOPIC, 0): 7, (TOPIC, 1): 4}, "7 was read 29.5 s before"
    later.expire(40_000, {(TOPIC, 0): 7})
    assert later.forgotten == {(TOPIC, 0): 7, (TOPIC, 1): 4}, "7 is not taken: kept"
    later.expire(40_000, {(TOPIC, 0): 8})
    assert later.forgotten == {(TOPIC, 0): 8, (TOPIC, 1): 4}
    assert later.ends(VERSION) == CANCEL, "offset 9 is remembered"
    later.expire(90_000)
    assert later.forgotten == {(TOPIC, 0): 10, (TOPIC, 1): 4}
    assert len(later) == 0


def test_records_read_again_stay_as_first_read_while_others_move_to_columns() -> None:
    """A batch read again after a take-over: what it notes moves the oldest records to
    columns meanwhile, and those read again among them are still remembered once."""
    later = LaterRecords(memory_ms=30_000, hot_records=4, columns_every_ms=0)
    first = [later_of(record(offset, None), PARSE, 1_000) for offset in range(6, 10)]
    for found in first:
        assert found is not None
        later.note(TOPIC, *found)
    fresh = [later_of(record(offset, None), PARSE, 50_000) for offset in range(10, 14)]
    again = [(TOPIC, *found) for found in (*fresh, *first, first[0]) if found is not None]
    later.note_again(again)
    assert len(later) == 8, "each record once"
    later.expire(31_001)
    assert len(later) == 4, "those read first forgotten as first read"


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


def test_only_what_ends_a_version_is_remembered_and_only_its_kind_and_place() -> None:
    """A cancel or a valid version is remembered as its kind and its place among its
    id's versions (a copy: the version it copies); delayline's own tombstone, a record
    without an id, an invalid record and one whose key is not UTF-8 are not."""
    assert later_of(record(6, None), PARSE, 7) == (
        "a",
        Later(CANCEL, 0, 6, 2_000, 6, 7),
    )
    assert later_of(record(9), PARSE, 7) == (
        "a",
        Later(UPDATE, 0, 9, 2_000, 9, 7),
    )
    copy = record(8, headers=((h.EPOCH, b"20"), (h.TARGET_TOPIC, b"t"), (h.COPY_OF, b"5")))
    assert later_of(copy, PARSE, 7) == ("a", Later(UPDATE, 0, 5, 2_000, 8, 7))
    assert later_of(record(6, None, headers=((h.FIRED_OFFSET, b"5"),)), PARSE, 7) is None
    assert later_of(ConsumedRecord(TOPIC, 0, 7, 2_000, None, b"v", ()), PARSE, 7) is None
    assert later_of(ConsumedRecord(TOPIC, 0, 7, 2_000, None, None, ()), PARSE, 7) is None
    assert later_of(ConsumedRecord(TOPIC, 0, 7, 2_000, b"\xff", b"v", ()), PARSE, 7) is None
    assert later_of(record(8, headers=()), PARSE, 7) is None, "invalid: no target topic"
    later = memory()
    for r in (record(6, b"bad", headers=()), record(7, None, headers=((h.FIRED_OFFSET, b"5"),))):
        remember(later, r, 0)
    assert len(later) == 0


def pending(schedule_id: str, offset: int) -> Pending:
    version = Schedule(
        schedule_id, 10_000, "target", None, b"v", (), SourceRef(TOPIC, 0, offset, 1)
    )
    return Pending(0, offset, schedule_id.encode(), version, handed_ms=1)


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


def test_the_count_holds_while_records_move_to_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The metrics thread reads the count while the committer's thread moves records to
    columns: it never drops meanwhile."""
    later = LaterRecords(memory_ms=30_000, hot_records=10)
    seen: list[int] = []
    add = LaterColumns.add

    def watched(columns: LaterColumns, rows: list[tuple[str, str, Later]]) -> None:
        seen.append(len(later))
        add(columns, rows)
        seen.append(len(later))

    monkeypatch.setattr(LaterColumns, "add", watched)
    for offset in range(25):
        later.note(TOPIC, f"id-{offset}", Later(CANCEL, 0, offset, 0, offset, 0))
        assert len(later) == offset + 1
    assert seen
    assert min(seen) >= 11, seen


def _input_message(rng: random.Random, offset: int) -> Message:
    """A record of the schedules topic, valid or not in one of many ways."""
    key = rng.choice([b"a", b"b", b"c", b"a", b"b", b"c", b"", b"\xff\xfe", "é".encode()])
    epoch = rng.choice([b"20", b"20.5", b" 21.250 ", b"20.0001"] * 3 + [b"+20", b"1e3", b"", b"-1",
                        b"253402300800", b"999999999999999", b"\xff", None])  # fmt: skip
    target = rng.choice([b"target"] * 6 + [b"__consumer_offsets", b"no spaces", b"\xff", None])
    headers: list[tuple[str, str | bytes | None]] = []
    if epoch is not None:
        headers.append((h.EPOCH, epoch))
    if target is not None:
        headers.append((h.TARGET_TOPIC, target))
    for _ in range(rng.randrange(3)):
        name = rng.choice([h.COPY_OF, h.TARGET_KEY, h.EPOCH, "trace", h.FIRED_OFFSET])
        value = rng.choice([str(rng.randrange(offset + 3)).encode(), b"x", b"", None])
        headers.insert(rng.randrange(len(headers) + 1), (name, value))
    value = None if rng.random() < 0.3 else b"payload"
    if value is None and rng.random() < 0.5:
        headers = [(h.FIRED_OFFSET, str(rng.randrange(offset + 1)).encode())]
    return Message(topic=TOPIC, partition=rng.randrange(2), offset=offset, key=key,
                   value=value, headers=headers, timestamp=(1, 1_000 + offset))  # fmt: skip


class ParsingOnly(InputParser):
    """Classifies every record by parsing it into the model, as for other contracts."""

    def classify(self, record: ConsumedRecord) -> Parsed:
        return self(record)


def test_the_watch_classifies_header_records_as_the_parser_does() -> None:
    """The watch reads a header-contract schedule by the contract's own checks without
    making the schedule: over thousands of records, valid and not, what it remembers,
    returns and counts is what it makes of the parsed schedules."""
    rng = random.Random(7)
    msgs = [_input_message(rng, offset) for offset in range(3_000)]
    fast, parsed = (InputWatch("unused:9092", parse, lambda: 0, hot_records=HOT[-1])
                    for parse in (PARSE, ParsingOnly(PARSE.topology)))  # fmt: skip
    outs: list[list[tuple[str, str]]] = [[], []]
    for watch, out in zip((fast, parsed), outs, strict=True):
        watch.close()
        watch.take_batch(msgs, 5, out)
    assert outs[0] == outs[1]
    assert len(outs[0]) > 600, "many records end something"
    assert (fast._arrived, fast._earliest_due_ms) == (parsed._arrived, parsed._earliest_due_ms)
    assert len(fast.later) == len(parsed.later) > 500
    versions = [
        Schedule(key, 0, "t", None, b"", (), SourceRef(TOPIC, partition, offset, 1_000 + offset))
        for key in ("a", "b", "c", "é")
        for partition in (0, 1)
        for offset in range(-1, 3_010, 7)
    ]
    answers = fast.later.ends_each(versions)
    assert answers == parsed.later.ends_each(versions)
    assert {None, CANCEL, UPDATE} <= set(answers)


def test_a_version_between_a_version_and_its_tombstone_is_found_in_its_partition_only() -> None:
    later = memory()
    remember(later, record(6), 0)  # a newer version, at 6
    remember(later, record(9, partition=1, ts=5_000), 0)  # a version, elsewhere
    remember(later, record(12, None), 0)  # a cancel: it leaves nothing to hide
    spans = [(TOPIC, "a", 0, 5, 7), (TOPIC, "a", 0, 6, 7), (TOPIC, "a", 0, 3, 6),
             (TOPIC, "a", 1, 8, 10), (TOPIC, "a", 1, 0, 9), (TOPIC, "b", 0, 5, 7),
             ("other", "a", 0, 5, 7), (TOPIC, "a", 0, 10, 14)]  # fmt: skip
    assert later.versions_between_each(spans) == [True, False, False, True, False, False,
                                                  False, False]  # fmt: skip
    assert later.versions_between_each([]) == []


MARK = b"0123456789abcdef"
PLAN = (h.PLAN, MARK)


def _message(
    offset: int, value: bytes | None, headers: list[tuple[str, str | bytes | None]]
) -> Message:
    return Message(topic=TOPIC, partition=0, offset=offset, key=b"a", value=value,
                   headers=headers, timestamp=(1, 1_000 + offset))  # fmt: skip


def _own(offset: int, fired: int, *more: tuple[str, bytes]) -> Message:
    headers: list[tuple[str, str | bytes | None]] = [(h.FIRED_OFFSET, str(fired).encode())]
    return _message(offset, None, [*headers, *more])


def _version(offset: int) -> Message:
    return _message(offset, b"v", [(h.EPOCH, b"20"), (h.TARGET_TOPIC, b"target")])


class FakeWriter:
    """Queues what is sent; each :meth:`serve` answers what was queued before the serve
    before it (Kafka answers a while later), failing the next ``fail`` ones (retriably
    unless ``for_good``); refuses sends while ``full``."""

    def __init__(self) -> None:
        self.queued: list[tuple[OutgoingRecord, Callable[[str | None, bool], None]]] = []
        self.in_flight: list[tuple[OutgoingRecord, Callable[[str | None, bool], None]]] = []
        self.written: list[OutgoingRecord] = []
        self.fail = 0
        self.for_good = False
        self.full = False
        self.closed = False

    def send(self, record: OutgoingRecord, done: Callable[[str | None, bool], None]) -> bool:
        if self.full:
            return False
        self.queued.append((record, done))
        return True

    def serve(self) -> None:
        answered, self.in_flight, self.queued = self.in_flight, self.queued, []
        for record, done in answered:
            if self.fail:
                self.fail -= 1
                done("broker away", not self.for_good)
            else:
                self.written.append(record)
                done(None, True)

    def close(self, timeout_s: float) -> None:
        self.closed = True


def _watch(writer: FakeWriter) -> InputWatch:
    watch = InputWatch("unused:9092", PARSE, lambda: 0, hot_records=HOT[-1])
    watch.close()  # its consumer is not used: the records are handed to it
    watch.reviews.writer = writer
    return watch


def test_the_watch_asks_the_hold_to_read_a_marked_tombstone_a_version_landed_before() -> None:
    """A version (5), its update written while the batch that raised 5 ran (6), then the
    hand-over's tombstone of 5 (7), marked: the hold would drop that tombstone, which
    hides 6 from compaction, so the watch writes it again marked for review, without
    waiting for Kafka. Nothing landed between 8 and its tombstone at 9, and only a cancel
    between 10 and 12: no review. A tombstone marked for review already, or not marked,
    is the hold's to read anyway."""
    writer = FakeWriter()
    watch = _watch(writer)
    watch.take_batch([_version(5), _version(6), _own(7, 5, PLAN)], 0, [])
    assert [r.headers for r, _ in writer.in_flight] == [
        ((h.FIRED_OFFSET, b"5"), PLAN, (h.REVIEW, b"1"))
    ], "sent at once"
    assert writer.written == [], "not waited for"
    assert watch.reviews.waiting
    watch.take_batch([_version(8), _own(9, 8, PLAN)], 0, [])
    assert [(r.topic, r.partition, r.key, r.value) for r in writer.written] == [
        (TOPIC, 0, b"a", None)
    ]
    watch.take_batch([_version(10), _message(11, None, []), _own(12, 10, PLAN)], 0, [])
    watch.take_batch([_version(13), _version(14), _own(15, 13, PLAN, (h.REVIEW, b"1"))], 0, [])
    watch.take_batch([_version(16), _version(17), _own(18, 16)], 0, [])
    watch.reviews.flush()
    assert len(writer.written) == 1
    assert watch.reviews.counts.written == 1
    assert not watch.reviews.waiting
    watch.reviews.close()
    assert writer.closed


def test_a_tombstone_of_a_version_older_than_the_watch_is_reviewed_until_the_pipeline_passes() -> (
    None
):
    """The watch began reading the partition at 100 (after a rebuild, or behind a
    pipeline catching up): what landed between a version before that and its tombstone
    it cannot know, while the pipeline still reads before 100 too. Once the pipeline's
    checkpoint says it read past 100, every version it hands over is followed by what
    the watch read. Another partition's start says nothing of this one."""
    writer = FakeWriter()
    watch = _watch(writer)
    watch.started = {(TOPIC, 0): 100, (TOPIC, 1): 0}
    watch.taken = {}  # the pipeline's checkpoint names no batch yet
    # (The records are all of one id: a version at 130 lies in any span around it.)
    watch.take_batch([_own(120, 50, PLAN), _own(121, 100, PLAN), _version(130),
                      _own(140, 130, PLAN)], 0, [])  # fmt: skip
    watch.taken = {(TOPIC, 0): 100}
    watch.take_batch([_own(125, 60, PLAN)], 0, [])
    watch.taken = None  # a committer without the checkpoint: it cannot know
    watch.take_batch([_own(126, 70, PLAN)], 0, [])
    watch.reviews.flush()
    watch.reviews.flush()
    assert [r.headers[0] for r in writer.written] == [
        (h.FIRED_OFFSET, b"50"), (h.FIRED_OFFSET, b"70")
    ]  # fmt: skip


def test_a_review_that_failed_is_sent_again_at_the_next_read_and_one_refused_is_dropped() -> None:
    writer = FakeWriter()
    writer.fail = 1
    watch = _watch(writer)
    watch.take_batch([_version(5), _version(6), _own(7, 5, PLAN)], 0, [])
    assert (len(writer.in_flight), writer.written) == (1, []), "sent"
    writer.full = True  # the producer's queue is full: kept, nothing waits for it
    watch.take_batch([_version(8), _version(9), _own(10, 8, PLAN)], 0, [])
    assert writer.written == [], "the first failed; the second not taken"
    assert watch.reviews.waiting
    writer.full = False
    watch.reviews.flush()  # both sent now: the failed one again, and the one kept
    watch.reviews.flush()
    assert sorted(r.headers[0] for r in writer.written) == [
        (h.FIRED_OFFSET, b"5"), (h.FIRED_OFFSET, b"8")
    ]  # fmt: skip
    assert not watch.reviews.waiting
    writer.fail, writer.for_good = 1, True  # refused for good (authorization): dropped
    watch.take_batch([_version(11), _version(12), _own(13, 11, PLAN)], 0, [])
    watch.reviews.flush()
    watch.reviews.flush()
    assert (watch.reviews.counts.written, watch.reviews.counts.dropped) == (2, 1)
    assert not watch.reviews.waiting


def test_the_watches_of_a_committers_sessions_count_their_reviews_together() -> None:
    """Each session makes its watch anew; what their reviews became adds up in the
    counts the committer keeps (``Kept.reviews``), written and dropped alike."""
    kept = ReviewCounts()
    for fail in (0, 1):
        writer = FakeWriter()
        writer.fail, writer.for_good = fail, True
        watch = InputWatch("unused:9092", PARSE, lambda: 0, review_counts=kept)
        watch.close()
        watch.reviews.writer = writer
        watch.take_batch([_version(5), _version(6), _own(7, 5, PLAN)], 0, [])
        watch.take_batch([_version(8), _version(9), _own(10, 8, PLAN)], 0, [])
        watch.reviews.flush()
        watch.reviews.flush()
    assert (kept.written, kept.dropped) == (3, 1)


def test_a_reread_reads_only_what_the_watch_may_have_forgotten_or_never_read() -> None:
    """From where on a partition is remembered whole: where the watch began reading it,
    or past the last record it forgot there; a re-read that ran to its end moves that
    back to where it began (nothing is forgotten while it runs)."""
    later = memory()
    rereads = Rereads("unused:9092", later, 1_000, lambda: 0)
    place, other = (TOPIC, 0), (TOPIC, 1)
    positions, started = {place: 50, other: 40}, {place: 10, other: 40}
    assert rereads.remembered_from(place, positions, started) == 10, "never read before 10"
    assert rereads.remembered_from((TOPIC, 9), positions, started) == -1, "not read at all"
    remember(later, record(20, None), 1_000)
    remember(later, record(30, None, partition=1), 1_000)
    later.expire(40_000)
    assert rereads.remembered_from(place, positions, started) == 21
    assert rereads.remembered_from(other, positions, started) == 40, "never read before 40"
    rereads._remembered_again({place: (5, 21), other: (2, 40)})
    assert rereads.remembered_from(place, positions, started) == 5
    assert rereads.remembered_from(other, positions, started) == 2
    remember(later, record(25, None), 40_000)
    later.expire(80_000)
    assert rereads.remembered_from(place, positions, started) == 26
    positions[place] = 24
    assert rereads.remembered_from(place, positions, started) == 24, "never past the position"


def test_nothing_is_forgotten_while_a_reread_runs() -> None:
    later = memory()
    remember(later, record(20, None), 1_000)
    with later.kept():
        later.expire(90_000)
        assert len(later) == 1
        assert later.forgotten == {}
    later.expire(90_000)
    assert len(later) == 0
    assert later.forgotten == {(TOPIC, 0): 21}
