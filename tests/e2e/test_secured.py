"""delayline on a cluster as companies run them: SASL_SSL with SCRAM-SHA-512, the
StandardAuthorizer denying what no ACL allows, and only the ACLs ``delayline acls``
prints. The pipeline (SIGKILLed and restarted), the CLI and the Python client use
``delayline.properties``; the password is found in no log, checkpoint or command line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import DeliveryCollector, PipelineProcess
from delayline.dev.testing import unique_topic
from delayline.infra.broker import LocalBroker
from delayline.infra.broker_security import secrets_of
from delayline.infra.ports import free_port
from delayline.kafka.properties import KAFKA_CONFIG_ENV, librdkafka_settings, read_properties
from delayline.pipeline.config import spark_progress_file
from tests.support import ARTIFACTS, eventually

COUNT = 60


def delayline(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "delayline", *args, "--kafka-config", str(config)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def command_lines() -> str:
    """Every process's command line on this machine."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
    return "\n".join(out)


API_READS = ("/info", "/stats", "/metrics", "/dead-letters", "/schedules", "/readyz",
             "/openapi.json")  # fmt: skip
"""The API's read routes: what the admin page shows comes from them (its own files are
static)."""


def every_answer(http: httpx.Client, paths: tuple[str, ...]) -> str:
    """The text of every answer to ``paths``, each of which must be a 200."""
    answers = [http.get(path) for path in paths]
    assert all(a.status_code == 200 for a in answers), [(a.url, a.status_code) for a in answers]
    return "".join(a.text for a in answers)


def api_writes_one(
    bootstrap: str, topic_flags: list[str], target: str, tmp_path: Path, config: Path
) -> tuple[str, int]:
    """``delayline api`` as delayline's principal: a schedule written through it (due in
    9 s), then found pending in its catalog: every answer's text, concatenated, and the
    schedule's due time."""
    port = free_port()
    token = "secured-e2e"
    with (tmp_path / "api.log").open("wb") as out:
        api = subprocess.Popen(
            [sys.executable, "-m", "delayline", "api", "-b", bootstrap, *topic_flags,
             "--kafka-config", str(config), "--port", str(port), "--token", token,
             "--catalog", str(tmp_path / "catalog.db")],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20,
                          headers={"Authorization": f"Bearer {token}"}) as http:  # fmt: skip

            def ready() -> bool:
                try:
                    return http.get("/readyz").status_code == 200
                except httpx.TransportError:
                    return False

            eventually(ready, 60, "the API's catalog caught up")
            at = time.time_ns() // 1_000_000 + 9_000
            created = http.post("/schedules", json={"id": "from-api", "target_topic": target,
                                                    "payload": "hi", "due_ms": at})  # fmt: skip
            assert created.status_code == 202, created.text
            listed = eventually(
                lambda: (r := http.get("/schedules", params={"id": "from-api"})).json()["items"]
                and r, 30, "the API lists it")  # fmt: skip
            return created.text + listed.text + every_answer(http, API_READS), at
    finally:
        api.terminate()
        api.wait(30)


def administer(broker: LocalBroker, query: str, allowed: str, *others: str) -> dict[str, str]:
    """What an administrator does before delayline runs as its own principal: make the
    topics (delayline's, by ``delayline topics create``; the targets ``allowed`` and
    ``others``) and grant exactly what ``delayline acls`` lists for ``query`` delivering to
    ``allowed``. The topic flags of the pipeline, flag to topic."""
    files = broker.secure_files
    bootstrap = broker.config.bootstrap_servers
    names = {
        "--schedules-topic": unique_topic("sched"),
        "--dead-letter-topic": unique_topic("dlq"),
        "--history-topic": unique_topic("hist"),
        "--commits-topic": unique_topic("commits"),
    }
    topic_flags = [word for pair in names.items() for word in pair]
    delayline("topics", "create", "-b", bootstrap, *topic_flags, config=files.admin_properties)
    admin_settings: dict[str, Any] = {"bootstrap.servers": bootstrap,
                      **librdkafka_settings(read_properties(files.admin_properties))}  # fmt: skip
    admin = AdminClient(admin_settings)
    for name in (allowed, *others):
        admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    grant = ["-b", bootstrap, "--principal", "User:delayline", "--query-name", query,
             "--target-topic", allowed, *topic_flags]  # fmt: skip
    assert "kafka-acls.sh" in delayline("acls", *grant, config=files.admin_properties).stdout
    delayline("acls", "--apply", *grant, config=files.admin_properties)
    return names


