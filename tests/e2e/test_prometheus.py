"""The alert rules on a real Prometheus (Debian's) scraping a real pipeline, a second
committer and the API: a committer stopped (SIGSTOP) with deliveries due fires the
committer-down alert and, its deliveries late, the lateness alert; a SIGKILLed pipeline
fires the pipeline-down alert; each in Prometheus's own ``/api/v1/alerts``. (A target
rate below the offered load does not make deliveries late: lateness counts from the
time the rate releases a delivery; ``DelaylinePacingBehind`` is that alert.) The pipeline
and the committer log with ``--log-format json``: every line of theirs, Spark's
included, must be a JSON log record.

The rules are ``ops/prometheus/rules.yml`` as shipped, except that every ``for:`` is
shortened to a few seconds (minutes there) so the test takes a couple of minutes; the
expressions and thresholds are the shipped ones."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from delayline.client import ClientConfig, Scheduler
from delayline.dev.harness import PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.infra.ports import free_port
from tests.support import (
    ARTIFACTS,
    Topics,
    api_over,
    committer_args,
    eventually,
    make_topics,
    pipeline_args,
)

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "ops" / "prometheus" / "rules.yml"
FOR = "3s"
"""Every alert's ``for:`` here (minutes in the shipped rules)."""
SCHEDULES = 200
"""Due within a second of each other, ten seconds after they are written."""


def test_rules_with_their_for_shortened_keep_every_expression() -> None:
    shipped = RULES.read_text()
    short = shortened(shipped)
    assert re.findall(r"for: (\S+)", short) == [FOR] * len(re.findall(r"for: ", shipped))
    assert [line for line in short.splitlines() if "for:" not in line] == [
        line for line in shipped.splitlines() if "for:" not in line
    ]


def shortened(rules: str) -> str:
    return re.sub(r"for: \S+", f"for: {FOR}", rules)


class Prometheus:
    """``prometheus`` on loopback with its own data directory."""

    def __init__(self, workdir: Path, targets: dict[str, str]) -> None:
        self.targets = targets
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (workdir / "rules.yml").write_text(shortened(RULES.read_text()))
        jobs = "".join(
            f"  - job_name: {job}\n    metrics_path: /metrics\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
            for job, target in targets.items()
        )
        (workdir / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "rule_files:\n  - rules.yml\nscrape_configs:\n" + jobs
        )
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail("prometheus is missing: run `make system` (infra/system-packages.sh)")
        self.log = (ARTIFACTS / f"prometheus-{self.port}.log").open("wb")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def target_of(self, job: str) -> str:
        """The ``host:port`` scraped for ``job`` (the ``instance`` label of its series)."""
        return self.targets[job]

    def ready(self) -> bool:
        """Whether it answers as ready; raises if it exited (its port taken, say)."""
        if self.proc.poll() is not None:
            raise AssertionError(
                f"prometheus exited with {self.proc.returncode}, see {self.log.name}"
            )
        return _answers(self.url)

    def alerts(self) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.url}/api/v1/alerts", timeout=5).json()
        alerts: list[dict[str, Any]] = answer["data"]["alerts"]
        return alerts

    def firing(self, name: str) -> list[dict[str, Any]]:
        return [
            a for a in self.alerts() if a["labels"]["alertname"] == name and a["state"] == "firing"
        ]

    def value(self, query: str) -> float | None:
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": query}, timeout=5).json()
        result = answer["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


@pytest.fixture
def prometheus_dir(tmp_path: Path) -> Path:
    path = tmp_path / "prometheus"
    path.mkdir()
    return path


def test_a_real_prometheus_fires_the_lateness_and_the_pipeline_down_alerts(
    kafka_bootstrap: str, tmp_path: Path, prometheus_dir: Path
) -> None:
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("slow"), partitions=2)
    query = f"prom{int(time.time() * 1000)}"
    args = pipeline_args(
        topics,
        tmp_path / "checkpoint",
        "--query-name",
        query,
        "--inflight-partitions",
        "2",
        "--metrics-port",
        "0",
        "--log-format",
        "json",
    )
    pipeline = PipelineProcess(kafka_bootstrap, args, ARTIFACTS / f"prometheus-{query}.log")
    committer = PipelineProcess(
        kafka_bootstrap,
        committer_args(
            topics,
            query,
            "second",
            "--inflight-partitions",
            "2",
            "--metrics-port",
            "0",
            "--log-format",
            "json",
        ),
        ARTIFACTS / f"prometheus-{query}-second.log",
        command="committer",
    )
    with (
        pipeline,
        committer,
        api_over(kafka_bootstrap, topics, tmp_path / "catalog.db", "t0ken") as api_url,
    ):
        pipeline.start()
        committer.start()
        pipeline.wait_ready()
        committer.wait_ready(60, "committer second ready")
        pipeline_at = pipeline.metrics_url().removeprefix("http://")
        committer_at = committer.metrics_url().removeprefix("http://")
        jobs = {
            "delayline-pipeline": pipeline_at,
            "delayline-committer": committer_at,
            "delayline-api": api_url.removeprefix("http://"),
        }
        with running_prometheus(prometheus_dir, jobs) as prometheus:
            _alerts_fire(kafka_bootstrap, topics, target, pipeline, committer, prometheus)


