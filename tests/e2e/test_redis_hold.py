"""The Redis hold end to end: real broker, real Redis, real pipelines, SIGKILLs counted.

Every test ends with the same three counts: nothing lost, nothing duplicated, nothing
delivered (or visible to a read_committed reader) before its due time.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import cast

import pytest

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import Delivery, DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.infra.broker import free_port
from delayline.infra.redis_server import LocalRedis, RedisServerConfig
from delayline.stores.redis.config import RedisHoldConfig
from delayline.stores.redis.store import connect
from tests.support import ARTIFACTS, Topics, eventually, make_topics, pipeline_args


def redis_args(url: str, prefix: str, *extra: str) -> list[str]:
    return ["--hold", "redis", "--redis-url", url, "--redis-prefix", prefix, *extra]


def schedule_spread(
    config: ClientConfig, target: str, prefix: str, total: int, start_ms: int, span_ms: int
) -> dict[str, int]:
    """``total`` schedules due over ``span_ms`` from ``start_ms`` (the first ones already
    due); of those due 15 s or more ahead (well past the lead), every 10th is updated
    (payload ``updated-<n>``, due 3 s later) and every 25th cancelled. An update or a
    cancel that arrives after its schedule was handed over does not stop it, by design.

    Returns:
        The due time of each schedule that must be delivered.
    """
    due: dict[str, int] = {}
    with Scheduler(config) as client:
        for i in range(total):
            sid = f"{prefix}-{i}"
            at = start_ms + i * span_ms // total - 2_000
            client.schedule(sid, f"payload-{i}".encode(), target, at=ms_to_datetime(at),
                            target_key=f"k{i}")  # fmt: skip
            due[sid] = at
        later = [i for i in range(total) if due[f"{prefix}-{i}"] >= start_ms + 15_000]
        for i in later[::10]:
            sid = f"{prefix}-{i}"
            due[sid] += 3_000
            client.schedule(sid, f"updated-{i}".encode(), target, at=ms_to_datetime(due[sid]),
                            target_key=f"k{i}")  # fmt: skip
        for i in later[5::25]:
            client.cancel(f"{prefix}-{i}")
            del due[f"{prefix}-{i}"]
    return due


def check_counts(deliveries: list[Delivery], due: dict[str, int]) -> None:
    counts = Counter(d.schedule_id for d in deliveries)
    duplicates = {k: n for k, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} duplicated: {list(duplicates.items())[:5]}"
    lost = set(due) - set(counts)
    assert not lost, f"{len(lost)} lost: {sorted(lost)[:5]}"
    unknown = {str(k) for k in counts} - set(due)
    assert not unknown, f"{len(unknown)} delivered that should not be: {sorted(unknown)[:5]}"
    early = [d for d in deliveries if d.timestamp_ms < due[d.schedule_id or ""]]
    assert not early, f"{len(early)} stamped before due"
    seen_early = [d for d in deliveries if d.arrival_ms < due[d.schedule_id or ""]]
    assert not seen_early, f"{len(seen_early)} visible before due"
    for d in deliveries:
        n = (d.schedule_id or "").rsplit("-", 1)[1]
        assert d.key == f"k{n}".encode()
        assert d.value in (f"payload-{n}".encode(), f"updated-{n}".encode())
    updated = [d for d in deliveries if (d.value or b"").startswith(b"updated-")]
    assert updated, "no update was delivered"
    for d in updated:  # the update's due time, not the first version's
        assert d.timestamp_ms >= due[d.schedule_id or ""]


def report(what: str, deliveries: list[Delivery], due: dict[str, int]) -> None:
    late = sorted(d.arrival_ms - due[d.schedule_id or ""] for d in deliveries)
    print(
        f"\n{what}: {len(deliveries)} delivered once each, 0 lost, 0 early; lateness p50 "
        f"{late[len(late) // 2]} ms, p99 {late[int(len(late) * 0.99)]} ms, max {late[-1]} ms"
    )


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

        eventually(a_has_open_records, 60, "A has open task records")
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
