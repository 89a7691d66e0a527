"""The hold rules (:mod:`delayline.holds.fold`), run against every hold."""

from __future__ import annotations

from collections.abc import Callable

from delayline.contract import ConsumedRecord
from delayline.contract import events as ev
from delayline.contract import headers as h
from delayline.holds.memory import MemoryHold
from delayline.pipeline.config import PipelineConfig
from tests.unit.holds.conftest import Driver, Seen

TOPIC = "schedules"
NOW = 1_000_000


def rec(
    offset: int,
    due_s: float | None = None,
    *,
    value: bytes | None = b"p",
    partition: int = 1,
    ts: int = NOW - 5,
    extra: tuple[tuple[str, bytes], ...] = (),
) -> ConsumedRecord:
    headers: tuple[tuple[str, bytes | None], ...] = ()
    if due_s is not None:
        headers = ((h.EPOCH, str(due_s).encode()), (h.TARGET_TOPIC, b"target"))
    return ConsumedRecord(TOPIC, partition, offset, ts, b"a", value, (*headers, *extra))


def tomb(offset: int, fired: int | None = None, **kw: int) -> ConsumedRecord:
    extra = () if fired is None else ((h.FIRED_OFFSET, str(fired).encode()),)
    return rec(offset, value=None, extra=extra, **kw)


def kinds(events: list[Seen]) -> list[str]:
    return [e.kind for e in events]


def test_plans_then_fires_at_the_due_time_exactly_once(hold: Driver) -> None:
    planned = hold.batch([rec(0, due_s=1010)], NOW)
    assert [(e.kind, e.due_ms) for e in planned] == [(ev.Kind.PLANNED, 1_010_000)]
    assert hold.batch([], 1_009_999) == []
    (fired,) = hold.batch([], 1_010_000)
    assert (fired.kind, fired.id, fired.due_ms, fired.offset, fired.value) == (
        ev.Kind.RAISE, "a", 1_010_000, 0, b"p",
    )  # fmt: skip
    assert hold.held_offset(TOPIC, "a") is None
    assert hold.batch([], 1_100_000) == []


def test_newer_version_replaces_and_moves_the_timer(hold: Driver) -> None:
    hold.batch([rec(0, due_s=1010)], NOW)
    updated = hold.batch([rec(1, due_s=1020.5, value=b"v2")], NOW + 1)
    assert [(e.kind, e.due_ms) for e in updated] == [(ev.Kind.UPDATED, 1_020_500)]
    assert hold.batch([], 1_015_000) == [], "the old timer must be gone"
    (fired,) = hold.batch([], 1_020_500)
    assert (fired.kind, fired.value) == (ev.Kind.RAISE, b"v2")


def test_older_or_replayed_offset_is_stale(hold: Driver) -> None:
    hold.batch([rec(5, due_s=1010)], NOW)
    assert kinds(hold.batch([rec(5, due_s=1002), rec(3, due_s=1001)], NOW + 1)) == [
        ev.Kind.STALE, ev.Kind.STALE,
    ]  # fmt: skip
    assert hold.held_offset(TOPIC, "a") == 5


def test_cancel_removes_the_schedule_and_its_timer(hold: Driver) -> None:
    hold.batch([rec(0, due_s=1010)], NOW)
    assert kinds(hold.batch([tomb(1)], NOW + 1)) == [ev.Kind.CANCELLED]
    assert hold.held_offset(TOPIC, "a") is None
    assert hold.batch([], 1_020_000) == []


def test_cancel_of_an_unknown_id_is_counted(hold: Driver) -> None:
    assert kinds(hold.batch([tomb(0)], NOW)) == [ev.Kind.UNKNOWN_CANCEL]
    assert kinds(hold.batch([tomb(1, fired=0)], NOW + 1)) == [ev.Kind.OWN_TOMBSTONE]


