"""Which short-notice versions a committer takes, and where a new owner of an in-flight
partition must read the input again from (:mod:`delayline.committer.short_notice`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from delayline.committer.short_intake import decode_positions, encode_positions
from delayline.committer.short_notice import ShortVersions
from delayline.contract.notice import Epoch, NoticeRules
from delayline.contract.records import build_schedule
from delayline.core.model import Schedule, SourceRef
from delayline.errors import FormatVersionError, RecordFormatError
from delayline.fire.inflight import inflight_partition

TOPIC = "orders"
PARTITIONS = 4
RULES = NoticeRules((Epoch(5_000, PARTITIONS, {TOPIC: {0: 10, 1: 0}}),))
"""Versions due less than 5 s after written are short, from offset 10 of partition 0
and all of partition 1."""


def _id_in(partition: int, n: int = 0) -> str:
    """The ``n``-th schedule id whose in-flight partition is ``partition``."""
    ids = (f"s{i}" for i in range(10_000))
    found = [i for i in ids if inflight_partition(i, PARTITIONS) == partition]
    return found[n]


def _version(sid: str, offset: int, due_in_ms: int, partition: int = 0) -> Schedule:
    written = 1_000_000
    schedule = build_schedule(sid, b"x", "target", written + due_in_ms)
    return replace(schedule, source=SourceRef(TOPIC, partition, offset, written))


def test_an_owned_short_version_is_taken_once_and_no_other() -> None:
    mine, theirs = _id_in(1), _id_in(2)
    shorts = ShortVersions(owned={1})
    short = _version(mine, 10, due_in_ms=4_999)
    shorts.read_version(short, 0)
    shorts.read_version(_version(mine + "-far", 11, due_in_ms=5_000), 0)  # not short
    shorts.read_version(_version(theirs, 12, due_in_ms=100), 0)  # short, not this one's
    shorts.read_version(_version(mine, 9, due_in_ms=100), 0)  # before the epoch
    shorts.read_to({(TOPIC, 0): 13})
    given = shorts.judge(RULES)
    assert [(s.inflight_partition, s.schedule) for s in given] == [(1, short)]
    assert shorts.judge(RULES) == [], "each version given once"
    assert shorts.open() == given


def test_pending_rules_judge_nothing_until_settled() -> None:
    """What was read while the rules were pending may be governed by an epoch not yet
    written: it waits, and the position stays where the last judging left it."""
    sid = _id_in(0)
    shorts = ShortVersions(owned={0})
    shorts.read_to({(TOPIC, 1): 0})
    assert shorts.judge(RULES) == []
    shorts.read_version(_version(sid, 3, due_in_ms=100, partition=1), 0)
    shorts.read_to({(TOPIC, 1): 4})
    assert shorts.judge(replace(RULES, pending=True)) == []
    assert shorts.positions(0) == {(TOPIC, 1): 0}
    given = shorts.judge(RULES)
    assert [s.offset for s in given] == [3]
    assert shorts.positions(0) == {(TOPIC, 1): 3}, "read again from the open version"


def test_a_version_delivered_before_is_not_taken_again() -> None:
    """Read again after a restart, a short version followed by delayline's own tombstone
    naming it was delivered; one naming another version (a hand-over's) changes
    nothing."""
    sid = _id_in(3)
    shorts = ShortVersions(owned={3})
    shorts.read_version(_version(sid, 20, due_in_ms=100), 0)
    shorts.read_own_tombstone((TOPIC, 0), sid, 20, 0)
    other = _version(sid, 21, due_in_ms=100)
    shorts.read_version(other, 0)
    shorts.read_own_tombstone((TOPIC, 0), sid, 7, 0)
    shorts.read_own_tombstone((TOPIC, 1), sid, 21, 0)  # another partition's
    shorts.read_to({(TOPIC, 0): 25})
    (given,) = shorts.judge(RULES)
    assert given.schedule == other
    assert shorts.take_delivered() == []
    shorts.read_own_tombstone((TOPIC, 0), sid, 21, 0)  # its delivery, read back
    assert shorts.take_delivered() == [given], "no longer open: at once"
    assert shorts.take_delivered() == []
    shorts.read_to({(TOPIC, 0): 26})
    assert shorts.judge(RULES) == []
    assert shorts.open() == []
    assert shorts.positions(3) == {(TOPIC, 0): 26}


def test_positions_hold_at_each_in_flight_partitions_earliest_open_version() -> None:
    a, b, c = _id_in(0), _id_in(1), _id_in(0, 1)
    shorts = ShortVersions(owned={0, 1})
    for sid, offset in ((a, 30), (b, 31), (c, 33)):
        shorts.read_version(_version(sid, offset, due_in_ms=100), 0)
    shorts.read_to({(TOPIC, 0): 40, (TOPIC, 1): 5})
    given = {s.offset: s for s in shorts.judge(RULES)}
    assert shorts.positions(0) == {(TOPIC, 0): 30, (TOPIC, 1): 5}
    assert shorts.positions(1) == {(TOPIC, 0): 31, (TOPIC, 1): 5}
    shorts.done(given[30])
    assert shorts.positions(0) == {(TOPIC, 0): 33, (TOPIC, 1): 5}
    shorts.done(given[33])
    assert shorts.positions(0) == {(TOPIC, 0): 40, (TOPIC, 1): 5}
    assert shorts.positions(1)[(TOPIC, 0)] == 31, "another partition's stays"


def test_a_released_partitions_versions_are_dropped_and_no_longer_taken() -> None:
    a, b = _id_in(0), _id_in(1)
    shorts = ShortVersions(owned={0, 1})
    shorts.read_version(_version(a, 50, due_in_ms=100), 0)
    shorts.read_version(_version(b, 51, due_in_ms=100), 0)
    shorts.read_to({(TOPIC, 0): 52})
    shorts.judge(RULES)
    assert shorts.release([1]) == {1: {(TOPIC, 0): 51}}, "read again from the open one"
    assert [s.schedule.id for s in shorts.open()] == [a]
    shorts.read_version(_version(b, 52, due_in_ms=100), 0)
    shorts.read_to({(TOPIC, 0): 53})
    assert shorts.judge(RULES) == []


def test_a_version_read_again_is_not_given_again() -> None:
    """A committer reading the input again (from :meth:`positions`) meets the versions
    it holds open: each is given once."""
    sid = _id_in(2)
    shorts = ShortVersions(owned={2})
    version = _version(sid, 70, due_in_ms=100)
    shorts.read_version(version, 0)
    shorts.read_to({(TOPIC, 0): 71})
    (given,) = shorts.judge(RULES)
    shorts.read_version(_version(sid, 70, due_in_ms=100), 0)
    assert shorts.judge(RULES) == []
    shorts.done(given)
    assert shorts.open() == []


def test_a_short_version_follows_its_epochs_partition_count() -> None:
    """After the in-flight topic grew, a version keeps the partition its epoch says."""
    grown = RULES.then(Epoch(5_000, 8, {TOPIC: {0: 100, 1: 0}}))
    sid = next(
        f"g{i}"
        for i in range(10_000)
        if inflight_partition(f"g{i}", 4) == 1 and inflight_partition(f"g{i}", 8) == 5
    )
    shorts = ShortVersions(owned={1})
    old, new = _version(sid, 60, due_in_ms=100), _version(sid, 100, due_in_ms=100)
    shorts.read_version(old, 0)
    shorts.read_version(new, 0)
    shorts.read_to({(TOPIC, 0): 101})
    assert [s.schedule for s in shorts.judge(grown)] == [old]


def test_rules_judge_only_what_was_read_before_they_were_asked() -> None:
    """A mark taken before the rules are asked: what is read after it waits for the
    next judging, and the position stays before it. A version given by one judging and
    shown delivered by its own tombstone read before the next is handed back to
    withhold."""
    a, b = _id_in(0), _id_in(0, 1)
    shorts = ShortVersions(owned={0})
    first = _version(a, 80, due_in_ms=100)
    assert shorts.oldest_ms() is None
    shorts.read_version(first, 5)
    shorts.read_to({(TOPIC, 0): 81})
    mark = shorts.mark()
    shorts.read_version(_version(b, 81, due_in_ms=100), 6)
    shorts.read_own_tombstone((TOPIC, 0), a, 80, 7)  # told while the rules were asked
    assert shorts.oldest_ms() == 5, "the watch forgets nothing read since, less its memory"
    shorts.read_to({(TOPIC, 0): 83})
    assert [s.schedule for s in shorts.judge(RULES, mark)] == [first]
    assert shorts.take_delivered() == []
    assert shorts.positions(0) == {(TOPIC, 0): 80}
    assert shorts.waiting
    assert shorts.oldest_ms() == 6
    assert [s.schedule.id for s in shorts.judge(RULES, shorts.mark())] == [b]
    assert [s.schedule for s in shorts.take_delivered()] == [first], "its tombstone came after"
    assert not shorts.waiting
    assert shorts.oldest_ms() is None
    assert shorts.positions(0) == {(TOPIC, 0): 81}
    assert shorts.judge(RULES) == []


def test_positions_travel_as_offset_metadata() -> None:
    positions = {(TOPIC, 0): 12, (TOPIC, 1): 0, ("other", 3): 7}
    text = encode_positions(positions)
    assert len(text) < 100
    assert decode_positions(text, "m") == positions
    assert decode_positions("", "m") is None, "no metadata: nothing known"
    newer = text.replace('"format":1', '"format":2')
    with pytest.raises(FormatVersionError, match="short-notice read positions in format 2"):
        decode_positions(newer, "in-flight partition 3's metadata")
    for garbage in ("x", "{}", '{"format":1,"read":[1]}'):
        with pytest.raises(RecordFormatError, match="m: not short-notice read positions"):
            decode_positions(garbage, "m")


def test_what_is_read_again_is_judged_where_the_watch_was() -> None:
    """A partition taken over: its last owner's versions read again are judged as if
    read before what the watch read since the re-read began, so a tombstone read since
    still follows the version it names."""
    a, b = _id_in(0), _id_in(0, 1)
    shorts = ShortVersions(owned={0})
    shorts.read_version(_version(b, 40, due_in_ms=100), 1)
    at = shorts.reading_again()
    old = _version(a, 30, due_in_ms=100)
    shorts.read_own_tombstone((TOPIC, 0), a, 30, 2)  # read since: delivered by the last owner
    shorts.read_again(at, [(old, 3)])
    assert [s.schedule.id for s in shorts.judge(RULES)] == [b]
    assert shorts.take_delivered() == []
    shorts.read_again(shorts.reading_again(), [(_version(a, 31, due_in_ms=100), 4)])
    assert [s.offset for s in shorts.judge(RULES)] == [31], "one not delivered is taken"


def test_a_version_read_again_is_given_only_if_never_given_nor_settled() -> None:
    """A partition taken over while an id has two short versions: read again, the older
    one is given (the watch withholds it: the newer ends it) and the newer one, given
    live already, is not given twice. One given live and shown delivered by its own
    tombstone while the re-read ran is not given again either."""
    sid = _id_in(0)
    shorts = ShortVersions(owned={0})
    older, newer = _version(sid, 10, due_in_ms=100), _version(sid, 15, due_in_ms=100)
    shorts.read_version(newer, 1)
    assert [s.schedule for s in shorts.judge(RULES)] == [newer]
    shorts.read_again(shorts.reading_again(), [(older, 2), (newer, 2)])
    assert [s.schedule for s in shorts.judge(RULES)] == [older]
    assert {s.offset for s in shorts.open()} == {10, 15}

    other = _id_in(0, 1)
    live = _version(other, 30, due_in_ms=100)
    shorts.read_version(live, 3)
    (given,) = shorts.judge(RULES)
    at = shorts.reading_again()
    shorts.read_own_tombstone((TOPIC, 0), other, 30, 4)  # read live during the re-read
    assert shorts.take_delivered() == [given]
    shorts.read_again(at, [(live, 4)])
    assert shorts.judge(RULES) == [], "settled meanwhile: not given again"
    shorts.read_again(shorts.reading_again(), [(live, 5)])
    assert [s.offset for s in shorts.judge(RULES)] == [30], "a later re-read forgets"


def test_positions_never_pass_a_version_read_again_and_not_judged() -> None:
    sid = _id_in(0)
    shorts = ShortVersions(owned={0})
    shorts.begin({(TOPIC, 0): 50})
    shorts.read_to({(TOPIC, 0): 60})
    assert shorts.judge(RULES) == []
    assert shorts.positions(0) == {(TOPIC, 0): 60}
    shorts.read_again(shorts.reading_again(), [(_version(sid, 40, due_in_ms=100), 1)])
    assert shorts.positions(0) == {(TOPIC, 0): 40}, "not judged yet: read again from it"
    assert shorts.positions(1) == {(TOPIC, 0): 40}, "its in-flight partition is not known"
    shorts.judge(RULES)
    assert shorts.positions(0) == {(TOPIC, 0): 40}, "given: open"
    assert shorts.positions(1) == {(TOPIC, 0): 60}
