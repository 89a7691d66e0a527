"""Shared by the e2e and browser tests: fresh topics and a real ``delayline run``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from delayline.api.config import ApiConfig
from delayline.api.server import ApiServer
from delayline.client import ClientConfig, Scheduler
from delayline.contract.topology import Topology
from delayline.dev.harness import PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.kafka.config import kafka_client_config
from delayline.kafka.metadata import topic_partitions
from delayline.kafka.reader import acknowledged_ends

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"

# Lateness (commit time minus due time) bound used by timing assertions. Timers fire
# at micro-batch boundaries: with a 500 ms trigger the demo measured p99 3.0-3.2 s
# (max 3.25 s) on this 2-core machine; 5 s leaves room for a loaded CI box.
LATENESS_TOLERANCE_MS = 5_000

ALLOWED = "(?!forbidden-).*"
"""The shared pipeline delivers to any topic but those starting with ``forbidden-``
(``tests/e2e/test_refusals.py`` writes to those)."""

T = TypeVar("T")


@dataclass(frozen=True)
class Topics:
    schedules: str
    schedules_b: str
    dead_letters: str
    history: str
    commits: str
    envelopes: str | None = None
    timers: str | None = None


def make_topics(bootstrap: str, contracts: bool = False) -> Topics:
    """Fresh topics; with ``contracts`` an envelope and a timer-request topic too."""
    compact = {"cleanup.policy": "compact"}
    return Topics(
        schedules=create_topic(bootstrap, unique_topic("sched"), partitions=3, config=compact),
        schedules_b=create_topic(bootstrap, unique_topic("schedb"), partitions=2, config=compact),
        dead_letters=create_topic(bootstrap, unique_topic("dlq")),
        history=create_topic(bootstrap, unique_topic("hist")),
        commits=create_topic(bootstrap, unique_topic("commits"), config=compact),
        envelopes=create_topic(bootstrap, unique_topic("env"), partitions=2) if contracts else None,
        timers=create_topic(bootstrap, unique_topic("timers"), partitions=2) if contracts else None,
    )


def contract_args(topics: Topics) -> list[str]:
    """The flags of ``topics``' envelope and timer-request topics, if any."""
    out = [] if topics.envelopes is None else ["--envelope-topic", topics.envelopes]
    return out + ([] if topics.timers is None else ["--timer-request-topic", topics.timers])


def topic_flags(topics: Topics) -> list[str]:
    """The flags naming ``topics``' schedules, dead-letter, history and commits topics."""
    return [
        "--schedules-topic", topics.schedules,
        "--schedules-topic", topics.schedules_b,
        "--dead-letter-topic", topics.dead_letters,
        "--history-topic", topics.history,
        "--commits-topic", topics.commits,
    ]  # fmt: skip


def pipeline_args(topics: Topics, checkpoint: Path, *extra: str) -> list[str]:
    return [
        *topic_flags(topics),
        "--checkpoint-dir", str(checkpoint),
        "--trigger-interval", "500ms",
        "--shuffle-partitions", "2",
        "--query-name", f"q{int(time.time() * 1000)}",
        *contract_args(topics),
        *extra,
    ]  # fmt: skip


def committer_args(topics: Topics, query: str, name: str, *extra: str) -> list[str]:
    """The flags of a ``delayline committer`` named ``name`` beside the pipeline of
    ``query`` over ``topics``."""
    return [*topic_flags(topics), "--query-name", query, "--name", name, *extra]


@dataclass
class RunningPipeline:
    bootstrap: str
    topics: Topics
    process: PipelineProcess
    progress: Path | None = None
    """Its ``--progress-file``, if it has one."""

    def client(self, topic: str | None = None) -> Scheduler:
        return Scheduler(
            ClientConfig(
                bootstrap_servers=self.bootstrap, schedules_topic=topic or self.topics.schedules
            )
        )

    def target(self) -> str:
        return create_topic(self.bootstrap, unique_topic("target"), partitions=2)


@contextmanager
def running_pipeline(
    bootstrap: str,
    checkpoint: Path,
    *extra: str,
    contracts: bool = False,
    progress: Path | None = None,
) -> Iterator[RunningPipeline]:
    """A pipeline with a 1 h maximum lateness over two fresh schedules topics (and an
    envelope and a timer-request topic with ``contracts``), writing its batches' counts
    to ``progress`` if given."""
    topics = make_topics(bootstrap, contracts)
    log = ARTIFACTS / f"pipeline-{topics.schedules}.log"
    if progress is not None:
        extra = (*extra, "--progress-file", str(progress))
    args = pipeline_args(topics, checkpoint, "--max-lateness", "1h", *extra)
    process = PipelineProcess(bootstrap, args, log)
    process.start()
    try:
        process.wait_ready()
        yield RunningPipeline(bootstrap, topics, process, progress)
    finally:
        if process.proc is not None:
            code = process.terminate()
            assert code == 0, process.tail()


