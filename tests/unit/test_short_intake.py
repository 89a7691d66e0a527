"""How short-notice versions reach a committer's plan (:mod:`delayline.committer.short_intake`),
what the watch tells of a record (:func:`~delayline.committer.short_notice.short_candidate`),
and what a short version's group writes."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import pytest

from delayline.committer.due_plan import DuePlan
from delayline.committer.pending import Pending, short_key
from delayline.committer.short_intake import (
    RETRY_MS,
    ShortIntake,
    decode_positions,
    encode_positions,
)
from delayline.committer.short_notice import Short, short_candidate
from delayline.committer.turns import take_turns
from delayline.contract import ConsumedRecord, OutgoingRecord
from delayline.contract.contracts import InputParser
from delayline.contract.headers import WINDOW
from delayline.contract.notice import MAX_NOTICE_MS, Epoch, NoticeRules
from delayline.contract.records import build_schedule
from delayline.contract.topology import Topology
from delayline.core.clock import ManualClock
from delayline.core.model import Schedule, SourceRef
from delayline.errors import KafkaUnavailableError, RecordFormatError
from delayline.fire.firing import Firing
from delayline.fire.inflight import inflight_key

TOPIC = "orders"
RULES = NoticeRules((Epoch(5_000, 1),))
WRITTEN_MS = 1_000_000


class Answers:
    """A notice source whose answers the test gives, one per call, when it says."""

    def __init__(self) -> None:
        self.calls: list[Future[NoticeRules]] = []
        self.closed = False

    def rules(self, timeout_s: float = 10.0) -> NoticeRules:
        raise AssertionError("asked on the worker only")

    def close(self) -> None:
        self.closed = True


class Worker:
    """An executor that runs nothing by itself: each submitted call's future is kept,
    answered by the test."""

    def __init__(self) -> None:
        self.futures: list[Future[NoticeRules]] = []

    def submit(self, fn: object, *args: object) -> Future[NoticeRules]:
        future: Future[NoticeRules] = Future()
        self.futures.append(future)
        return future


def _version(sid: str, offset: int, due_in_ms: int = 100) -> Schedule:
    schedule = build_schedule(sid, b"x", "target", WRITTEN_MS + due_in_ms)
    return replace(schedule, source=SourceRef(TOPIC, 0, offset, WRITTEN_MS))


def _intake() -> tuple[ShortIntake, DuePlan, Worker, ManualClock]:
    plan, worker, clock = DuePlan(), Worker(), ManualClock(WRITTEN_MS)
    return ShortIntake(Answers(), plan, clock, worker), plan, worker, clock  # type: ignore[arg-type]


def test_rules_are_asked_only_while_something_waits_and_judge_what_came_before() -> None:
    intake, plan, worker, _ = _intake()
    assert intake.step({0}) == []
    assert worker.futures == [], "nothing read: no request"
    intake.versions.read_version(_version("a", 10), 0)
    intake.versions.read_to({(TOPIC, 0): 11})
    intake.step({0})
    assert len(worker.futures) == 1
    assert intake.asking
    intake.versions.read_version(_version("b", 11), 0)  # read after the rules were asked
    intake.versions.read_to({(TOPIC, 0): 12})
    assert intake.step({0}) == [], "not answered yet"
    assert len(worker.futures) == 1, "one request at a time"
    worker.futures[0].set_result(RULES)
    (planned,) = intake.step({0})
    assert planned.schedule.id == "a"
    assert len(worker.futures) == 2, "b waits for rules asked after it was read"
    worker.futures[1].set_result(RULES)
    assert [p.schedule.id for p in intake.step({0})] == ["b"]
    assert len(plan) == 2
    assert intake.planned == 2
    assert not intake.asking


def test_a_planned_version_is_a_pending_schedule_of_its_own() -> None:
    intake, plan, worker, _ = _intake()
    late = _version("late", 20, due_in_ms=-50)  # written already due
    for version in (_version("a", 10), late):
        intake.versions.read_version(version, 0)
    intake.versions.read_to({(TOPIC, 0): 21})
    intake.step({0})
    worker.futures[0].set_result(RULES)
    a, b = intake.step({0})
    assert (a.partition, a.short is not None, a.missed, b.missed) == (0, True, False, True)
    assert a.key == short_key(a.schedule) != inflight_key(a.schedule.require_source())
    assert a.key.startswith(b"\x00")
    assert a.offset < 0
    assert b.offset < 0
    assert a.offset != b.offset
    assert a.handed_ms == WRITTEN_MS
    assert plan.offsets() == {}, "a short version has no in-flight offset to hold"
    plan.add(Pending(0, 7, b"k", _version("handed", 5)))
    assert plan.offsets() == {0: 7}


def test_done_and_delivered_reach_the_versions() -> None:
    intake, _, worker, _ = _intake()
    intake.versions.read_version(_version("a", 10), 0)
    intake.versions.read_version(_version("b", 11), 0)
    intake.versions.read_to({(TOPIC, 0): 12})
    intake.step({0})
    worker.futures[0].set_result(RULES)
    a, b = intake.step({0})
    intake.done(a)
    assert intake.versions.positions(0) == {(TOPIC, 0): 11}
    intake.versions.read_own_tombstone((TOPIC, 0), "b", 11, 0)
    assert intake.delivered() == [b.short]
    assert intake.delivered() == []
    assert intake.versions.positions(0) == {(TOPIC, 0): 12}


def test_a_partition_no_longer_owned_is_released() -> None:
    intake, _, worker, _ = _intake()
    intake.versions.read_version(_version("a", 10), 0)
    intake.versions.read_to({(TOPIC, 0): 11})
    intake.step({0})
    worker.futures[0].set_result(RULES)
    intake.step({0})
    assert intake.versions.open()
    intake.step(set())
    assert intake.versions.open() == []
    assert intake.versions.owned == set()


def test_pending_rules_are_asked_again_a_while_later() -> None:
    intake, plan, worker, clock = _intake()
    intake.versions.read_version(_version("a", 10), 0)
    intake.versions.read_to({(TOPIC, 0): 11})
    intake.step({0})
    worker.futures[0].set_result(replace(RULES, pending=True))
    assert intake.step({0}) == []
    assert len(worker.futures) == 1, "not asked again at once"
    clock.advance(RETRY_MS)
    intake.step({0})
    worker.futures[1].set_result(RULES)
    assert [p.schedule.id for p in intake.step({0})] == ["a"]
    assert len(plan) == 1


def test_kafka_not_answering_is_asked_again_later_and_other_errors_raise() -> None:
    intake, _, worker, clock = _intake()
    intake.versions.read_version(_version("a", 10), 0)
    intake.versions.read_to({(TOPIC, 0): 11})
    intake.step({0})
    worker.futures[0].set_exception(KafkaUnavailableError("frozen"))
    assert intake.step({0}) == []
    assert len(worker.futures) == 1, "not asked again at once"
    clock.advance(RETRY_MS)
    intake.step({0})
    assert len(worker.futures) == 2
    worker.futures[1].set_exception(RecordFormatError("newer rules"))
    with pytest.raises(RecordFormatError):
        intake.step({0})


def test_close_runs_after_the_request_in_flight() -> None:
    source = Answers()
    with ThreadPoolExecutor(1) as pool:
        intake = ShortIntake(source, DuePlan(), ManualClock(), pool)
        intake.close()
        intake.close()
    assert source.closed
    late = Answers()
    ShortIntake(late, DuePlan(), ManualClock(), pool).close()
    assert late.closed, "closed at once once the worker is shut down"


def _record(
    offset: int, due_in_ms: int, headers: tuple[tuple[str, bytes | None], ...] = ()
) -> ConsumedRecord:
    epoch = f"{(WRITTEN_MS + due_in_ms) / 1000:.3f}".encode()
    return ConsumedRecord(
        TOPIC, 0, offset, WRITTEN_MS, b"a", b"v",
        (("scheduler-epoch", epoch), ("scheduler-target-topic", b"t"), *headers),
    )  # fmt: skip


def test_the_watch_tells_only_versions_that_may_be_short() -> None:
    parse = InputParser(Topology(bootstrap_servers="x", schedules_topics=(TOPIC,)))
    soon = _record(5, MAX_NOTICE_MS - 1)
    told = short_candidate(soon, parse.classify(soon), parse)
    assert told is not None
    assert told.payload == b"v"
    assert told.require_source().offset == 5
    far = _record(6, MAX_NOTICE_MS)
    assert short_candidate(far, parse.classify(far), parse) is None
    copy = _record(7, 100, (("delayline-copy-of", b"3"),))
    assert short_candidate(copy, parse.classify(copy), parse) is None, "a copy is never short"
    cancel = ConsumedRecord(TOPIC, 0, 8, WRITTEN_MS, b"a", None, ())
    assert short_candidate(cancel, parse.classify(cancel), parse) is None


def test_a_short_version_refused_for_its_window_is_still_forgotten() -> None:
    """Its own tombstone goes with its dead letter: a committer reading the input again
    sees it done (a handed-over one's hand-over wrote that already)."""
    topology = Topology(bootstrap_servers="x", schedules_topics=(TOPIC,))
    bad = replace(
        _version("w", 10),
        headers=(*_version("w", 10).headers, (WINDOW, b"soon")),
    )
    short = Short(0, bad)
    ours = Pending(0, -1, short_key(bad), bad, short=short)
    handed = Pending(0, 4, b"k", replace(bad, id="h"))

    def firing(p: Pending) -> Firing:
        return Firing(p.schedule, "dead", forget=False)

    for pending, tombstones in ((ours, 1), (handed, 0)):
        records = take_turns([pending], firing, WRITTEN_MS, topology).records
        dead = [r for r in records if isinstance(r, OutgoingRecord) and r.topic == "dead"]
        own = [r for r in records if isinstance(r, OutgoingRecord) and r.topic == TOPIC]
        assert (len(dead), len(own)) == (1, tombstones)


class Rules:
    """A notice source that answers at once (a committer's start asks it so)."""

    def __init__(self, rules: NoticeRules) -> None:
        self.answer = rules
        self.asked = 0

    def rules(self, timeout_s: float = 10.0) -> NoticeRules:
        self.asked += 1
        return self.answer

    def close(self) -> None:
        pass


def test_a_start_reads_again_from_the_earliest_committed_positions() -> None:
    """Per input partition the earliest position of the in-flight partitions taken; one
    committed without them is read from the first epoch with a notice (asked once)."""
    rules = NoticeRules(
        (
            Epoch(0, 2, {TOPIC: {0: 5}}),
            Epoch(5_000, 2, {TOPIC: {0: 50, 1: 9}}),
            Epoch(0, 2, {TOPIC: {0: 80, 1: 80}}),
        )
    )
    source = Rules(rules)
    pool = ThreadPoolExecutor(1)  # the rules are asked there, never beside a request
    intake = ShortIntake(source, DuePlan(), ManualClock(), pool)
    mine = {0: encode_positions({(TOPIC, 0): 70, (TOPIC, 1): 20})}
    theirs = {1: encode_positions({(TOPIC, 0): 60, (TOPIC, 1): 30})}
    assert intake.starts({**mine, **theirs}, [0, 1]) == {(TOPIC, 0): 60, (TOPIC, 1): 20}
    assert source.asked == 0, "positions known: the rules are not asked"
    assert intake.starts(mine, [0, 1, 2]) == {(TOPIC, 0): 50, (TOPIC, 1): 9}
    assert source.asked == 1
    source.answer = NoticeRules((Epoch(0, 2, {TOPIC: {0: 5}}),))
    assert intake.starts({}, [0]) == {}, "never a notice: nothing to read again"
    pool.shutdown()


def test_a_committed_offset_carries_the_partitions_positions() -> None:
    intake, _, worker, _ = _intake()
    intake.versions.begin({(TOPIC, 0): 10})
    assert decode_positions(intake.metadata(0), "m") == {(TOPIC, 0): 10}
    intake.versions.read_version(_version("a", 10), 0)
    intake.versions.read_to({(TOPIC, 0): 15})
    intake.step({0})
    worker.futures[0].set_result(RULES)
    (planned,) = intake.step({0})
    assert decode_positions(intake.metadata(0), "m") == {(TOPIC, 0): 10}, "a is open"
    intake.done(planned)
    assert decode_positions(intake.metadata(0), "m") == {(TOPIC, 0): 15}
