"""The hold under notice rules (:mod:`delayline.contract.notice`), run against every
hold that honours them: the memory hold here, the JVM hold in
``tests/integration/test_hold_rules_jvm.py`` (the Spark-state hold holds every version).

The rules: in partition 1 of ``schedules`` a 20 s notice governs from offset 10 (an
epoch "off" before it); partition 2 is named by neither epoch, so the last one governs
all of it. A version is written 5 ms before ``NOW`` unless a test says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from delayline.contract import ConsumedRecord
from delayline.contract import events as ev
from delayline.contract import headers as h
from delayline.contract.notice import Epoch, NoticeRules
from tests.unit.holds.conftest import Driver
from tests.unit.holds.test_rules import NOW, TOPIC, copy, kinds, rec

NOTICE_MS = 20_000
RULES = NoticeRules((Epoch(0, 1), Epoch(NOTICE_MS, 4, {TOPIC: {1: 10}})))
LEAD_MS = 2_000
WRITTEN = NOW - 5  # rec()'s record timestamp


def committers_tomb(offset: int, fired: int) -> ConsumedRecord:
    marks = ((h.FIRED_OFFSET, str(fired).encode()), (h.PLAN, b"committer"))
    return rec(offset, value=None, extra=marks)


def noticed(make_noticed: Callable[..., Driver], rules: NoticeRules = RULES) -> Driver:
    return make_noticed(lead_ms=LEAD_MS, notice=rules)


def test_a_short_notice_version_is_folded_but_never_held_or_raised(
    make_noticed: Callable[..., Driver],
) -> None:
    hold = noticed(make_noticed)
    assert kinds(hold.batch([rec(10, due_s=1010)], NOW)) == [ev.Kind.DIRECT]
    assert hold.held_offset(TOPIC, "a") is None
    assert hold.batch([], 1_008_000) == [], "no timer at the lead"
    assert hold.batch([], 1_010_000) == [], "nor at the due time"


def test_the_notice_boundary_is_held_and_a_millisecond_less_is_short(
    make_noticed: Callable[..., Driver],
) -> None:
    hold = noticed(make_noticed)
    at_notice = (WRITTEN + NOTICE_MS) / 1000
    assert kinds(hold.batch([rec(10, due_s=at_notice)], NOW)) == [ev.Kind.PLANNED]
    assert hold.held_offset(TOPIC, "a") == 10
    other = noticed(make_noticed)
    assert kinds(other.batch([rec(10, due_s=at_notice - 0.001)], NOW)) == [ev.Kind.DIRECT]


def test_past_due_on_arrival_is_short_notice_not_missed(
    make_noticed: Callable[..., Driver],
) -> None:
    hold = noticed(make_noticed)
    assert kinds(hold.batch([rec(10, due_s=990)], NOW)) == [ev.Kind.DIRECT]
    assert hold.batch([], NOW + 1) == []


def test_before_its_epoch_a_version_is_held_as_without_rules(
    make_noticed: Callable[..., Driver],
) -> None:
    hold = noticed(make_noticed)
    assert kinds(hold.batch([rec(9, due_s=1010)], NOW)) == [ev.Kind.PLANNED]
    (fired,) = hold.batch([], 1_008_000)
    assert (fired.kind, fired.offset) == (ev.Kind.RAISE, 9)


def test_a_partition_no_epoch_names_follows_the_last_epoch(
    make_noticed: Callable[..., Driver],
) -> None:
    hold = noticed(make_noticed)
    assert kinds(hold.batch([rec(0, due_s=1010, partition=2)], NOW)) == [ev.Kind.DIRECT]


def test_an_epoch_that_turns_the_rule_off_holds_everything_after_it(
    make_noticed: Callable[..., Driver],
) -> None:
    off_from_10 = NoticeRules((Epoch(NOTICE_MS, 1), Epoch(0, 1, {TOPIC: {1: 10}})))
    hold = noticed(make_noticed, off_from_10)
    assert kinds(hold.batch([rec(9, due_s=1010)], NOW)) == [ev.Kind.DIRECT]
    assert kinds(hold.batch([rec(10, due_s=1010)], NOW + 1)) == [ev.Kind.PLANNED]


def test_a_short_version_ends_the_held_one_and_its_timer(
    make_noticed: Callable[..., Driver],
) -> None:
    hold = noticed(make_noticed)
    assert kinds(hold.batch([rec(10, due_s=1100)], NOW)) == [ev.Kind.PLANNED]
    assert kinds(hold.batch([rec(11, due_s=1010)], NOW + 1)) == [ev.Kind.DIRECT]
    assert hold.held_offset(TOPIC, "a") is None
    assert hold.batch([], 1_098_000) == [], "the replaced version's timer must be gone"


def test_a_short_version_of_another_partition_retires_the_held_one(
    make_noticed: Callable[..., Driver],
) -> None:
    hold = noticed(make_noticed)
    hold.batch([rec(10, due_s=1100)], NOW)
    direct, retire = hold.batch([rec(0, due_s=1010, partition=2, ts=NOW)], NOW + 1)
    assert direct.kind == ev.Kind.DIRECT
    assert (retire.kind, retire.partition, retire.offset) == (ev.Kind.RETIRE, 1, 10)
    assert hold.batch([], 1_098_000) == []


def test_what_is_older_than_a_short_version_is_stale(make_noticed: Callable[..., Driver]) -> None:
    """In one batch: a long version followed by a short one is not held, and an older
    long one of another partition is stale (and retired: nothing ends it there)."""
    hold = noticed(make_noticed)
    assert kinds(hold.batch([rec(10, due_s=1100), rec(11, due_s=1010)], NOW)) == [
        ev.Kind.DIRECT,
    ]  # fmt: skip
    older = rec(3, due_s=1100, partition=2, ts=NOW - 100)
    direct, stale, retire = hold.batch([rec(12, due_s=1010), older], NOW + 1)
    assert (direct.kind, stale.kind) == (ev.Kind.DIRECT, ev.Kind.STALE)
    assert (retire.kind, retire.partition, retire.offset) == (ev.Kind.RETIRE, 2, 3)
    assert hold.held_offset(TOPIC, "a") is None


def test_a_newer_long_version_after_a_short_one_is_held(
    make_noticed: Callable[..., Driver],
) -> None:
    hold = noticed(make_noticed)
    assert kinds(hold.batch([rec(10, due_s=1010), rec(11, due_s=1100)], NOW)) == [
        ev.Kind.DIRECT, ev.Kind.PLANNED,
    ]  # fmt: skip
    assert hold.held_offset(TOPIC, "a") == 11


def test_the_committers_tombstone_of_a_short_version(make_noticed: Callable[..., Driver]) -> None:
    """The committer marks the tombstone of what it handed over itself; the hold reads
    it as any own tombstone: nothing held, or a newer version that landed between,
    kept and written again (compaction would keep the tombstone instead of it)."""
    hold = noticed(make_noticed)
    hold.batch([rec(10, due_s=1010)], NOW)
    assert kinds(hold.batch([committers_tomb(11, fired=10)], NOW + 1)) == [
        ev.Kind.OWN_TOMBSTONE,
    ]  # fmt: skip
    hold.batch([rec(12, due_s=1010)], NOW + 2)
    assert kinds(hold.batch([rec(13, due_s=1100)], NOW + 3)) == [ev.Kind.PLANNED]
    stale, rewrite = hold.batch([committers_tomb(14, fired=12)], NOW + 4)
    assert (stale.kind, rewrite.kind, rewrite.offset) == (ev.Kind.STALE, ev.Kind.REWRITE, 13)
    assert hold.held_offset(TOPIC, "a") == 13


def test_a_copy_is_never_short(make_noticed: Callable[..., Driver]) -> None:
    """A rebuild that finds only the copy of a held version holds it, whatever its
    notice: the copy is the version it copies, which was held."""
    hold = noticed(make_noticed)
    assert kinds(hold.batch([copy(20, of=12)], NOW)) == [ev.Kind.PLANNED]
    assert hold.held_offset(TOPIC, "a") == 12