def _alerts_fire(
    bootstrap: str,
    topics: Topics,
    target: str,
    pipeline: PipelineProcess,
    committer: PipelineProcess,
    prometheus: Prometheus,
) -> None:
    eventually(lambda: prometheus.value('sum(up{job=~"delayline-.*"})') == 3, 30, "3 up")
    eventually(lambda: prometheus.value("min(delayline_ready)") == 1, 60, "all ready")
    assert prometheus.firing("DelaylinePipelineDown") == []
    assert prometheus.firing("DelaylineLatenessHigh") == []

    # The second committer owns an in-flight partition; what it is handed is due in
    # 10 s, and it is stopped (SIGSTOP) from 3 s before until 6 s after (and at least
    # until its down alert fires): its scrape fails, and its deliveries go out about 6 s
    # late (by it once it runs again, or by the pipeline's committer once the group gives
    # it the partition), far over the 1 s p99 of the lateness alert.
    owned = 'delayline_committer_partitions{committer="second"}'
    eventually(lambda: (prometheus.value(owned) or 0) >= 1, 60, "second owns a partition")
    due_ms = int(time.time() * 1000) + 10_000
    config = ClientConfig(bootstrap_servers=bootstrap, schedules_topic=topics.schedules)
    with Scheduler(config) as client:
        for i in range(SCHEDULES):
            client.schedule(f"late-{i}", b"x", target, at=_at(due_ms + i % 1000))
    pending = 'delayline_committer_pending{committer="second"}'
    eventually(lambda: (prometheus.value(pending) or 0) > 0, 30, "second handed some")
    time.sleep(max(0.0, (due_ms - 3_000) / 1000 - time.time()))
    assert committer.proc is not None
    os.killpg(committer.proc.pid, signal.SIGSTOP)
    try:
        stopped = eventually(lambda: prometheus.firing("DelaylineCommitterDown"), 30, "down")
        assert stopped[0]["labels"]["instance"] == prometheus.target_of("delayline-committer")
        time.sleep(max(0.0, (due_ms + 6_000) / 1000 - time.time()))
    finally:
        os.killpg(committer.proc.pid, signal.SIGCONT)
    late = eventually(lambda: prometheus.firing("DelaylineLatenessHigh"), 90, "late alert")
    p99 = prometheus.value("delayline:lateness_seconds:p99_5m")
    assert p99 is not None
    assert p99 > 1
    after_s = time.time() - due_ms / 1000
    print(f"\nDelaylineLatenessHigh firing {after_s:.1f} s after the due time, p99 {p99:.1f} s")
    assert late[0]["labels"]["severity"] == "critical"
    eventually(lambda: not prometheus.firing("DelaylineCommitterDown"), 60, "second back")

    assert prometheus.firing("DelaylineCommitterDown") == []
    pipeline.kill()
    killed = time.monotonic()
    down = eventually(lambda: prometheus.firing("DelaylinePipelineDown"), 60, "down alert")
    print(f"DelaylinePipelineDown firing {time.monotonic() - killed:.1f} s after the SIGKILL")
    assert down[0]["labels"]["instance"] == prometheus.target_of("delayline-pipeline")
    assert prometheus.firing("DelaylineCommitterDown") == []  # the committer runs on
    assert prometheus.value('up{job="delayline-committer"}') == 1
    assert committer.terminate() == 0, committer.tail()
    for process in (pipeline, committer):  # --log-format json: every line, Spark's too
        _every_line_is_a_json_log_record(process.log_path.read_text())


def _every_line_is_a_json_log_record(log: str) -> None:
    lines = [line for line in log.splitlines() if line.strip()]
    assert len(lines) > 5, log
    for line in lines:
        record = json.loads(line)  # fails the test on a line that is not JSON
        assert {"time", "level", "logger", "message"} <= record.keys(), line


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


@contextmanager
def running_prometheus(workdir: Path, targets: dict[str, str]) -> Iterator[Prometheus]:
    prometheus = Prometheus(workdir, targets)
    try:
        eventually(prometheus.ready, 30, "prometheus ready")
        yield prometheus
    finally:
        prometheus.stop()


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