def test_own_tombstone_of_a_fired_version_keeps_and_rewrites_the_newer_one(hold: Driver) -> None:
    hold.batch([rec(7, due_s=1010)], NOW)
    stale, rewrite = hold.batch([tomb(8, fired=3)], NOW + 1)
    assert (stale.kind, rewrite.kind) == (ev.Kind.STALE, ev.Kind.REWRITE)
    # The kept version is appended again, as it was, so compaction cannot drop it.
    assert (rewrite.offset, rewrite.partition, rewrite.value) == (7, 1, b"p")
    assert hold.held_offset(TOPIC, "a") == 7
    assert kinds(hold.batch([tomb(9, fired=7)], NOW + 2)) == [ev.Kind.CANCELLED]


def test_no_rewrite_when_a_newer_version_follows_the_tombstone(hold: Driver) -> None:
    hold.batch([rec(7, due_s=1010)], NOW)
    assert kinds(hold.batch([tomb(8, fired=3), rec(9, due_s=1020)], NOW + 1)) == [
        ev.Kind.STALE, ev.Kind.UPDATED,
    ]  # fmt: skip


def test_past_due_fires_at_once_and_too_late_is_expired(hold: Driver) -> None:
    missed, fired = hold.batch([rec(0, due_s=990)], NOW)
    assert (missed.kind, fired.kind) == (ev.Kind.MISSED, ev.Kind.RAISE)
    missed, dead = hold.batch([rec(1, due_s=900)], NOW + 1)  # 100 s late, max 60 s
    assert missed.kind == ev.Kind.MISSED
    assert (dead.kind, dead.reason, dead.due_ms) == (ev.Kind.DEAD, ev.EXPIRED, 900_000)
    assert hold.held_offset(TOPIC, "a") is None


def test_timer_that_fell_due_while_down_obeys_max_lateness(hold: Driver) -> None:
    hold.batch([rec(0, due_s=1010)], NOW)
    (dead,) = hold.batch([], 1_010_000 + 60_001)
    assert (dead.kind, dead.reason) == (ev.Kind.DEAD, ev.EXPIRED)


def test_schedule_then_its_tombstone_in_one_batch_never_fires(hold: Driver) -> None:
    """What a rebuild reads: a fired (past-due) schedule followed by its tombstone."""
    assert kinds(hold.batch([tomb(1, fired=0), rec(0, due_s=990)], NOW)) == [ev.Kind.CANCELLED]
    assert hold.held_offset(TOPIC, "a") is None


def test_only_the_last_version_in_a_batch_counts(hold: Driver) -> None:
    out = hold.batch([rec(0, due_s=990), rec(1, due_s=1030, value=b"v2")], NOW)
    assert kinds(out) == [ev.Kind.PLANNED]
    assert hold.held_offset(TOPIC, "a") == 1


def test_a_due_timer_and_a_cancel_in_one_batch_do_not_fire(hold: Driver) -> None:
    """Input runs before timers: the cancel wins over a timer due in the same batch."""
    hold.batch([rec(0, due_s=1010)], NOW)
    assert kinds(hold.batch([tomb(1)], 1_010_000)) == [ev.Kind.CANCELLED]


def test_invalid_record_keeps_and_rewrites_the_held_version(hold: Driver) -> None:
    """Compaction keeps the invalid record, not the held version before it: the held
    version is appended again so a rebuild (or a rebuilt catalog) still finds it."""
    hold.batch([rec(0, due_s=1010)], NOW)
    bad = rec(1, extra=((h.EPOCH, b"soon"), (h.TARGET_TOPIC, b"t")))
    dead, rewrite = hold.batch([bad], NOW + 1)
    assert (dead.kind, dead.offset) == (ev.Kind.DEAD, 1)
    assert "not a decimal number" in str(dead.reason)
    assert (rewrite.kind, rewrite.offset, rewrite.value) == (ev.Kind.REWRITE, 0, b"p")
    assert hold.held_offset(TOPIC, "a") == 0
    (fired,) = hold.batch([], 1_010_000)
    assert (fired.kind, fired.offset) == (ev.Kind.RAISE, 0)


def test_invalid_record_in_another_partition_needs_no_rewrite(hold: Driver) -> None:
    hold.batch([rec(0, due_s=1010)], NOW)
    bad = rec(1, partition=2, extra=((h.EPOCH, b"soon"), (h.TARGET_TOPIC, b"t")))
    assert kinds(hold.batch([bad], NOW + 1)) == [ev.Kind.DEAD]


