"""The pipeline on a Spark standalone cluster (master and two workers on loopback):
executors fire, a lost executor and a killed driver lose and duplicate nothing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.infra.broker import LocalBroker
from delayline.infra.spark_cluster import ClusterConfig, LocalCluster
from delayline.kafka.properties import KAFKA_CONFIG_ENV
from tests.counts import check_counts, check_exactly_once, report, schedule_spread
from tests.e2e.test_secured import administer
from tests.support import ARTIFACTS, make_topics, pipeline_args

TOTAL = 5_000
SPAN_MS = 60_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A master and two workers of one core each, started by ``delayline cluster``."""
    data_dir = tmp_path_factory.mktemp("cluster")
    port, ui_port = free_port(), free_port()
    flags = ["--data-dir", str(data_dir)]
    started = _cli(
        "start", *flags, "--workers", "2", "--worker-cores", "1", "--worker-memory", "1536m",
        "--port", str(port), "--ui-port", str(ui_port),
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert f"spark cluster ready at spark://127.0.0.1:{port}" in started.stdout
    local = LocalCluster(ClusterConfig(data_dir=data_dir, port=port, ui_port=ui_port))
    try:
        yield local
    finally:
        stopped = _cli("stop", *flags)
        assert stopped.returncode == 0, stopped.stderr
        assert _cli("status", *flags).returncode == 3  # not running
        for name in ("master", "worker-0", "worker-1"):
            text = (data_dir / f"{name}.log").read_text(errors="replace")
            (ARTIFACTS / f"cluster-{name}.log").write_text(text)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "delayline", "cluster", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_cluster_status_names_the_master_and_its_workers(cluster: LocalCluster) -> None:
    status = _cli("status", "--data-dir", str(cluster.data_dir))
    assert status.returncode == 0, status.stderr
    assert f"running at spark://127.0.0.1:{cluster.config.port}" in status.stdout
    assert "2 registered" in status.stdout


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_executor_and_driver_sigkill_on_a_cluster(
    kafka_bootstrap: str, tmp_path: Path, cluster: LocalCluster
) -> None:
    """5,000 schedules due over 60 s, with updates and cancels. Mid-run one worker's
    executor is SIGKILLed (Spark re-runs its tasks on what is left, the worker starts a
    new executor), then the driver; a restarted driver finishes the run. Every live
    schedule delivered once, none early, none cancelled; the deliveries were written
    by more than one executor."""
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("target"), partitions=4)
    progress = tmp_path / "progress.jsonl"
    args = pipeline_args(
        topics, tmp_path / "cp",
        "--master", cluster.config.master_url,
        # Executors write the deliveries themselves (with a lead the committer, in the
        # driver's process, would), each task in its own transaction.
        "--lead", "0",
        "--executor-memory-mb", "1024",
        "--progress-file", str(progress),
    )  # fmt: skip
    config = ClientConfig(bootstrap_servers=kafka_bootstrap, schedules_topic=topics.schedules)
    process = PipelineProcess(kafka_bootstrap, args, ARTIFACTS / f"cluster-{topics.schedules}.log")
    with process as running, DeliveryCollector(kafka_bootstrap, [target]) as seen:
        running.start()
        running.wait_ready(timeout_s=240)
        due = schedule_spread(config, target, "c", TOTAL, time.time_ns() // 10**6, SPAN_MS)

        seen.wait_for(lambda d: len(d) >= len(due) // 4, timeout_s=180)
        executors = cluster.status().executor_pids
        victim = executors[0][0]
        os.kill(victim, signal.SIGKILL)
        # The worker starts a new executor for the application in place of the lost one.
        _wait_until(lambda: _replaced(cluster, 0, victim), 120, "worker 0's new executor")

        seen.wait_for(lambda d: len(d) >= len(due) // 2, timeout_s=180)
        running.kill()  # the driver: its executors end with its application
        running.start()
        running.wait_ready(timeout_s=240)

        seen.wait_for(lambda d: len({x.schedule_id for x in d}) >= len(due), timeout_s=240)
        time.sleep(5)  # anything duplicated late would show up now
        deliveries = seen.snapshot()
        assert running.terminate() == 0, running.tail()
    check_counts(deliveries, due)
    report("cluster, executor and driver SIGKILLed", deliveries, due)
    written = _fired_by_executor(progress)
    print(f"deliveries by executor: {dict(written)}")
    busy = [name for name, fired in written.items() if fired > 0]
    assert len(busy) >= 2, f"deliveries came from {busy} only"
    # Committed batches only: a batch the driver's kill cut off after its tasks had
    # committed in Kafka is reported by its replay, which wrote nothing, so the sum can
    # fall short of what was delivered (by 1,114 of 4,856 in one run), never exceed it.
    assert sum(written.values()) <= len(deliveries)
    text = process.log_since_start()
    assert "Traceback" not in text, text[-3000:]
    # Spark saw the executor go (its running tasks, if any, ran again elsewhere).
    assert "Lost executor" in process.log_path.read_text(errors="replace")


def _replaced(cluster: LocalCluster, worker: int, lost: int) -> bool:
    pids = cluster.status().executor_pids.get(worker, [])
    return bool(pids) and lost not in pids


def _wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        time.sleep(0.5)


def _fired_by_executor(progress: Path) -> Counter[str]:
    fired: Counter[str] = Counter()
    for line in progress.read_text().splitlines():
        batch = json.loads(line)
        if batch["committed"]:
            for name, done in batch.get("executors", {}).items():
                fired[name] += done.get("fire", 0)
    return fired


def test_a_secured_kafka_from_a_spark_cluster(
    secured_broker: LocalBroker,
    tmp_path: Path,
    cluster: LocalCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--kafka-config`` on a cluster: the executors (other processes than the driver's,
    started by the workers) find the properties file and the truststore at the same paths
    (one machine here: a path on every worker) and run Spark's Kafka source and the fire
    tasks' producers as delayline's principal, with the ACLs ``delayline acls`` lists."""
    files = secured_broker.secure_files
    bootstrap = secured_broker.config.bootstrap_servers
    query, target = unique_topic("q"), unique_topic("allowed")
    names = administer(secured_broker, query, target)
    progress = tmp_path / "progress.jsonl"
    args = ["-b", bootstrap, *[w for pair in names.items() for w in pair],
            "--checkpoint-dir", str(tmp_path / "cp"), "--query-name", query,
            "--master", cluster.config.master_url, "--lead", "0", "--executor-memory-mb", "1024",
            "--progress-file", str(progress)]  # fmt: skip
    process = PipelineProcess(bootstrap, args, ARTIFACTS / f"cluster-secured-{query}.log")
    monkeypatch.setenv(KAFKA_CONFIG_ENV, str(files.admin_properties))  # this process: admin
    config = ClientConfig.from_properties(
        files.delayline_properties, schedules_topic=names["--schedules-topic"]
    )
    with process as running, DeliveryCollector(bootstrap, [target]) as seen:
        running.start(env={KAFKA_CONFIG_ENV: str(files.delayline_properties)})
        running.wait_ready(timeout_s=240)
        now = time.time_ns() // 10**6
        due = {f"sc-{i}": now + 5_000 + 10 * i for i in range(200)}
        with Scheduler(config) as client:
            for sid, at in due.items():
                client.schedule(sid, b"p", target, at=ms_to_datetime(at))
        seen.wait_for(lambda d: len({x.schedule_id for x in d}) >= len(due), timeout_s=180)
        time.sleep(2)
        deliveries = seen.snapshot()
        assert running.terminate() == 0, running.tail()
    check_exactly_once(deliveries, due)
    assert sum(_fired_by_executor(progress).values()) > 0, "the executors delivered nothing"
