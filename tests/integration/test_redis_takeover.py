"""A silent pipeline's open claims, finished by another pipeline of the same Redis
prefix: once, as the owner (its marker on its commits topic, its transactional id).

Real Kafka and Redis; the two pipelines are their Redis holds, driven as the driver
and a Spark task drive them, without Spark.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from tests.support import Topics, make_topics

from delayline.contract import ConsumedRecord
from delayline.contract import headers as h
from delayline.contract.formats import REDIS_TASK
from delayline.contract.topology import Topology
from delayline.core.clock import SystemClock
from delayline.dev.testing import create_topic, unique_topic
from delayline.errors import FormatVersionError
from delayline.fire.partition import fire_rows
from delayline.fire.tasks import deliver_as, new_firer, split_events
from delayline.holds.redis.config import RedisHoldConfig
from delayline.holds.redis.hold import RedisHold
from delayline.holds.redis.takeover import owner_json, take_over
from delayline.kafka.reader import read_topic
from delayline.pipeline.config import PipelineConfig


def config_of(bootstrap: str, topics: Topics, name: str, url: str, prefix: str) -> PipelineConfig:
    topology = Topology(
        bootstrap_servers=bootstrap,
        schedules_topics=(topics.schedules,),
        dead_letter_topic=topics.dead_letters,
        history_topic=topics.history,
        commits_topic=topics.commits,
    )
    return PipelineConfig(
        topology,
        hold="redis",
        lead_ms=0,
        query_name=name,
        hold_settings=RedisHoldConfig(url=url, prefix=prefix, lease_ms=1_000),
    )


def two_pipelines(
    bootstrap: str, redis_url: str
) -> tuple[str, Topics, PipelineConfig, RedisHold, RedisHold]:
    """Two pipelines' Redis holds under one fresh prefix: A's (the owner, on its topics)
    and B's (on topics of its own)."""
    prefix = f"takeover-{uuid.uuid4().hex[:6]}"
    topics_a, topics_b = make_topics(bootstrap), make_topics(bootstrap)
    owner = config_of(bootstrap, topics_a, f"{prefix}-a", redis_url, prefix)
    hold_a = RedisHold(owner, deliver_as)
    hold_b = RedisHold(config_of(bootstrap, topics_b, f"{prefix}-b", redis_url, prefix), deliver_as)
    return prefix, topics_a, owner, hold_a, hold_b