def test_versions_across_partitions_are_ordered_by_timestamp(hold: Driver) -> None:
    """A high offset in one partition is not newer than a low one in another."""
    hold.batch([rec(1000, due_s=1010, partition=0, ts=NOW - 50)], NOW)
    updated = hold.batch([rec(5, due_s=1020, value=b"v2", partition=2, ts=NOW - 10)], NOW + 1)
    # The replaced version stays last in partition 0: retired there, so a rebuild that
    # reads partition 0 alone cannot bring it back.
    assert [(e.kind, e.partition, e.offset) for e in updated] == [
        (ev.Kind.RETIRE, 0, 1000), (ev.Kind.UPDATED, None, None),
    ]  # fmt: skip
    older = rec(6, due_s=1030, value=b"v0", partition=3, ts=NOW - 60)
    stale = hold.batch([older], NOW + 2)
    assert [(e.kind, e.partition, e.offset) for e in stale] == [
        (ev.Kind.STALE, None, None), (ev.Kind.RETIRE, 3, 6),
    ]  # fmt: skip
    (fired,) = hold.batch([], 1_020_000)
    assert (fired.kind, fired.value, fired.partition) == (ev.Kind.RAISE, b"v2", 2)


def test_equal_timestamps_across_partitions_the_higher_partition_wins(hold: Driver) -> None:
    out = hold.batch([rec(9, due_s=1010, value=b"p1", partition=1),
                      rec(0, due_s=1020, value=b"p3", partition=3)], NOW)  # fmt: skip
    assert [(e.kind, e.offset) for e in out] == [(ev.Kind.RETIRE, 9), (ev.Kind.PLANNED, None)]
    assert hold.held_offset(TOPIC, "a") == 0


def test_cancel_written_by_another_partitioner_cancels(hold: Driver) -> None:
    """Scheduled through one partitioner (partition 0), cancelled through another (2)."""
    hold.batch([rec(40, due_s=1010, partition=0, ts=NOW - 50)], NOW)
    out = hold.batch([tomb(3, partition=2, ts=NOW - 10)], NOW + 1)
    assert [(e.kind, e.partition, e.offset) for e in out] == [
        (ev.Kind.CANCELLED, None, None), (ev.Kind.RETIRE, 0, 40),
    ]  # fmt: skip
    assert hold.batch([], 1_010_000) == []


def test_cancel_read_before_an_older_version_of_another_partition_still_wins(
    hold: Driver,
) -> None:
    """In one batch the cancel (partition 0) sorts before the schedule (partition 2) it
    cancels; the schedule is older by timestamp, so it must not be planned."""
    batch = [tomb(3, partition=0, ts=NOW - 10), rec(40, due_s=1010, partition=2, ts=NOW - 50)]
    assert kinds(hold.batch(batch, NOW)) == [ev.Kind.UNKNOWN_CANCEL, ev.Kind.STALE, ev.Kind.RETIRE]
    assert hold.batch([], 1_010_000) == []


def test_an_older_cancel_from_another_partition_does_not_cancel(hold: Driver) -> None:
    hold.batch([rec(40, due_s=1010, partition=0, ts=NOW - 10)], NOW)
    assert kinds(hold.batch([tomb(3, partition=2, ts=NOW - 50)], NOW + 1)) == [ev.Kind.STALE]
    (fired,) = hold.batch([], 1_010_000)
    assert fired.kind == ev.Kind.RAISE


def test_own_tombstone_in_another_partition_keeps_the_newer_version_without_rewrite(
    hold: Driver,
) -> None:
    """The fired version sat in partition 0; the newer one in partition 2 is untouched
    by compaction of partition 0."""
    hold.batch([rec(4, due_s=1010, partition=2, ts=NOW - 10)], NOW)
    assert kinds(hold.batch([tomb(8, fired=3, partition=0, ts=NOW)], NOW + 1)) == [ev.Kind.STALE]
    assert hold.held_offset(TOPIC, "a") == 4


