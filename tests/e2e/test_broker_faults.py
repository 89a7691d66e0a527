"""The Kafka broker frozen and killed under a running pipeline, then counted.

Runs on a private broker (the session's is shared by every other test): SIGSTOP for
20 s while the committer's transactions are open, then SIGKILL for 30 s and a restart
on the same data directory. The pipeline rides both out (or exits with a clear error and
is started again); every schedule is then delivered once, none early, and no batch is
half visible. About 4 minutes: marked ``long`` (``make test-long``), out of ``make test``.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from delayline.client import ClientConfig, Scheduler
from delayline.contract.headers import KEY
from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.errors import KafkaUnavailableError
from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.infra.ports import free_port
from delayline.kafka.reader import read_topic
from tests.support import ARTIFACTS, eventually, make_topics, pipeline_args

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)]

TOTAL = 400
SPREAD_MS = 100_000
FREEZE_S = 20
OUTAGE_S = 30
TRANSACTION_TIMEOUT_S = 60  # FireConfig.transaction_timeout_ms: a frozen one is aborted then


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalBroker]:
    local = LocalBroker(
        BrokerConfig(data_dir=tmp_path / "broker", port=free_port(), controller_port=free_port())
    )
    local.start()
    try:
        yield local
    finally:
        if local.status().running:
            local.stop()


def delivered(bootstrap: str, topic: str) -> list[tuple[str, int]]:
    """``(schedule id, record timestamp)`` of every committed record of ``topic``."""
    out = []
    for record in read_topic(bootstrap, topic, timeout_ms=30_000):
        ids = [v.decode() for k, v in record.headers if k == KEY and v is not None]
        out.append((ids[0] if ids else (record.key or b"").decode(), record.timestamp_ms))
    return out


def test_broker_frozen_then_killed_loses_and_duplicates_nothing(
    broker: LocalBroker, tmp_path: Path
) -> None:
    bootstrap = broker.config.bootstrap_servers
    topics = make_topics(bootstrap)
    target = create_topic(bootstrap, unique_topic("target"), partitions=2)
    args = pipeline_args(topics, tmp_path / "checkpoint", "--max-lateness", "1h")
    with PipelineProcess(bootstrap, args, ARTIFACTS / f"broker-faults-{target}.log") as pipeline:
        pipeline.start()
        pipeline.wait_ready()
        began = time.time_ns() // 1_000_000
        due: dict[str, int] = {}
        config = ClientConfig(bootstrap_servers=bootstrap, schedules_topic=topics.schedules)
        with Scheduler(config) as client:
            for i in range(TOTAL):
                at = ms_to_datetime(began + 5_000 + i * SPREAD_MS // TOTAL)
                schedule = client.schedule(f"fault-{i}", b"x", target, at=at, target_key=f"k{i}")
                due[schedule.id] = schedule.due_ms

        def count_at_least(n: int) -> int | None:
            try:
                found = len(delivered(bootstrap, target))
            except KafkaUnavailableError:  # a new topic's metadata, or the broker away
                return None
            return found if found >= n else None

        pid = broker.status().pid
        assert pid is not None
        # Deliveries go out every 250 ms: a committer transaction is open most of the time.
        eventually(lambda: count_at_least(40), 120, "40 deliveries before the freeze")
        os.kill(pid, signal.SIGSTOP)
        time.sleep(FREEZE_S)
        os.kill(pid, signal.SIGCONT)
        thawed = time.monotonic()
        assert pipeline.proc is not None
        assert pipeline.proc.poll() is None, pipeline.tail()

        eventually(lambda: count_at_least(TOTAL // 2), 180, "half delivered before the kill")
        os.kill(pid, signal.SIGKILL)
        time.sleep(OUTAGE_S)
        broker.start()
        if pipeline.proc is not None and pipeline.proc.poll() is not None:
            # Allowed: an exit with a clear error (not Spark's traces), then a restart.
            error = pipeline.log_since_start().split("delayline: error: ")[-1]
            assert error.startswith("streaming query failed: "), pipeline.tail()
            assert "Traceback" not in error, error
            pipeline.proc = None
            pipeline.start()
            pipeline.wait_ready()

        eventually(lambda: count_at_least(TOTAL), 240, "every schedule delivered")
        # The frozen transactions have timed out by now; nothing may show up after.
        time.sleep(max(0.0, TRANSACTION_TIMEOUT_S + 5 - (time.monotonic() - thawed)))
        deliveries = delivered(bootstrap, target)
        history = delivered(bootstrap, topics.history)
        assert pipeline.terminate() == 0
    counts = Counter(sid for sid, _ in deliveries)
    duplicated = {sid: n for sid, n in counts.items() if n > 1}
    assert not duplicated, f"{len(duplicated)} duplicated: {list(duplicated.items())[:5]}"
    assert set(counts) == set(due), f"{len(set(due) - set(counts))} lost"
    early = [sid for sid, ts in deliveries if ts < due[sid]]
    assert not early, f"{len(early)} delivered early: {early[:5]}"
    # A delivery and its history record share a transaction: one never shows alone.
    assert sorted(sid for sid, _ in history) == sorted(counts), "a batch was half visible"
