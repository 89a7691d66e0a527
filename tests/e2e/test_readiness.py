"""Readiness when Kafka goes away, and a pipeline's Ctrl-C: what an operator sees."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaError, Message, Producer

from delayline.api.config import ApiConfig
from delayline.api.server import ApiServer
from delayline.committer.checkpoint_log import batch_planned_ms, latest_logged_batch
from delayline.contract.topology import Topology
from delayline.dev.harness import PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.infra.ports import free_port
from delayline.infra.procs import tree
from delayline.kafka.config import kafka_client_config
from tests.support import ARTIFACTS, eventually, make_topics, pipeline_args


def planned(checkpoint: Path, topic: str, ends: dict[int, int]) -> int | None:
    """The id of a micro-batch planned to read ``topic`` up to ``ends`` (an end offset
    per partition), if any: Spark writes ``offsets/<id>`` (the end offsets per topic and
    partition) when it starts a batch, ``commits/<id>`` when the batch is done."""
    offsets = checkpoint / "offsets"
    for path in sorted(offsets.iterdir() if offsets.is_dir() else [], key=lambda p: p.name):
        if not path.name.isdigit():
            continue
        for line in path.read_text().splitlines()[2:]:  # version, metadata, one per source
            with contextlib.suppress(ValueError):
                planned_ends = json.loads(line).get(topic, {})
                if all(planned_ends.get(str(p), -1) >= end for p, end in ends.items()):
                    return int(path.name)
    return None


def readyz(url: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{url}/readyz", timeout=10)
    return response.status_code, response.json()


@pytest.mark.slow
def test_api_readyz_fails_while_kafka_is_away_and_recovers(tmp_path: Path) -> None:
    """A private broker (the session's stays up for the other tests): stopped, the
    API's /readyz turns 503 and says why; started again, 200."""
    broker = LocalBroker(
        BrokerConfig(data_dir=tmp_path / "broker", port=free_port(), controller_port=free_port())
    )
    broker.start()
    bootstrap = broker.config.bootstrap_servers
    schedules = create_topic(
        bootstrap, unique_topic("sched"), partitions=2, config={"cleanup.policy": "compact"}
    )
    topology = Topology(
        bootstrap,
        (schedules,),
        dead_letter_topic=create_topic(bootstrap, unique_topic("dlq")),
        history_topic=None,
    )
    server = ApiServer(ApiConfig(topology=topology, catalog_path=tmp_path / "c.db", port=0))
    url = server.start()
    try:
        eventually(lambda: readyz(url)[0] == 200, 30, "catalog caught up")
        broker.stop()
        stopped = time.monotonic()

        def unready() -> dict[str, Any] | None:
            status, body = readyz(url)
            return body if status == 503 else None

        body = eventually(unready, 30, "503 while Kafka is away")
        print(f"503 after {time.monotonic() - stopped:.1f} s: {body}")
        assert body["status"] == "unavailable"
        assert body["reasons"][0].startswith("Kafka unreachable since ")
        info = httpx.get(f"{url}/info", timeout=10).json()
        assert info["catalog"]["kafka_unreachable_since"] is not None
        broker.start()
        started = time.monotonic()
        eventually(lambda: readyz(url) == (200, {"status": "ready"}), 60, "200 once Kafka is back")
        print(f"200 again {time.monotonic() - started:.1f} s after the broker answered")
        assert (
            httpx.get(f"{url}/info", timeout=10).json()["catalog"]["kafka_unreachable_since"]
            is None
        )
    finally:
        server.stop()
        if broker.status().running:
            broker.stop()


def readyz_and_a_quiet_ctrl_c(
    process: PipelineProcess, bootstrap: str, schedules: str, checkpoint: Path
) -> None:
    """The pipeline's own /readyz (started with ``--metrics-port 0``); its default log
    holds delayline's lines only; Ctrl-C (SIGINT to the process group, as a terminal
    sends it) stops it after the batch in flight, exit 0, no traceback.

    Checked at the end of a test that starts a pipeline anyway (a start costs 25-30 s):
    :func:`tests.e2e.test_crash.test_what_was_handed_over_goes_out_on_time_while_a_killed_pipeline_restarts`,
    on its restarted pipeline, whose log since its start (with a checkpoint a SIGKILL
    left) is what is checked."""
    try:
        metrics = process.metrics_url()
        eventually(lambda: readyz(metrics) == (200, {"status": "ready"}), 30, "pipeline ready")
        producer = Producer(kafka_client_config(bootstrap))
        ends: dict[int, int] = {}

        def acked(err: KafkaError | None, msg: Message) -> None:
            assert err is None, err
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None
            assert offset is not None
            ends[partition] = max(ends.get(partition, 0), offset + 1)

        for i in range(200):  # invalid (no due time): dead-lettered, a batch to work on
            producer.produce(schedules, key=f"bad-{i}".encode(), value=b"x", on_delivery=acked)
        assert producer.flush(10) == 0
        batch = eventually(lambda: planned(checkpoint, schedules, ends), 60, "batch planned")
        code = process.interrupt()  # at once: the batch is in flight (or just done)
    finally:
        if process.proc is not None:
            process.kill()
    text = process.log_since_start()
    assert code == 0, text[-3000:]
    assert "Traceback" not in text
    assert "SIGINT received: finishing the batch in flight" in text
    assert text.rstrip().endswith("stopped"), text[-2000:]
    assert (checkpoint / "commits" / str(batch)).exists(), "the batch in flight finished"
    assert len([x for x in text.splitlines() if "bad-" in x and "dead-lettered" in x]) == 200
    foreign = [
        line
        for line in text.splitlines()
        if " delayline." not in line  # every line of ours names its delayline logger
    ]
    assert foreign == [], "\n".join(foreign[:20])


def last_batch_ms(metrics: str) -> int | None:
    progress = httpx.get(f"{metrics}/progress", timeout=10).json()
    last = progress.get("last_batch")
    return None if last is None else int(last["finished_ms"])


def spark_jvm(root: int) -> int:
    """The pipeline's Spark JVM (local mode: the driver's py4j gateway, a child)."""
    jvms = [pid for pid in tree(root) if Path(f"/proc/{pid}/comm").read_text().strip() == "java"]
    assert len(jvms) == 1, jvms
    return jvms[0]


@pytest.mark.long
def test_an_idle_pipeline_stays_ready_and_a_frozen_one_is_found(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Readiness follows the batches the pipeline needs. Idle past a minute with no batch
    (the heartbeat is a backstop of minutes), /readyz stays 200. Its Spark JVM frozen
    (SIGSTOP), a new record needs a batch that cannot run: 503 within a minute and the
    batch wait, saying so; thawed (SIGCONT), ready again."""
    topics = make_topics(kafka_bootstrap)
    log = ARTIFACTS / f"readiness-idle-{topics.schedules}.log"
    args = pipeline_args(
        topics, tmp_path / "checkpoint", "--metrics-port", "0", "--batch-wait", "1s"
    )
    process = PipelineProcess(kafka_bootstrap, args, log)
    process.start()
    jvm = None
    try:
        process.wait_ready()
        metrics = process.metrics_url()
        eventually(lambda: readyz(metrics) == (200, {"status": "ready"}), 60, "pipeline ready")
        # Quiet: the first batches are behind it (the waker polls until it read the
        # checkpoint's timers), then a minute and more without one.
        eventually(
            lambda: (
                (last := last_batch_ms(metrics)) is not None and time.time() * 1000 - last > 5_000
            ),
            60,
            "no batch for 5 s",
        )
        quiet_since = last_batch_ms(metrics)
        deadline = time.monotonic() + 65
        while time.monotonic() < deadline:
            assert readyz(metrics) == (200, {"status": "ready"}), "idle, yet not ready"
            time.sleep(5)
        assert last_batch_ms(metrics) == quiet_since, "a batch ran while idle"
        jvm = spark_jvm(process.proc.pid if process.proc is not None else -1)
        os.kill(jvm, signal.SIGSTOP)
        frozen = time.monotonic()
        producer = Producer(kafka_client_config(kafka_bootstrap))
        producer.produce(topics.schedules, key=b"bad-1", value=b"x")  # needs a batch
        producer.flush(10)

        def unready() -> dict[str, Any] | None:
            status, body = readyz(metrics)
            return body if status == 503 else None

        body = eventually(unready, 90, "503 while Spark is frozen")
        took = time.monotonic() - frozen
        print(f"503 {took:.1f} s after the freeze: {body}")
        assert took >= 60, "not ready before a batch was owed a minute"
        assert any("a micro-batch is needed since" in r for r in body["reasons"]), body
        os.kill(jvm, signal.SIGCONT)
        jvm = None
        eventually(lambda: readyz(metrics) == (200, {"status": "ready"}), 60, "ready again")
        # Spark's own batch timestamps, which the waker compares with its wakes.
        checkpoint = tmp_path / "checkpoint"
        newest = latest_logged_batch(checkpoint)
        assert newest is not None
        planned_ms = batch_planned_ms(checkpoint, newest)
        assert planned_ms is not None
        assert 0 <= time.time() * 1000 - planned_ms < 300_000
        # Idle, a trigger waits for the gate: a stop has no batch to wait for.
        eventually(
            lambda: (
                (last := last_batch_ms(metrics)) is not None and time.time() * 1000 - last > 5_000
            ),
            60,
            "idle again",
        )
        stopping = time.monotonic()
        assert process.terminate() == 0
        print(f"an idle pipeline stopped in {time.monotonic() - stopping:.1f} s")
    finally:
        if jvm is not None:
            os.kill(jvm, signal.SIGCONT)
        if process.proc is not None:
            process.kill()