def test_no_retire_when_a_later_record_of_its_partition_is_in_the_batch(hold: Driver) -> None:
    """What a rebuild reads: the retired version is followed by delayline's tombstone in
    its own partition, so it is not retired again."""
    out = hold.batch([rec(40, due_s=1010, partition=0, ts=NOW - 50), tomb(41, fired=40, partition=0,
                      ts=NOW - 5), rec(3, due_s=1020, partition=2, ts=NOW - 10)], NOW)  # fmt: skip
    assert kinds(out) == [ev.Kind.CANCELLED, ev.Kind.PLANNED]
    assert hold.held_offset(TOPIC, "a") == 3


def test_the_retire_tombstone_read_back_leaves_the_newer_version(hold: Driver) -> None:
    hold.batch([rec(40, due_s=1010, partition=0, ts=NOW - 50)], NOW)
    hold.batch([rec(3, due_s=1020, partition=2, ts=NOW - 10)], NOW + 1)
    assert kinds(hold.batch([tomb(41, fired=40, partition=0, ts=NOW)], NOW + 2)) == [ev.Kind.STALE]
    assert hold.held_offset(TOPIC, "a") == 3
    (fired,) = hold.batch([], 1_020_000)
    assert (fired.kind, fired.partition) == (ev.Kind.RAISE, 2)


def test_replaced_then_cancelled_in_one_batch(hold: Driver) -> None:
    hold.batch([rec(0, due_s=1010)], NOW)
    assert kinds(hold.batch([rec(1, due_s=1020), tomb(2)], NOW + 1)) == [ev.Kind.CANCELLED]
    assert hold.held_offset(TOPIC, "a") is None
    assert hold.batch([], 1_020_000) == []


def copy(offset: int, of: int, due_s: float = 1010, partition: int = 1) -> ConsumedRecord:
    """The copy a REWRITE appends at ``offset`` of the version at ``of``."""
    extra = ((h.COPY_OF, str(of).encode()),)
    return rec(offset, due_s=due_s, extra=extra, partition=partition)


def test_a_rewrite_read_back_keeps_one_timer(hold: Driver) -> None:
    """The copy comes back as the version it copies: no update, one timer, one
    delivery, which names the original's place."""
    hold.batch([rec(0, due_s=1010)], NOW)
    assert kinds(hold.batch([copy(5, of=0)], NOW + 1)) == [ev.Kind.STALE]
    assert hold.held_offset(TOPIC, "a") == 0
    (fired,) = hold.batch([], 1_010_000)
    assert (fired.kind, fired.offset) == (ev.Kind.RAISE, 0)
    assert hold.batch([], 1_020_000) == []


def test_a_newer_version_written_before_the_rewrite_copy_lands_wins(hold: Driver) -> None:
    """B is written while the batch that rewrites A runs, so the copy of A lands after
    B: the copy is A, older than B, and B is delivered (and written again, since the
    copy now hides it from compaction)."""
    bad = rec(1, value=b"bad")
    assert kinds(hold.batch([rec(0, due_s=1010), bad], NOW)) == [
        ev.Kind.DEAD,
        ev.Kind.REWRITE,
        ev.Kind.PLANNED,
    ]
    second = hold.batch([rec(2, due_s=1020, value=b"B"), copy(3, of=0)], NOW + 500)
    assert kinds(second) == [ev.Kind.STALE, ev.Kind.REWRITE, ev.Kind.UPDATED]
    assert (second[1].offset, second[1].value) == (2, b"B")
    assert hold.held_offset(TOPIC, "a") == 2
    assert hold.batch([], 1_010_000) == [], "A must not fire"
    (fired,) = hold.batch([], 1_020_000)
    assert (fired.kind, fired.value) == (ev.Kind.RAISE, b"B")


def test_a_copy_read_first_is_its_original(hold: Driver) -> None:
    """A rebuild after compaction finds the copy alone: it holds the original's place,
    so delayline's tombstone of that place ends it."""
    assert kinds(hold.batch([copy(5, of=0)], NOW)) == [ev.Kind.PLANNED]
    assert hold.held_offset(TOPIC, "a") == 0
    assert kinds(hold.batch([tomb(6, fired=0)], NOW + 1)) == [ev.Kind.CANCELLED]
    assert hold.batch([], 1_020_000) == []


