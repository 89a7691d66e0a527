"""The Redis hold's store on a real Redis: what a replay, a released record and a
second pipeline's task see (the rules themselves: test_hold_rules_redis.py)."""

from __future__ import annotations

import uuid

import pytest

from delayline.contract import ConsumedRecord
from delayline.contract import headers as h
from delayline.contract.contracts import InputParser
from delayline.contract.topology import Topology
from delayline.holds.redis.config import RedisHoldConfig
from delayline.holds.redis.store import RedisHoldError, RedisStore, fingerprint

NOW = 1_800_000_000_000


def store(url: str, prefix: str) -> RedisStore:
    return RedisStore(RedisHoldConfig(url=url, prefix=prefix), InputParser(Topology()))


def schedule(offset: int, due_ms: int, key: bytes = b"a", value: bytes = b"p") -> ConsumedRecord:
    headers = ((h.EPOCH, f"{due_ms / 1000:.3f}".encode()), (h.TARGET_TOPIC, b"target"))
    return ConsumedRecord("delayline-schedules", 0, offset, NOW, key, value, headers)


def kinds(result: object) -> list[str]:
    return [e["kind"] for e in result.events.to_pylist()]  # type: ignore[attr-defined]


@pytest.fixture
def prefix() -> str:
    return f"store-{uuid.uuid4().hex[:6]}"


def test_a_replay_emits_the_first_decision_whatever_changed_since(
    redis_url: str, prefix: str
) -> None:
    first = store(redis_url, prefix)
    records = [schedule(0, NOW + 1_000), schedule(1, NOW + 10_000, key=b"b")]
    assert kinds(first.run_task("r@1", "{}", 1, 0, records, NOW)) == ["planned", "planned"]
    claimed = first.run_task("r@1", "{}", 2, 0, [], NOW + 1_000)
    assert kinds(claimed) == ["fire"]
    # Meanwhile a newer version of b arrives and a is gone from the sorted set.
    first.run_task("r@1", "{}", 3, 0, [schedule(2, NOW + 20_000, key=b"b")], NOW + 2_000)
    replay = store(redis_url, prefix).run_task("r@1", "{}", 2, 0, [], NOW + 9_000)
    assert replay.replay
    assert replay.now_ms == NOW + 1_000
    assert replay.events.to_pylist() == claimed.events.to_pylist()
    again = first.run_task("r@1", "{}", 1, 0, records, NOW + 9_000)
    assert (again.replay, kinds(again)) == (True, ["planned", "planned"])


def test_a_replay_with_other_input_stops_instead_of_guessing(redis_url: str, prefix: str) -> None:
    s = store(redis_url, prefix)
    s.run_task("r@1", "{}", 1, 0, [schedule(0, NOW + 5_000)], NOW)
    with pytest.raises(RedisHoldError, match="another order"):
        s.run_task("r@1", "{}", 1, 0, [schedule(7, NOW + 5_000)], NOW)


def test_released_records_are_gone_and_a_late_finish_is_harmless(
    redis_url: str, prefix: str
) -> None:
    s = store(redis_url, prefix)
    for batch in (1, 2, 3):
        s.run_task("r@1", "{}", batch, 0, [], NOW)
    assert s.release("r@1", 3) == 2
    assert s.task_run(s.keys.task("r@1", 1, 0)) is None
    assert s.task_run(s.keys.task("r@1", 3, 0)) == "r@1"
    s.finish(s.keys.task("r@1", 1, 0))  # the owner released it before a taker finished
    assert s.task_run(s.keys.task("r@1", 1, 0)) is None


def test_a_run_keeps_the_claimers_of_its_first_batch(redis_url: str, prefix: str) -> None:
    s = store(redis_url, prefix)
    assert s.claimers("r@1", 2) == 2
    assert s.claimers("r@1", 4) == 2
    assert s.claimers("r@2", 4) == 4


def test_a_claimed_schedule_is_never_claimed_again(redis_url: str, prefix: str) -> None:
    a, b = store(redis_url, prefix), store(redis_url, prefix)
    records = [schedule(i, NOW + 1_000, key=f"k{i}".encode()) for i in range(200)]
    a.run_task("a@1", "{}", 1, 0, records, NOW)
    fired = [
        e["id"]
        for s, run, batch in ((a, "a@1", 2), (b, "b@1", 1), (a, "a@1", 3))
        for e in s.run_task(run, "{}", batch, 0, [], NOW + 1_000).events.to_pylist()
    ]
    assert sorted(fired) == sorted(f"k{i}" for i in range(200))


def test_the_fingerprint_names_each_partitions_span() -> None:
    records = [schedule(5, NOW), schedule(3, NOW), schedule(9, NOW)]
    assert fingerprint(records) == "delayline-schedules/0@3-9x3"
    assert fingerprint([]) == ""