def test_least_privilege_pipeline_cli_and_client_over_sasl_ssl(
    secured_broker: LocalBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = secured_broker.secure_files
    bootstrap = secured_broker.config.bootstrap_servers
    passwords = [secrets_of(files)[user] for user in ("admin", "delayline")]
    query = unique_topic("q")
    allowed, forbidden = unique_topic("allowed"), unique_topic("forbidden")
    names = administer(secured_broker, query, allowed, forbidden)
    topic_flags = [word for pair in names.items() for word in pair]

    checkpoint = tmp_path / "checkpoint"
    log = ARTIFACTS / f"secured-{query}.log"
    progress = tmp_path / "progress.jsonl"
    args = ["-b", bootstrap, *topic_flags, "--checkpoint-dir", str(checkpoint),
            "--trigger-interval", "500ms", "--shuffle-partitions", "2", "--query-name", query,
            "--progress-file", str(progress), "--metrics-port", "0"]  # fmt: skip
    process = PipelineProcess(bootstrap, args, log)
    as_delayline = {KAFKA_CONFIG_ENV: str(files.delayline_properties)}
    # This process reads the targets as the administrator.
    monkeypatch.setenv(KAFKA_CONFIG_ENV, str(files.admin_properties))
    client_config = ClientConfig.from_properties(
        files.delayline_properties, schedules_topic=names["--schedules-topic"]
    )
    with (
        process as running,
        DeliveryCollector(bootstrap, [allowed, names["--dead-letter-topic"]]) as seen,
    ):
        running.start(env=as_delayline)
        running.wait_ready()
        now = time.time_ns() // 1_000_000
        due: dict[str, int] = {}
        with Scheduler(client_config) as client:
            for i in range(COUNT):
                target = forbidden if i % 10 == 0 else allowed
                at = now + 6_000 + i * 200
                client.schedule(f"s-{i}", f"p{i}".encode(), target, at=ms_to_datetime(at))
                due[f"s-{i}"] = at
        delayline("schedule", "-b", bootstrap, "--schedules-topic", names["--schedules-topic"],
                  "--topic", allowed, "--id", "from-cli", "--in", "8s", "hello",
                  config=files.delayline_properties)  # fmt: skip
        due["from-cli"] = now + 8_000
        answers, due["from-api"] = api_writes_one(
            bootstrap, topic_flags, allowed, tmp_path, files.delayline_properties
        )
        seen.wait_for(lambda d: len(d) >= COUNT // 3, timeout_s=120)
        cmdlines = command_lines()
        with httpx.Client(base_url=running.metrics_url(), timeout=20) as http:
            answers += every_answer(http, ("/metrics", "/progress"))
            assert http.get("/progress").json()["last_batch"], "no batch in /progress"
        running.kill()
        running.start(env=as_delayline)
        running.wait_ready()
        # A dead letter carries the schedule's own key.
        seen.wait_for(lambda d: len({x.schedule_id or x.key for x in d}) >= len(due), 180)
        time.sleep(3)
        deliveries = seen.snapshot()
        assert running.terminate() == 0
    delivered = [d for d in deliveries if d.topic == allowed]
    dead = [d for d in deliveries if d.topic == names["--dead-letter-topic"]]
    counts = Counter(d.schedule_id for d in delivered)
    assert {k: n for k, n in counts.items() if n > 1} == {}, "duplicated"
    assert set(counts) == {sid for sid in due if sid.startswith("from-") or int(sid[2:]) % 10}
    assert all(d.timestamp_ms >= due[d.schedule_id or ""] for d in delivered), "early"
    refused = {(d.key or b"").decode(): dict(d.headers).get("delayline-error") or b"" for d in dead}
    assert set(refused) == {f"s-{i}" for i in range(0, COUNT, 10)}
    assert all(b"authori" in reason.lower() for reason in refused.values()), refused

    # No secret in the logs, the checkpoint, any command line, the progress files, /metrics
    # or the API's answers (all the admin page shows).
    haystacks = [log.read_bytes(), cmdlines.encode(), answers.encode()]
    haystacks.append((tmp_path / "api.log").read_bytes())
    progress_files = [progress, spark_progress_file(progress)]
    assert all(p.stat().st_size for p in progress_files), "no progress was written"
    haystacks += [p.read_bytes() for p in progress_files]
    haystacks += [p.read_bytes() for p in checkpoint.rglob("*") if p.is_file()]
    for password in passwords:
        for hay in haystacks:
            assert password.encode() not in hay, "a password leaked"
    assert os.environ[KAFKA_CONFIG_ENV] == str(files.admin_properties)
