"""Pacing, pure parts: target rates and windows as written, and the plan releasing paced
schedules (a rate's slots, a window's spread) against a clock the test drives."""

from __future__ import annotations

from collections import Counter

import pytest

from delayline.committer.due_plan import DuePlan
from delayline.committer.pacing import STEP_MS, Pacer, spread_ms
from delayline.committer.pending import Group, Pending
from delayline.contract.headers import WINDOW
from delayline.contract.pacing import (
    MAX_WINDOW_MS,
    TargetRates,
    WindowError,
    window_headers,
    window_of,
)
from delayline.contract.topology import Topology
from delayline.core.model import Schedule, SourceRef
from delayline.errors import ConfigError

T0 = 1_800_000_000_000  # a due time on a whole second


def test_rates_are_read_as_written() -> None:
    rates = TargetRates.parse(["orders=2000/s", " mail = 120/min ", "*=50/s"])
    assert rates.of("orders") == 2000
    assert rates.of("mail") == 2
    assert rates.of("other") == 50
    assert rates.describe() == ["orders=2000/s", "mail=2/s", "*=50/s"]
    assert TargetRates.parse(rates.describe()) == rates
    assert not TargetRates.parse([])
    assert TargetRates.parse(["a=1.5/s"]).of("b") is None


@pytest.mark.parametrize(
    ("items", "says"),
    [
        (["orders"], "TOPIC=N/s"),
        (["orders=fast"], "TOPIC=N/s"),
        (["=5/s"], "TOPIC=N/s"),
        (["orders=5/h"], "TOPIC=N/s"),
        (["orders=0/s"], "above 0"),
        (["a=1/s", "a=2/s"], "twice"),
        (["*=1/s", "*=2/s"], "twice"),
    ],
)
def test_a_bad_rate_says_what_is_accepted(items: list[str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        TargetRates.parse(items)


def test_a_window_round_trips_and_a_bad_one_says_why() -> None:
    for ms in (1, 1500, 60_000, MAX_WINDOW_MS):
        assert window_of(window_headers(ms)) == ms
    assert window_of(()) is None
    assert window_headers(None) == ()
    for value, says in (
        (b"soon", "duration"),
        (b"0s", "within"),
        (b"2h", "within"),
        (b"\xff", "UTF-8"),
    ):
        with pytest.raises(WindowError, match=says):
            window_of(((WINDOW, value),))
    with pytest.raises(WindowError, match="more than once"):
        window_of(((WINDOW, b"1m"), (WINDOW, b"1m")))


def test_only_the_header_contract_reads_a_window() -> None:
    topology = Topology(envelope_topics=("envelopes",))
    header = _schedule("a", T0, 0, headers=window_headers(60_000), topic="schedules")
    envelope = _schedule("b", T0, 1, headers=window_headers(60_000), topic="envelopes")
    assert topology.windowed(header)
    assert not topology.windowed(envelope)


def test_a_burst_with_one_window_is_spread_evenly_and_never_early() -> None:
    window, n = 60_000, 10_000
    ready = [spread_ms(T0, window, k) for k in range(1, n + 1)]
    assert min(ready) >= T0
    assert max(ready) < T0 + window
    per_second = Counter((r - T0) // 1000 for r in ready)
    mean = n / (window / 1000)
    assert sorted(per_second) == list(range(60))
    assert max(abs(c - mean) for c in per_second.values()) <= 0.05 * mean
    assert all(r % STEP_MS == 0 for r in ready)  # one transaction per step, not one each
    short = [spread_ms(T0 + 7, 150, k) for k in range(1, 200)]
    assert min(short) >= T0 + 7
    assert max(short) < T0 + 157


def test_a_rated_burst_goes_out_at_the_rate_in_due_order_never_early() -> None:
    """20,000 due within one second to a topic limited to 2,000/s: released over 10 s,
    at most 2,000 in any whole second, in due order, none before it is due."""
    plan = DuePlan(Pacer(TargetRates((("limited", 2000.0),))))
    dues = [T0 + (i * 7919) % 1000 for i in range(20_000)]  # scattered over the second
    for offset, due in enumerate(dues):
        _read(plan, _schedule(f"s{offset}", due, offset, target="limited"))
    plan.add(_pending(_schedule("free", T0, 20_000, target="free")))
    taken = _drain(plan, T0 - 2_000, T0 + 30_000)
    limited = [(p.schedule.id, p.due_ms, at) for at, g in taken for p in g.items
               if p.schedule.target_topic == "limited"]  # fmt: skip
    assert len(limited) == 20_000
    assert all(at >= due for _, due, at in limited)
    per_second = Counter((at - T0) // 1000 for _, _, at in limited)
    assert max(per_second.values()) <= 2000
    assert max(at for *_, at in limited) - T0 == pytest.approx(10_000, abs=200)
    order = [due for _, due, _ in limited]
    assert order == sorted(order)
    free = [at for at, g in taken for p in g.items if p.schedule.target_topic == "free"]
    assert free == [T0]  # another target is not held back
    stats = plan.pacer.stats["limited"]  # type: ignore[union-attr]
    assert stats.held >= 19_000
    assert stats.queued == 0
    assert 9_000 <= stats.max_delay_ms <= 10_100


def test_a_backlog_past_due_goes_out_at_the_rate_from_now() -> None:
    """What a restarted committer reads long past due (the pipeline was down) is not
    delivered at once: slots are never in the past."""
    plan = DuePlan(Pacer(TargetRates((("limited", 1000.0),))))
    for offset in range(3_000):
        _read(plan, _schedule(f"s{offset}", T0 + offset % 1000, offset, target="limited"))
    taken = _drain(plan, T0 + 60_000, T0 + 70_000)
    per_second = Counter((at - T0 - 60_000) // 1000 for at, g in taken for _ in g.items)
    assert max(per_second.values()) <= 1000
    assert sum(per_second.values()) == 3_000


def test_a_rate_is_shared_between_inflight_partitions() -> None:
    pacer = Pacer(TargetRates((("limited", 1000.0),)), partitions=2)
    plan = DuePlan(pacer)
    for offset in range(4_000):
        _read(plan, _schedule(f"s{offset}", T0, offset, target="limited"), partition=offset % 2)
    taken = _drain(plan, T0, T0 + 10_000)
    per_second = Counter((at - T0) // 1000 for at, g in taken for _ in g.items)
    assert max(per_second.values()) <= 1000
    assert sum(per_second.values()) == 4_000


def test_what_leaves_the_queue_frees_its_place() -> None:
    pacer = Pacer(TargetRates((("limited", 10.0),)))
    plan = DuePlan(pacer)
    records = [_read(plan, _schedule(f"s{i}", T0, i, target="limited")) for i in range(5)]
    assert pacer.stats["limited"].queued == 5
    gone = records[0]
    plan.tombstone(0, 99, gone.key)  # its tombstone
    assert pacer.stats["limited"].queued == 4
    assert plan.offsets() == {0: 1}  # never past one that waits
    taken = _drain(plan, T0, T0 + 1_000)
    assert [p.schedule.id for _, g in taken for p in g.items] == ["s1", "s2", "s3", "s4"]
    assert [at for at, _ in taken] == [T0, T0 + 100, T0 + 200, T0 + 300]
    pacer.reset()
    assert pacer.stats["limited"].held == 3  # the figures are kept


def test_a_windowed_schedule_is_paced_without_a_rate_and_a_bad_window_is_not_spread() -> None:
    plan = DuePlan(Pacer(), windowed=lambda s: True)
    _read(plan, _schedule("w", T0, 0, headers=window_headers(60_000)))
    _read(plan, _schedule("bad", T0, 1, headers=((WINDOW, b"soon"),)))
    _read(plan, _schedule("plain", T0, 2))
    taken = {p.schedule.id: at for at, g in _drain(plan, T0, T0 + 61_000) for p in g.items}
    assert taken["plain"] == T0
    assert taken["bad"] == T0  # due at once: the committer dead-letters it
    assert T0 < taken["w"] < T0 + 60_000
    plain = DuePlan(Pacer(), windowed=lambda s: False)  # not the header contract
    _read(plain, _schedule("w", T0, 0, headers=window_headers(60_000)))
    assert plain.next_release_ms() == T0


def _schedule(
    sid: str,
    due_ms: int,
    offset: int,
    *,
    target: str = "target",
    headers: tuple[tuple[str, bytes | None], ...] = (),
    topic: str = "schedules",
) -> Schedule:
    return Schedule(sid, due_ms, target, b"k", b"p", headers, SourceRef(topic, 0, offset, 1))


def _pending(schedule: Schedule, partition: int = 0, read_ms: int = 0) -> Pending:
    """``schedule`` as the committer reads it from the in-flight topic at ``read_ms``."""
    offset = schedule.require_source().offset
    key = f"schedules/0/{offset}".encode()
    return Pending(partition, offset, key, schedule, read_ms, handed_ms=1)


def _read(plan: DuePlan, schedule: Schedule, partition: int = 0) -> Pending:
    pending = _pending(schedule, partition)
    plan.add(pending)
    return pending


def _drain(plan: DuePlan, start_ms: int, end_ms: int) -> list[tuple[int, Group]]:
    """What a committer stepping every 10 ms takes, with the time each group commits
    (never before its release): [(commit time, group)]."""
    taken: list[tuple[int, Group]] = []
    for now in range(start_ms, end_ms, 10):
        plan.release(now)
        while (at := plan.next_release_ms()) is not None and at <= now:
            group = plan.take(now, 5)
            assert group is not None
            assert group.commit_ms <= now
            taken.append((now, group))
    return taken


def test_commits_that_fall_behind_are_spaced_at_the_rate() -> None:
    """Groups written late commit no faster than the rate, with a step's tolerance: five
    groups of 200 to a 2,000/s topic, all ready at once, commit 100 ms apart after the
    first two; on schedule nothing waits."""
    pacer = Pacer(TargetRates((("limited", 2000.0),)))
    assert [pacer.commit_at(0, {"limited": 200}, T0) for _ in range(5)] == [
        T0, T0, T0 + 100, T0 + 200, T0 + 300
    ]  # fmt: skip
    on_time = [pacer.commit_at(0, {"limited": 200}, T0 + 600 + 100 * k) for k in range(5)]
    assert on_time == [T0 + 600 + 100 * k for k in range(5)]
    assert pacer.commit_at(0, {"free": 10_000}, T0) == T0  # no rate: at once
    assert pacer.commit_at(1, {"limited": 200}, T0) == T0  # another partition's share
    shared = Pacer(TargetRates((("limited", 2000.0),)), partitions=2)
    assert shared.commit_at(0, {"limited": 200}, T0) == T0
    assert shared.commit_at(0, {"limited": 200, "free": 5}, T0) == T0 + 100
    shared.reset()
    assert shared.commit_at(0, {"limited": 200}, T0) == T0


def test_a_rated_groups_size_is_one_step_of_its_share() -> None:
    pacer = Pacer(TargetRates((("limited", 5000.0), ("slow", 1.0))), partitions=2)
    assert pacer.step_size("limited") == 250
    assert pacer.step_size("slow") == 1
    assert pacer.step_size("free") is None


def test_a_rated_release_never_goes_before_the_one_given_before() -> None:
    """A slot rounded up to its step stays ahead of a later one that is not held back:
    releases keep due order (50/s: A's slot rounds up past B's due time)."""
    plan = DuePlan(Pacer(TargetRates((("limited", 50.0),))))
    for offset, (sid, due) in enumerate((("x", T0), ("a", T0 + 5), ("b", T0 + 50))):
        _read(plan, _schedule(sid, due, offset, target="limited"))
    taken = [p.schedule.id for _, g in _drain(plan, T0, T0 + 1_000) for p in g.items]
    assert taken == ["x", "a", "b"]


def test_a_group_holds_one_step_of_each_rated_topic_in_order() -> None:
    """Behind its slots, a committer takes one step of a rated topic per group, whatever
    comes first; what follows a full topic waits behind it (order kept)."""
    plan = DuePlan(Pacer(TargetRates((("slow", 100.0),))))
    _read(plan, _schedule("free", T0, 0, target="free"))
    for offset in range(1, 301):
        _read(plan, _schedule(f"s{offset}", T0, offset, target="slow"))
    for now in range(T0, T0 + 3_000, 100):
        plan.release(now)  # slots given while the lanes were stalled
    cap = plan.pacer.step_size  # type: ignore[union-attr]
    first = plan.take(T0 + 3_000, 5, 2_000, cap=cap)
    assert first is not None
    assert [p.schedule.target_topic for p in first.items].count("slow") == 10
    assert first.items[0].schedule.id == "free"


def test_a_backlog_read_late_keeps_its_lateness_for_max_lateness() -> None:
    plan = DuePlan(Pacer(TargetRates((("limited", 10.0),))))
    for offset in range(3):
        schedule = _schedule(f"s{offset}", T0, offset, target="limited")
        plan.add(_pending(schedule, read_ms=T0 + 3_600_000))  # read an hour after it was due
    plan.release(T0 + 3_600_000)
    held = [plan.take(T0 + 3_600_000 + 300, 5) for _ in range(3)]
    lates = sorted(p.late_ms for g in held if g is not None for p in g.items)
    assert lates == [0, 3_600_000, 3_600_000]  # the first, not held, counts from its due time
    first = min((p for g in held if g is not None for p in g.items), key=lambda p: p.release_ms)
    assert first.release_ms == T0
