"""The consumer's side of retry later against a real broker, no pipeline: what a failed
record becomes (a schedule to the group's retry topic, or a dead letter), the exactly-once
loop across a handler that fails, and redrive from the library, the CLI and the API."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from tests.integration.test_cli import delayline
from tests.support import eventually

from delayline.api.config import ApiConfig
from delayline.api.server import ApiServer
from delayline.client import ClientConfig, RetryPolicy
from delayline.client.consumer import (
    DEAD,
    RETRIED,
    LoopConfig,
    Retries,
    RetryConfig,
    RetryingConsumer,
    ensure_retry_topics,
)
from delayline.client.consumer.redrive import REDRIVEN_FROM, Choice, dead_letters, redrive
from delayline.client.retry import (
    ATTEMPT,
    DEAD_REASON,
    ERROR_CLASS,
    GROUP,
    SOURCE_OFFSET,
    SOURCE_TOPIC,
    header_value,
)
from delayline.contract import ConsumedRecord
from delayline.contract.headers import EPOCH, TARGET_KEY, TARGET_TOPIC, parse_epoch_ms
from delayline.contract.topology import Topology
from delayline.core.clock import ManualClock
from delayline.dev.testing import create_topic, unique_topic
from delayline.errors import ConfigError, NoSuchTopicError
from delayline.kafka.reader import read_topic

POLICY = RetryPolicy(initial_delay_ms=1_000, max_attempts=2)
NOW_MS = 1_900_000_000_000


class DeclinedError(Exception):
    """Never retried."""


@pytest.fixture
def schedules(kafka_bootstrap: str) -> str:
    return create_topic(
        kafka_bootstrap, unique_topic("rsched"), partitions=3, config={"cleanup.policy": "compact"}
    )


@pytest.fixture
def group(kafka_bootstrap: str, schedules: str) -> RetryConfig:
    config = RetryConfig(unique_topic("g"), policy=POLICY, not_retryable=(DeclinedError,))
    ensure_retry_topics(ClientConfig(kafka_bootstrap, schedules), config, partitions=2)
    return config


def _record(offset: int, headers: tuple[tuple[str, bytes | None], ...] = ()) -> ConsumedRecord:
    return ConsumedRecord("orders", 1, offset, NOW_MS - 5, b"k", b"v", (("trace", b"t"), *headers))


def test_a_failure_becomes_a_schedule_to_the_groups_retry_topic(
    kafka_bootstrap: str, schedules: str, group: RetryConfig
) -> None:
    retries = Retries(
        ClientConfig(kafka_bootstrap, schedules), group, clock=ManualClock(NOW_MS), draw=lambda: 0.0
    )
    assert retries.failed(_record(7), TimeoutError("slow")) == RETRIED
    retries.flush()
    (written,) = read_topic(kafka_bootstrap, schedules)
    assert written.key == f"retry/{group.group}/orders/1/7".encode()
    assert written.value == b"v"
    headers = written.headers
    assert parse_epoch_ms((header_value(headers, EPOCH) or b"").decode()) == NOW_MS + 1_000
    assert header_value(headers, TARGET_TOPIC) == group.retry_topic.encode()
    assert header_value(headers, TARGET_KEY) == b"k"
    assert header_value(headers, "trace") == b"t"
    assert header_value(headers, ATTEMPT) == b"1"
    assert header_value(headers, ERROR_CLASS) == b"TimeoutError"
    assert header_value(headers, GROUP) == group.group.encode()
    assert retries.retried == 1


def test_declined_and_exhausted_records_are_dead_letters_with_their_reason(
    kafka_bootstrap: str, schedules: str, group: RetryConfig
) -> None:
    retries = Retries(ClientConfig(kafka_bootstrap, schedules), group, clock=ManualClock(NOW_MS))
    assert retries.failed(_record(1), DeclinedError("no")) == DEAD
    last = ((ATTEMPT, b"2"), (SOURCE_TOPIC, b"orders"), (SOURCE_OFFSET, b"0"))
    assert retries.failed(_record(2, last), TimeoutError("again")) == DEAD
    retries.flush()
    assert read_topic(kafka_bootstrap, schedules) == []
    first, second = read_topic(kafka_bootstrap, group.dead_letter_topic)
    assert header_value(first.headers, DEAD_REASON) == b"not-retryable"
    assert header_value(first.headers, ATTEMPT) == b"0"
    assert header_value(second.headers, DEAD_REASON) == b"exhausted"
    assert header_value(second.headers, ATTEMPT) == b"2"
    assert header_value(second.headers, SOURCE_OFFSET) == b"0", "where it was first read"
    assert (first.key, first.value) == (b"k", b"v")
    assert retries.dead == 2


def test_the_loop_commits_a_batchs_retries_and_offsets_together(
    kafka_bootstrap: str, schedules: str, group: RetryConfig
) -> None:
    """Transactional mode: the handler's writes, the retries and the offsets commit
    together; the group's committed offsets are the source's ends, and a second run
    reads nothing again."""
    source = create_topic(kafka_bootstrap, unique_topic("src"), partitions=2)
    out = create_topic(kafka_bootstrap, unique_topic("out"))
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(100):
        producer.produce(source, key=str(i), value=str(i))
    producer.flush(10)
    client = ClientConfig(kafka_bootstrap, schedules)
    loop = LoopConfig((source,), transactional=True, instance="it", poll_timeout_ms=200)

    def run_until(done: Callable[[], bool]) -> RetryingConsumer:
        def handle(record: Message) -> None:
            consumer.producer.produce(out, value=record.value())
            if int(record.value() or b"") % 10 == 0:
                raise TimeoutError("the payment service timed out")

        consumer = RetryingConsumer(client, group, loop, handle)
        stop = threading.Event()
        thread = threading.Thread(target=consumer.run, args=(stop,))
        thread.start()
        try:
            deadline = time.monotonic() + 60
            while not done() and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            stop.set()
            thread.join(30)
        return consumer

    first = run_until(
        lambda: (
            len(read_topic(kafka_bootstrap, schedules)) >= 10
            and len(read_topic(kafka_bootstrap, out)) >= 100
        )
    )
    assert first.handled == 90
    assert first.retries.retried == 10
    assert len(read_topic(kafka_bootstrap, out)) == 100
    retried = read_topic(kafka_bootstrap, schedules)
    assert sorted(int(r.value or b"") for r in retried) == list(range(0, 100, 10))
    ends = {p: 0 for p in range(2)}
    for r in read_topic(kafka_bootstrap, source):
        ends[r.partition] = r.offset + 1
    reader = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group.group})
    try:
        committed = reader.committed([TopicPartition(source, p) for p in ends], timeout=10)
    finally:
        reader.close()
    assert {tp.partition: tp.offset for tp in committed} == ends
    quiet_until = time.monotonic() + 5
    again = run_until(lambda: time.monotonic() > quiet_until)  # nothing left to read
    assert again.handled == 0
    assert again.retries.retried == 0
    assert len(read_topic(kafka_bootstrap, out)) == 100


def test_a_record_too_large_to_schedule_is_a_dead_letter(
    kafka_bootstrap: str, schedules: str, group: RetryConfig
) -> None:
    small = RetryConfig(group.group, policy=POLICY, max_schedule_bytes=1_000)
    retries = Retries(ClientConfig(kafka_bootstrap, schedules), small)
    big = ConsumedRecord("orders", 0, 9, NOW_MS, b"k", b"x" * 2_000, ())
    assert retries.failed(big, TimeoutError("slow")) == DEAD
    retries.flush()
    assert read_topic(kafka_bootstrap, schedules) == []
    (letter,) = read_topic(kafka_bootstrap, group.dead_letter_topic)
    assert header_value(letter.headers, DEAD_REASON) == b"unschedulable"
    assert letter.value == b"x" * 2_000


def test_redrive_sends_chosen_letters_back_once(
    kafka_bootstrap: str, schedules: str, group: RetryConfig
) -> None:
    retries = Retries(ClientConfig(kafka_bootstrap, schedules), group)
    for offset in range(3):
        retries.failed(_record(offset), DeclinedError(f"no {offset}"))
    retries.failed(_record(3), KeyError("missing"))  # retried: not a dead letter
    retries.flush()
    dlt = group.dead_letter_topic
    ids = [f"{r.partition}/{r.offset}" for r in read_topic(kafka_bootstrap, dlt)]
    assert len(ids) == 3
    assert redrive(kafka_bootstrap, dlt, Choice(error="no 1"), dry_run=True).redriven == (ids[1],)
    assert read_topic(kafka_bootstrap, group.retry_topic) == [], "a dry run writes nothing"
    done = redrive(kafka_bootstrap, dlt, Choice(frozenset(ids[:2])))
    assert (done.redriven, done.already) == (tuple(ids[:2]), ())
    again = redrive(kafka_bootstrap, dlt, Choice(error="DeclinedError"))
    assert (again.redriven, again.already) == ((ids[2],), tuple(ids[:2]))
    back = read_topic(kafka_bootstrap, group.retry_topic)
    assert sorted(header_value(r.headers, REDRIVEN_FROM) or b"" for r in back) == sorted(
        f"{dlt}/{i}".encode() for i in ids
    )
    assert all(header_value(r.headers, DEAD_REASON) is None for r in back)
    assert [redriven for _, redriven in dead_letters(kafka_bootstrap, dlt)] == [True] * 3
    with pytest.raises(NoSuchTopicError):
        redrive(kafka_bootstrap, unique_topic("nothing"), Choice(error="x"))
    with pytest.raises(ConfigError, match="choose"):
        Choice()


def test_redrive_from_the_cli_and_the_api(
    kafka_bootstrap: str, schedules: str, group: RetryConfig, tmp_path: Path
) -> None:
    retries = Retries(ClientConfig(kafka_bootstrap, schedules), group)
    for offset in range(2):
        retries.failed(_record(offset), DeclinedError(f"no {offset}"))
    retries.flush()
    dlt = group.dead_letter_topic
    first = next(
        r
        for r in read_topic(kafka_bootstrap, dlt)
        if r.value and b"no 0" in b"".join(v or b"" for _, v in r.headers)
    )
    result = delayline("dead-letters", "redrive", "--bootstrap-servers", kafka_bootstrap,
                       "--topic", dlt, "--error", "no 0", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["redriven"] == [f"{first.partition}/{first.offset}"]
    server = ApiServer(
        ApiConfig(
            topology=Topology(kafka_bootstrap, (schedules,), history_topic=None),
            catalog_path=tmp_path / "catalog.db",
            port=0,
            token="t",
            retry_groups=(group.group,),
        )
    )
    url = server.start()
    try:
        auth = {"Authorization": "Bearer t"}
        listed = httpx.get(f"{url}/retries/dead-letters", params={"topic": dlt}, headers=auth)
        assert listed.status_code == 200, listed.text
        items = listed.json()["items"]
        assert [i["redriven"] for i in items] == [False, True], "newest first"
        assert items[0]["reason"] == "not-retryable"
        assert items[0]["group"] == group.group
        sent = httpx.post(
            f"{url}/retries/dead-letters/redrive",
            json={"topic": dlt, "ids": [items[0]["id"]]},
            headers=auth,
        )
        assert sent.status_code == 200, sent.text
        assert sent.json()["redriven"] == [items[0]["id"]]
        for topic in (unique_topic("none"), schedules):  # the API reads no other topic
            refused = httpx.get(
                f"{url}/retries/dead-letters", params={"topic": topic}, headers=auth
            )
            assert refused.status_code == 404, refused.text
        counts = httpx.get(f"{url}/retries", headers=auth).json()["groups"]
        assert counts[0]["group"] == group.group
        series = (
            f'delayline_retry_dead_letters_total{{group="{group.group}",'
            'reason="not-retryable",source_topic="orders"} 2.0'
        )
        eventually(lambda: series in httpx.get(f"{url}/metrics").text, 30, "dead letters counted")
    finally:
        server.stop()
    assert len(read_topic(kafka_bootstrap, group.retry_topic)) == 2