def test_a_copy_after_what_hid_its_version_needs_no_other_copy(hold: Driver) -> None:
    assert kinds(hold.batch([rec(0, due_s=1010), rec(1, value=b"bad")], NOW))[-2:] == [
        ev.Kind.REWRITE, ev.Kind.PLANNED,
    ]  # fmt: skip
    assert kinds(hold.batch([rec(2, value=b"bad"), copy(3, of=0)], NOW + 1)) == [
        ev.Kind.DEAD,
        ev.Kind.STALE,
    ]


def test_a_copy_stranded_by_another_partition_is_retired(hold: Driver) -> None:
    """The copy read in the batch where another partition's newer version replaces it
    is last of its key in its partition: it is retired (by its original's place)."""
    hold.batch([rec(0, due_s=1010), rec(1, value=b"bad")], NOW)
    newer = rec(0, due_s=1020, value=b"B", partition=2, ts=NOW + 10)
    events = hold.batch([copy(3, of=0), newer], NOW + 20)
    assert kinds(events) == [ev.Kind.STALE, ev.Kind.RETIRE, ev.Kind.UPDATED]
    assert (events[1].partition, events[1].offset) == (1, 0)


def test_a_copy_of_header_naming_no_earlier_offset_is_ignored(hold: Driver) -> None:
    assert kinds(hold.batch([copy(5, of=5)], NOW)) == [ev.Kind.PLANNED]
    assert hold.held_offset(TOPIC, "a") == 5


def test_replayed_batch_emits_the_same_events(make_hold: Callable[[], Driver]) -> None:
    """Same records, same batch time, same state: same events (what makes the fire
    stage's exactly-once check sound)."""
    runs = []
    for _ in range(2):
        driver = make_hold()
        driver.batch([rec(0, due_s=1010)], NOW)
        runs.append(driver.batch([tomb(1, fired=0), rec(2, due_s=990)], NOW + 1))
    assert runs[0] == runs[1]
    assert kinds(runs[0]) == [ev.Kind.CANCELLED, ev.Kind.MISSED, ev.Kind.RAISE]


def test_without_max_lateness_anything_fires() -> None:
    events = MemoryHold(PipelineConfig()).offer([rec(0, due_s=1)], 10**12)
    assert [e.kind for e in events] == [ev.Kind.MISSED, ev.Kind.RAISE]


def test_with_a_lead_a_schedule_is_raised_that_long_before_its_due_time(
    make_hold: Callable[..., Driver],
) -> None:
    hold = make_hold(lead_ms=2_000)
    planned = hold.batch([rec(0, due_s=1010)], NOW)
    assert [(e.kind, e.due_ms) for e in planned] == [(ev.Kind.PLANNED, 1_010_000)]
    assert hold.batch([], 1_007_999) == []
    (fired,) = hold.batch([], 1_008_000)
    assert (fired.kind, fired.due_ms, fired.value) == (ev.Kind.RAISE, 1_010_000, b"p")
    assert hold.held_offset(TOPIC, "a") is None
    assert hold.batch([], 1_010_000) == [], "raised once, not again at the due time"


def test_with_a_lead_an_update_moves_the_raise_time(make_hold: Callable[..., Driver]) -> None:
    hold = make_hold(lead_ms=2_000)
    hold.batch([rec(0, due_s=1010)], NOW)
    hold.batch([rec(1, due_s=1020, value=b"v2")], NOW + 1)
    assert hold.batch([], 1_008_000) == [], "the old version's timer must be gone"
    (fired,) = hold.batch([], 1_018_000)
    assert (fired.kind, fired.value) == (ev.Kind.RAISE, b"v2")


def test_with_a_lead_a_schedule_inside_it_fires_at_once_and_only_past_due_is_missed(
    make_hold: Callable[..., Driver],
) -> None:
    hold = make_hold(lead_ms=2_000)
    short, fired = hold.batch([rec(0, due_s=1001.5)], NOW)  # 1.5 s to go: inside the lead
    assert short.kind == ev.Kind.SHORT
    assert (fired.kind, fired.due_ms) == (ev.Kind.RAISE, 1_001_500)
    missed, fired = hold.batch([rec(1, due_s=999)], NOW)
    assert (missed.kind, fired.kind) == (ev.Kind.MISSED, ev.Kind.RAISE)
