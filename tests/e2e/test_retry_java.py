"""The retry contract from Java (docs/retry.md): ``examples/java-retry`` compiled with Maven,
a plain ``KafkaConsumer`` and a Spring Kafka container with a ``DefaultErrorHandler``
each run against the shared pipeline. Each handles every record once, on the attempt it
succeeds on, its retries after their backoff, and sends what may not be retried, or
failed too often, to its dead-letter topic with headers Python's reader understands."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from delayline.client.retry import (
    ATTEMPT,
    DEAD_REASON,
    ERROR_CLASS,
    EXHAUSTED,
    NOT_RETRYABLE,
    SOURCE_TOPIC,
    Failure,
    header_value,
)
from delayline.contract.headers import EPOCH, parse_epoch_ms
from delayline.dev.harness import Delivery, DeliveryCollector
from delayline.dev.testing import create_topic, unique_topic
from delayline.infra.jars import infra_files
from tests.support import ARTIFACTS, RunningPipeline

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "examples" / "java-retry"
RECORDS = {
    "ok:a": 1,  # value -> the attempt it succeeds on
    "fail-2:b": 2,
    "fail-4:c": 4,
}
DEAD = {"dead:d": (NOT_RETRYABLE, b"0"), "fail-9:e": (EXHAUSTED, b"3")}
"""Never succeed: their dead-letter reason and last retry-attempt (3 retries at most)."""
BACKOFF_MS = [1_000, 2_000, 4_000]


@pytest.fixture(scope="module")
def classpath() -> str:
    """The examples compiled, with their dependencies (Maven Central; cached after once)."""
    mvn = shutil.which("mvn")
    assert mvn is not None, "Maven (mvn) is needed"
    _, settings = infra_files()
    command = [mvn, "-B", "-q", "-s", str(settings), "-f", str(PROJECT / "pom.xml"), "package"]
    built = subprocess.run(command, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return f"{PROJECT / 'target' / 'classes'}:{PROJECT / 'target' / 'lib' / '*'}"


@pytest.mark.parametrize("consumer_class", ["PlainConsumer", "SpringConsumer"])
def test_a_java_consumer_retries_later_by_the_contract(
    pipeline: RunningPipeline, classpath: str, consumer_class: str
) -> None:
    bootstrap = pipeline.bootstrap
    source = create_topic(bootstrap, unique_topic("jorders"), partitions=2)
    done = create_topic(bootstrap, unique_topic("jdone"))
    group = unique_topic("jgroup")
    for suffix in ("retry", "dlt"):  # the examples make no topics
        create_topic(bootstrap, f"{group}-{suffix}", partitions=2)
    java = shutil.which("java")
    assert java is not None
    command = [java, "-cp", classpath, f"dev.delayline.examples.{consumer_class}", bootstrap,
               pipeline.topics.schedules, source, group, done]  # fmt: skip
    log = ARTIFACTS / f"java-retry-{group}.log"
    with (
        DeliveryCollector(bootstrap, [done]) as handled,
        DeliveryCollector(bootstrap, [f"{group}-dlt"]) as dead,
        DeliveryCollector(bootstrap, [f"{group}-retry"], read_committed=False) as retried,
        log.open("w") as out,
    ):
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            _write(bootstrap, source, [*RECORDS, *DEAD])
            handled.wait_for(lambda ds: len(ds) >= len(RECORDS), timeout_s=90)
            dead.wait_for(lambda ds: len(ds) >= len(DEAD), timeout_s=60)
            time.sleep(2)  # a duplicate would show now
        finally:
            process.terminate()
            process.wait(30)
        _each_once_on_its_attempt(handled.snapshot())
        _dead_letters_by_the_contract(dead.snapshot(), source, group)
        _retries_after_their_backoff(retried.snapshot())


def _write(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for value in values:
        key = value.split(":")[1]
        producer.produce(topic, key=key, value=value, headers=[("trace", key.encode())])
    assert producer.flush(30) == 0


def _each_once_on_its_attempt(done: list[Delivery]) -> None:
    attempts = {}
    for d in done:
        record, attempt, _ = (d.value or b"").decode().split(",")
        assert record not in attempts, f"{record} handled twice"
        attempts[record] = int(attempt)
    assert attempts == {value.split(":")[1]: n for value, n in RECORDS.items()}


def _dead_letters_by_the_contract(dead: list[Delivery], source: str, group: str) -> None:
    by_value = {(d.value or b"").decode(): d for d in dead}
    assert set(by_value) == set(DEAD), by_value.keys()
    for value, (reason, retries) in DEAD.items():
        letter = by_value[value]
        assert letter.key == value.split(":")[1].encode()
        assert header_value(letter.headers, DEAD_REASON) == reason.encode()
        assert header_value(letter.headers, ATTEMPT) == retries
        assert header_value(letter.headers, SOURCE_TOPIC) == source.encode()
        assert header_value(letter.headers, "trace") == letter.key, "the record's own headers"
        cls = (
            b"java.lang.IllegalArgumentException"
            if reason == NOT_RETRYABLE
            else b"java.lang.IllegalStateException"
        )
        assert header_value(letter.headers, ERROR_CLASS) == cls
        # Python reads what Java wrote: the same retries, source and first failure.
        failure = Failure(letter.headers, f"{group}-dlt", 0, 0, now_ms=0)
        assert failure.retries == int(retries)
        assert failure.source[0] == source
        assert failure.first_ms > 0
        assert failure.carried == [("trace", letter.key)]


def _retries_after_their_backoff(retried: list[Delivery]) -> None:
    """What a read_uncommitted reader of the retry topic sees: each retry once, none
    before its due time, each after its backoff from its first failure at least."""
    ids = [d.schedule_id for d in retried]
    assert len(ids) == len(set(ids)), "a retry delivered twice"
    # b: 1 retry; c: 3; e: 3 (then dead); d: none.
    assert sorted((d.key or b"").decode() for d in retried) == ["b", "c", "c", "c", "e", "e", "e"]
    for d in retried:
        due_ms = parse_epoch_ms((header_value(d.headers, EPOCH) or b"").decode())
        assert min(d.timestamp_ms, d.arrival_ms) >= due_ms, "delivered before due"
        attempt = int(header_value(d.headers, ATTEMPT) or b"0")
        first_ms = int(header_value(d.headers, "retry-original-timestamp") or b"0")
        assert due_ms - first_ms >= sum(BACKOFF_MS[:attempt]), "due before its backoff"