def ends_now(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's end offset of ``topic`` now: read from there (``read_topic(...,
    since=)``), a test of the shared pipeline sees what it wrote after, not the whole
    session's records (a reader of everything reads tens of thousands)."""
    admin = AdminClient(kafka_client_config(bootstrap))
    partitions = topic_partitions(admin, topic, bootstrap, 10)
    ends = acknowledged_ends(admin, [(topic, p) for p in partitions], 10)
    return {p: end for (_, p), end in ends.items()}


def topic_acls(
    bootstrap: str, topic: str, rules: list[tuple[AclOperation, AclPermissionType]]
) -> bool:
    """Put ACLs on the literal ``topic`` for User:ANONYMOUS (every client of the test
    broker): each rule an operation allowed or denied (an ACL on a topic denies whatever
    it does not allow). False when the broker has no authorizer
    (``$DELAYLINE_TEST_BOOTSTRAP``); the caller waits until the broker enforces them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    bindings = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", op, kind)
        for op, kind in rules
    ]  # fmt: skip
    try:
        for future in admin.create_acls(bindings, request_timeout=10).values():
            future.result()
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.SECURITY_DISABLED:
            return False
        raise
    return True


def eventually(check: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(0.2)


@contextmanager
def running_api(
    pipeline: RunningPipeline, tmp: pytest.TempPathFactory, token: str
) -> Iterator[str]:
    """``delayline api`` (in this process, on a free port) with a catalog of its own over
    ``pipeline``'s topics, its ``/info`` asking the pipeline's metrics server (started
    with ``--metrics-port``); yields its base URL once the catalog has caught up."""
    catalog = tmp.mktemp("catalog") / "catalog.db"
    pipeline_url = pipeline.process.metrics_url()
    with api_over(pipeline.bootstrap, pipeline.topics, catalog, token, pipeline_url) as url:
        yield url


@contextmanager
def api_over(
    bootstrap: str, topics: Topics, catalog: Path, token: str, pipeline_url: str | None = None
) -> Iterator[str]:
    """``delayline api`` over ``topics``, with or without a pipeline (its metrics server
    at ``pipeline_url``); yields its base URL once the catalog has caught up."""
    server = ApiServer(
        ApiConfig(
            topology=Topology(
                bootstrap,
                (topics.schedules, topics.schedules_b),
                dead_letter_topic=topics.dead_letters,
                history_topic=topics.history,
                commits_topic=topics.commits,
                envelope_topics=() if topics.envelopes is None else (topics.envelopes,),
                timer_request_topics=() if topics.timers is None else (topics.timers,),
            ),
            catalog_path=catalog,
            port=0,
            token=token,
            pipeline_url=pipeline_url,
        )
    )
    url = server.start()
    try:
        eventually(lambda: httpx.get(f"{url}/readyz").status_code == 200, 30, "catalog caught up")
        yield url
    finally:
        server.stop()


@contextmanager
def shared_pipeline(bootstrap: str, tmp: pytest.TempPathFactory) -> Iterator[RunningPipeline]:
    """The session's one pipeline for the modules that need no flags of their own: two
    schedules topics, an envelope and a timer-request topic, a metrics server, a
    progress file, a 1 h maximum lateness, and any target but ``forbidden-`` ones. Each
    test writes to targets and ids of its own."""
    with running_pipeline(
        bootstrap,
        tmp.mktemp("checkpoint"),
        "--allowed-target-topics",
        ALLOWED,
        "--metrics-port",
        "0",
        contracts=True,
        progress=tmp.mktemp("progress") / "progress.jsonl",
    ) as running:
        yield running


def wait_paused(process: PipelineProcess, marker: Path, timeout_s: float = 180) -> None:
    """Wait until a task of ``process`` pauses at its fault point (the marker is there:
    :mod:`delayline.core.faults`)."""

    def paused() -> bool:
        if process.proc is not None and process.proc.poll() is not None:
            raise AssertionError(f"pipeline exited before pausing:\n{process.tail()}")
        return marker.exists()

    eventually(paused, timeout_s, f"the pipeline pauses ({marker.name})")
