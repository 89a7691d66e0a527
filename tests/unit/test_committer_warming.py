"""The committer reads target topics' facts ahead of their deliveries, one lookup at a
time, only when they would expire too soon, and has every partition's producers look
the topic up (how far ahead: ``warm_plan``'s tests in test_committer_logic.py)."""

from __future__ import annotations

import threading
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from delayline.committer.warming import WARM_COVERS_MS, Warmer
from delayline.core.clock import ManualClock
from delayline.fire.refusals import TopicFacts
from delayline.fire.topic_catalog import FACTS_TTL_MS, TopicCatalog

NOW = 1_000_000


class _Time:
    """The broker's clock ``skew_ms`` ahead of the host's."""

    def __init__(self, clock: ManualClock, skew_ms: int = 0) -> None:
        self.clock = clock
        self._skew_ms = skew_ms

    def host_ms(self, broker_ms: int) -> int:
        return broker_ms - self._skew_ms


class _Lane:
    """One partition's lanes: records what its producers were asked to look up; the
    first call blocks until ``gate`` is set, if given, and fails with ``failure``."""

    def __init__(
        self, gate: threading.Event | None = None, failure: Exception | None = None
    ) -> None:
        self.looked_up: list[set[str]] = []
        self._gate = gate
        self._failure = failure

    def load_metadata(self, topics: Collection[str]) -> None:
        self.looked_up.append(set(topics))
        if self._gate is not None:
            self._gate.wait(5)
            self._gate = None
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def unseen(self, topics: Collection[str]) -> set[str]:
        return set(topics).difference(*self.looked_up)


class _Cluster:
    """Describes every topic as deliverable; counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[set[str]] = []

    def __call__(self, topics: Collection[str], authorization: bool) -> dict[str, TopicFacts]:
        self.asked.append(set(topics))
        return {t: TopicFacts() for t in topics}


class _Lookups(ThreadPoolExecutor):
    """The lookups thread, counting the jobs it was given."""

    def __init__(self) -> None:
        super().__init__(1)
        self.jobs = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.jobs += 1
        return super().submit(fn, *args, **kwargs)


def _done(lookups: ThreadPoolExecutor) -> None:
    lookups.submit(lambda: None).result(5)  # every lookup submitted before is over


def test_one_lookup_at_a_time_for_every_partition_and_none_while_the_facts_are_fresh() -> None:
    clock = ManualClock(NOW)
    cluster = _Cluster()
    catalog = TopicCatalog(cluster, clock=clock.now_ms)
    gate = threading.Event()
    first, second = _Lane(gate), _Lane()
    lanes: Any = [first, second]
    with _Lookups() as lookups:
        warmer = Warmer(_Time(clock, skew_ms=500), lookups, catalog)  # type: ignore[arg-type]
        read = {"orders": NOW + 2_500}
        warmer.warm(read, lanes)
        assert read == {}  # taken
        read["refunds"] = NOW + 3_000
        warmer.warm(read, lanes)  # the first lookup still runs: nothing taken
        assert read == {"refunds": NOW + 3_000}
        gate.set()
        _done(lookups)
        warmer.warm(read, lanes)
        _done(lookups)
        assert cluster.asked == [{"orders"}, {"refunds"}]
        assert first.looked_up == second.looked_up == [{"orders"}, {"refunds"}]
        # Fresh facts are not read again, however often the committer steps: no job.
        jobs = lookups.jobs
        for _ in range(50):
            clock.advance(100)
            warmer.warm({"orders": clock.now_ms() + 2_000}, lanes)
        assert lookups.jobs == jobs
        assert len(cluster.asked) == 2
        # Close to expiring under a schedule read to them, they are.
        clock.advance(FACTS_TTL_MS)
        warmer.warm({"orders": clock.now_ms() + 2_000}, lanes)
        _done(lookups)
    assert cluster.asked[2:] == [{"orders"}]
    assert second.looked_up[2:] == [{"orders"}]


def test_a_topic_due_beyond_what_facts_cover_is_kept_and_warmed_on_a_later_call() -> None:
    clock = ManualClock(NOW)
    cluster = _Cluster()
    catalog = TopicCatalog(cluster, clock=clock.now_ms)
    lanes: Any = [_Lane()]
    far = NOW + 3 * WARM_COVERS_MS
    with ThreadPoolExecutor(1) as lookups:
        warmer = Warmer(_Time(clock), lookups, catalog)  # type: ignore[arg-type]
        warmer.warm({"far": far}, lanes)
        _done(lookups)
        assert cluster.asked == [{"far"}]
        clock.advance(2 * WARM_COVERS_MS)  # nothing more read to it meanwhile
        warmer.warm({}, lanes)
        _done(lookups)
    assert cluster.asked == [{"far"}, {"far"}]  # still due ahead: read again


def test_nothing_is_looked_up_without_a_lane() -> None:
    cluster = _Cluster()
    lookups: Any = None  # submitting would fail
    catalog = TopicCatalog(cluster)
    warmer = Warmer(_Time(ManualClock(NOW)), lookups, catalog)  # type: ignore[arg-type]
    read = {"t": NOW + 1_000}
    warmer.warm(read, [])
    assert read == {}
    assert cluster.asked == []


def test_a_partition_whose_producers_never_looked_a_fresh_topic_up_does() -> None:
    """Taken over (or a producer replaced after a fatal error) while the catalog's facts
    are fresh: the new producers look the topic up, the catalog is not asked again, and
    the producers that had looked it up are not asked again either."""
    clock = ManualClock(NOW)
    cluster = _Cluster()
    catalog = TopicCatalog(cluster, clock=clock.now_ms)
    old: Any = _Lane()
    new: Any = _Lane()
    with _Lookups() as lookups:
        warmer = Warmer(_Time(clock), lookups, catalog)  # type: ignore[arg-type]
        warmer.warm({"orders": NOW + 2_000}, [old])
        _done(lookups)
        clock.advance(1_000)
        warmer.warm({"orders": NOW + 3_000}, [old, new])  # a partition taken over
        _done(lookups)
        jobs = lookups.jobs
        warmer.warm({"orders": NOW + 4_000}, [old, new])  # both have: nothing to do
        assert lookups.jobs == jobs
    assert cluster.asked == [{"orders"}]
    assert old.looked_up == [{"orders"}]
    assert new.looked_up == [{"orders"}]


def test_a_failed_lookup_is_logged_and_the_next_one_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(NOW)
    catalog = TopicCatalog(_Cluster(), clock=clock.now_ms)
    lane: Any = _Lane(failure=RuntimeError("broker gone"))
    with ThreadPoolExecutor(1) as lookups:
        warmer = Warmer(_Time(clock), lookups, catalog)  # type: ignore[arg-type]
        warmer.warm({"orders": NOW + 2_000}, [lane])
        _done(lookups)
        warmer.warm({"refunds": NOW + 2_000}, [lane])
        _done(lookups)
    assert "looking target topics up ahead of their deliveries failed (broker gone)" in (
        caplog.text
    )
    assert lane.looked_up == [{"orders"}, {"refunds"}]
