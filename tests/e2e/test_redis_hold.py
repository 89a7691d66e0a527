"""The Redis hold end to end: real broker, real Redis, real pipelines, SIGKILLs counted.

Every test ends with the same three counts: nothing lost, nothing duplicated, nothing
delivered (or visible to a read_committed reader) before its due time.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import cast

import pytest

from delayline.client import ClientConfig
from delayline.core.faults import (
    FIRE_COMMITTED,
    PAUSE_AT_ENV,
    PAUSE_MARKER_ENV,
    REDIS_AFTER_RECORD,
    REDIS_BEFORE_RECORD,
)
from delayline.dev.harness import DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.holds.redis.config import RedisHoldConfig
from delayline.holds.redis.store import connect
from delayline.infra.ports import free_port
from delayline.infra.redis_server import LocalRedis, RedisServerConfig
from tests.counts import check_counts, report, schedule_spread
from tests.support import ARTIFACTS, Topics, eventually, make_topics, pipeline_args, wait_paused


def redis_args(url: str, prefix: str, *extra: str) -> list[str]:
    return ["--hold", "redis", "--redis-url", url, "--redis-prefix", prefix, *extra]


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[LocalRedis]:
    """A Redis of this test only (it gets killed)."""
    server = LocalRedis(RedisServerConfig(data_dir=tmp_path / "redis", port=free_port()))
    server.start()
    yield server
    if server.status().running:
        server.stop()


def pipeline(
    bootstrap: str, topics: Topics, checkpoint: Path, url: str, prefix: str, *extra: str
) -> PipelineProcess:
    return PipelineProcess(
        bootstrap,
        pipeline_args(topics, checkpoint, *redis_args(url, prefix, *extra)),
        ARTIFACTS / f"redis-{topics.schedules}.log",
    )


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_sigkill_of_the_pipeline_and_of_redis_mid_run(
    kafka_bootstrap: str, own_redis: LocalRedis, tmp_path: Path
) -> None:
    """1,000 schedules due over 40 s with updates and cancels: the pipeline SIGKILLed
    once and restarted, then redis-server SIGKILLed and restarted (appendfsync
    always): every schedule delivered once, none early."""
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("target"), partitions=2)
    url = own_redis.config.url
    config = ClientConfig(bootstrap_servers=kafka_bootstrap, schedules_topic=topics.schedules)
    process = pipeline(kafka_bootstrap, topics, tmp_path / "cp", url, "crash")
    with process as running, DeliveryCollector(kafka_bootstrap, [target]) as seen:
        running.start()
        running.wait_ready()
        due = schedule_spread(config, target, "r", 1_000, time.time_ns() // 10**6, 40_000)
        seen.wait_for(lambda d: len(d) >= 200, timeout_s=120)
        running.kill()
        running.start()
        running.wait_ready()
        seen.wait_for(lambda d: len(d) >= 500, timeout_s=120)
        pid = own_redis.status().pid
        assert pid is not None
        own_redis.stop_hard()
        time.sleep(2)  # batches meanwhile wait for Redis (the client retries)
        own_redis.start()
        seen.wait_for(lambda d: len({x.schedule_id for x in d}) >= len(due), timeout_s=180)
        time.sleep(5)  # anything duplicated late would show up now
        deliveries = seen.snapshot()
        assert running.terminate() == 0, running.tail()
    check_counts(deliveries, due)
    report("pipeline and Redis SIGKILLed", deliveries, due)
    client = connect(RedisHoldConfig(url=url, prefix="crash"))
    assert client.zcard("{crash}:due") == 0


POINTS = (REDIS_BEFORE_RECORD, REDIS_AFTER_RECORD, FIRE_COMMITTED)


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_sigkill_at_each_point_of_a_batch(
    kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    """300 schedules due over 30 s, with updates and cancels, are written before the
    pipeline starts, so its first batch holds them all (the first ones due already). A
    task of that batch stops at a point (``delayline.core.faults``) and the pipeline is
    SIGKILLed there, then restarted to stop at the next point of the batch's replay:
    before a task record is written; after it, before the fire stage's transaction;
    after that transaction commits, before Spark commits the batch. Restarted at last
    without a pause, it replays the batch once more: each schedule is delivered once,
    none early, and 30 written after the restart are delivered too."""
    prefix = f"kill-{uuid.uuid4().hex[:6]}"
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("target"), partitions=2)
    config = ClientConfig(bootstrap_servers=kafka_bootstrap, schedules_topic=topics.schedules)
    process = pipeline(kafka_bootstrap, topics, tmp_path / "cp", redis_url, prefix)
    began = time.monotonic()
    with process as running, DeliveryCollector(kafka_bootstrap, [target]) as seen:
        due = schedule_spread(config, target, "k", 300, time.time_ns() // 10**6, 30_000)
        for point in POINTS:
            marker = tmp_path / f"paused-{point}"
            running.start(env={PAUSE_AT_ENV: point, PAUSE_MARKER_ENV: str(marker)})
            wait_paused(running, marker)
            print(f"paused at {point} {time.monotonic() - began:.0f} s in")
            running.kill()
        running.start()  # without a pause
        running.wait_ready()
        seen.wait_for(lambda d: len({x.schedule_id for x in d}) >= len(due), timeout_s=120)
        after = schedule_spread(config, target, "after", 30, time.time_ns() // 10**6, 3_000)
        due |= after
        seen.wait_for(lambda d: len({x.schedule_id for x in d}) >= len(due), timeout_s=60)
        time.sleep(3)  # anything duplicated late would show up now
        deliveries = seen.snapshot()
        log = running.log_since_start()
        assert running.terminate() == 0, running.tail()
    assert "RedisHoldError" not in log
    check_counts(deliveries, due)
    report("SIGKILLed at each point of one batch and its replays", deliveries, due)
    print(f"{time.monotonic() - began:.0f} s in all")


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_two_pipelines_share_one_redis_and_one_is_killed(
    kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    """Two pipelines (each its own topics and checkpoint) share one Redis prefix:
    5,000 schedules due over 60 s; A is SIGKILLed mid-run and B finishes A's open
    claims as A (its marker, its fenced transactional id) once A's lease ends. A comes
    back later for what it had already handed to its committer. Each id fires once."""
    prefix = f"two-{uuid.uuid4().hex[:6]}"
    target = create_topic(kafka_bootstrap, unique_topic("target"), partitions=3)
    topics_a, topics_b = make_topics(kafka_bootstrap), make_topics(kafka_bootstrap)
    extra = ("--redis-lease", "5s")
    a = pipeline(kafka_bootstrap, topics_a, tmp_path / "a", redis_url, prefix, *extra,
                 "--query-name", f"{prefix}-a")  # fmt: skip
    b = pipeline(kafka_bootstrap, topics_b, tmp_path / "b", redis_url, prefix, *extra,
                 "--query-name", f"{prefix}-b")  # fmt: skip
    with ExitStack() as stack:
        seen = stack.enter_context(DeliveryCollector(kafka_bootstrap, [target]))
        for p in (stack.enter_context(a), stack.enter_context(b)):
            p.start()
        a.wait_ready()
        b.wait_ready()
        now = time.time_ns() // 10**6
        due: dict[str, int] = {}
        for topics, name in ((topics_a, "a"), (topics_b, "b")):
            config = ClientConfig(kafka_bootstrap, schedules_topic=topics.schedules)
            due |= schedule_spread(config, target, name, 2_500, now, 60_000)
        seen.wait_for(lambda d: len(d) >= 1_500, timeout_s=180)
        # Kill A while it has open task records (from its last batch's tasks until its
        # next batch releases them), so B has something to finish once A's lease ends.
        redis = connect(RedisHoldConfig(url=redis_url, prefix=prefix))

        def a_has_open_records() -> bool:
            keys = cast(list[bytes], redis.zrange(f"{{{prefix}}}:tasks", 0, -1))
            return any(f"{prefix}-a@" in k.decode() for k in keys)

        for _ in range(5):  # A's next batch may release them between a look and a kill
            eventually(a_has_open_records, 60, "A has open task records")
            a.pause()
            if a_has_open_records():
                break
            a.resume()
        else:
            pytest.fail("A released its task records before each kill")
        a.kill()
        eventually(lambda: "took over batch" in b.log_since_start(), 90, "B takes over")
        seen.wait_for(lambda d: len(d) >= 3_500, timeout_s=180)
        a.start()
        a.wait_ready()
        seen.wait_for(lambda d: len({x.schedule_id for x in d}) >= len(due), timeout_s=180)
        time.sleep(5)
        deliveries = seen.snapshot()
        assert a.terminate() == 0, a.tail()
        assert b.terminate() == 0, b.tail()
    check_counts(deliveries, due)
    report("two pipelines, one SIGKILLed", deliveries, due)