def test_a_silent_pipelines_claims_are_delivered_once_by_another(
    kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    target = create_topic(kafka_bootstrap, unique_topic("target"))
    prefix, topics_a, owner, hold_a, hold_b = two_pipelines(kafka_bootstrap, redis_url)
    run_a = f"{owner.query_name}@1"
    now = SystemClock().now_ms()
    due_s = (now + 300) / 1000
    records = [
        ConsumedRecord(topics_a.schedules, 0, i, now, f"id-{i}".encode(), f"p{i}".encode(),
                       ((h.EPOCH, f"{due_s:.3f}".encode()), (h.TARGET_TOPIC, target.encode())))
        for i in range(3)
    ]  # fmt: skip
    store_a = hold_a.store
    store_a.heartbeat(run_a, now)
    planned = store_a.run_task(run_a, owner_json(owner), 1, 0, records, now)
    assert [e["kind"] for e in planned.events.to_pylist()] == ["planned"] * 3
    time.sleep(0.4)
    # A's driver starts batch 2 past batch 1 (releasing its record), its task claims the
    # three, then A goes silent before its transaction.
    assert store_a.release(run_a, 2) == 1
    claimed = store_a.run_task(run_a, owner_json(owner), 2, 0, [], SystemClock().now_ms())
    assert [e["kind"] for e in claimed.events.to_pylist()] == ["fire"] * 3
    assert store_a.pending() == 0
    time.sleep(1.1)  # A's lease (1 s) ends; its heartbeat is as old

    assert (
        take_over(hold_b.store, hold_b.config, f"{prefix}-b@2", SystemClock().now_ms(), deliver_as)
        == 1
    )
    delivered = read_topic(kafka_bootstrap, target)
    assert sorted(r.value or b"" for r in delivered) == [b"p0", b"p1", b"p2"]
    # Under A's marker, on A's commits topic: A's own attempt finds it committed ...
    split = split_events(claimed.events, owner, 2)
    firer = new_firer(owner, f"{owner.transactional_id}-p0")
    try:
        report = fire_rows(
            split.rows, 0, 2, run_a, owner, firer, SystemClock(), refresh=True,
            handover=split.handover,
        )  # fmt: skip
    finally:
        firer.close()
    assert report.replay
    # ... and A's replay of the task reads the record back as done: nothing to write.
    replay = store_a.run_task(run_a, owner_json(owner), 2, 0, [], SystemClock().now_ms())
    assert replay.replay
    assert replay.events.num_rows == 0
    # Nothing open is left to take over again.
    assert (
        take_over(
            hold_b.store, hold_b.config, f"{prefix}-b@2", SystemClock().now_ms() + 5_000, deliver_as
        )
        == 0
    )
    assert len(read_topic(kafka_bootstrap, target)) == 3
    hold_a.close()
    hold_b.close()


def test_a_silent_runs_task_of_a_newer_release_stops_the_taker_and_stays(
    kafka_bootstrap: str, redis_url: str
) -> None:
    """Retrying it at every lease end would never deliver it: the taker stops and says why,
    and the record stays for a release that reads it."""
    prefix, _, owner, hold_a, hold_b = two_pipelines(kafka_bootstrap, redis_url)
    run_a = f"{owner.query_name}@1"
    now = SystemClock().now_ms()
    newer = json.dumps({**json.loads(owner_json(owner)), "format": REDIS_TASK.current + 1})
    hold_a.store.heartbeat(run_a, now)
    hold_a.store.run_task(run_a, newer, 1, 0, [], now)
    time.sleep(1.1)  # A's lease (1 s) ends
    later = SystemClock().now_ms()
    with pytest.raises(FormatVersionError, match="Redis task record in format"):
        take_over(hold_b.store, hold_b.config, f"{prefix}-b@2", later, deliver_as)
    assert hold_b.store.expired_tasks(later + 5_000), "the record was dropped"
    hold_a.close()
    hold_b.close()


def test_an_idle_pipelines_hold_asks_for_a_batch_within_a_lease(
    kafka_bootstrap: str, redis_url: str
) -> None:
    """Claims are taken over only by a batch, and an idle pipeline's heartbeat is minutes:
    its hold asks for a wake a lease from now at the latest, nothing open or not; and
    for a claim's lease end when that comes first."""
    _prefix, topics_a, owner, hold_a, hold_b = two_pipelines(kafka_bootstrap, redis_url)
    lease = owner.hold_settings.lease_ms
    try:
        before = SystemClock().now_ms()
        (wake,) = hold_b.wake_times()  # nothing pending, nothing claimed
        assert before < wake <= SystemClock().now_ms() + lease
        # On a grid of leases: the batches of one lease ask for one wake between them.
        assert wake % lease == 0
        run_a = f"{owner.query_name}@1"
        now = SystemClock().now_ms()
        due_s = (now + 60_000) / 1000
        record = ConsumedRecord(
            topics_a.schedules, 0, 0, now, b"id-0", b"p0",
            ((h.EPOCH, f"{due_s:.3f}".encode()), (h.TARGET_TOPIC, b"t")),
        )  # fmt: skip
        hold_a.store.heartbeat(run_a, now)
        hold_a.store.run_task(run_a, owner_json(owner), 1, 0, [record], now)  # open: leased
        time.sleep(0.3)
        *due, lease_end = hold_b.wake_times()  # the schedule's raise time, A's lease end
        assert due == [int(due_s * 1000)]
        assert lease_end < SystemClock().now_ms() + lease - 200, lease_end
    finally:
        hold_a.close()
        hold_b.close()
