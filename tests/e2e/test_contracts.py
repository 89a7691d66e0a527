"""The JSON envelope and timer-request contracts through the real pipeline, written by a
plain confluent-kafka producer with hand-built bytes (not delayline's own encoders):
replace, cancel, already due, malformed, and a SIGKILL replay, each delivery counted."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from delayline.contract.envelope import ceil_ms
from delayline.contract.headers import ERROR, SOURCE
from delayline.dev.harness import Delivery, DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from tests.support import (
    ARTIFACTS,
    RunningPipeline,
    Topics,
    eventually,
    make_topics,
    pipeline_args,
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def future(topic: str, key: str, callback: bytes) -> bytes:
    """``Future{callBackTopic, callBackKey, callBack}`` in protobuf's wire format, by hand:
    each field is its tag (field number << 3 | 2, length-delimited), a length, the bytes."""
    out = b""
    for number, data in ((1, topic.encode()), (2, key.encode()), (3, callback)):
        if data:  # proto3 leaves empty fields out
            assert len(data) < 128  # a one-byte varint length
            out += bytes([number << 3 | 2, len(data)]) + data
    return out


@dataclass
class Written:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int


class RawProducer:
    """A producer as a Java or Go user would write one: bytes in, acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        self.sources: set[bytes] = set()
        """Where each record it wrote went, as a dead letter's source header names it."""

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
    ) -> Written:
        got: list[Any] = []
        kwargs: dict[str, Any] = {"key": key, "value": value, "headers": headers or []}
        if partition is not None:
            kwargs["partition"] = partition
        self.producer.produce(topic, on_delivery=lambda err, msg: got.append((err, msg)), **kwargs)
        self.producer.flush(10)
        ((err, msg),) = got
        assert err is None, err
        self.sources.add(f"{topic}/{msg.partition()}/{msg.offset()}".encode())
        return Written(topic, msg.partition(), msg.offset(), msg.timestamp()[1])

    def envelope(self, topic: str, body: dict[str, Any], **kw: Any) -> Written:
        return self.send(topic, json.dumps(body).encode(), **kw)


@dataclass
class ContractPipeline:
    bootstrap: str
    topics: Topics
    envelopes: str
    timers: str
    process: PipelineProcess


def start(bootstrap: str, checkpoint: Path, name: str) -> ContractPipeline:
    topics = make_topics(bootstrap, contracts=True)
    assert topics.envelopes is not None
    assert topics.timers is not None
    args = pipeline_args(topics, checkpoint)  # with --envelope-topic, --timer-request-topic
    process = PipelineProcess(bootstrap, args, ARTIFACTS / f"{name}-{topics.envelopes}.log")
    return ContractPipeline(bootstrap, topics, topics.envelopes, topics.timers, process)


@pytest.fixture(scope="module")
def contracts(pipeline: RunningPipeline) -> ContractPipeline:
    """The session's shared pipeline, which reads an envelope and a timer-request topic."""
    topics = pipeline.topics
    assert topics.envelopes is not None
    assert topics.timers is not None
    return ContractPipeline(
        pipeline.bootstrap, topics, topics.envelopes, topics.timers, pipeline.process
    )


def came_from(d: Delivery, sources: set[bytes]) -> bool:
    """A dead letter of a record at one of ``sources`` (the shared pipeline's dead-letter
    topic holds other modules' too)."""
    return dict(d.headers).get(SOURCE) in sources


def arrived(
    seen: list[Delivery],
    target: str,
    deliveries: int,
    dead_letters: str,
    sources: set[bytes],
    dead: int,
) -> bool:
    """At least ``deliveries`` on ``target`` and ``dead`` dead letters of ``sources``."""
    on_target = sum(1 for d in seen if d.topic == target)
    refused = sum(1 for d in seen if d.topic == dead_letters and came_from(d, sources))
    return on_target >= deliveries and refused >= dead


def by_id(deliveries: list[Delivery]) -> dict[str, list[Delivery]]:
    out: dict[str, list[Delivery]] = {}
    for d in deliveries:
        out.setdefault(d.schedule_id or "", []).append(d)
    return out


def test_json_envelopes_end_to_end(contracts: ContractPipeline) -> None:
    p = contracts
    target = create_topic(p.bootstrap, unique_topic("target"), partitions=2)
    raw = RawProducer(p.bootstrap)
    env = p.envelopes
    with DeliveryCollector(p.bootstrap, [target, p.topics.dead_letters]) as seen:
        plain = raw.envelope(env, {"topic": target, "message": "hello", "countdown": 8},
                             headers=[("CALLER_SERVICE", b"billing")])  # fmt: skip
        keyed = raw.envelope(env, {"topic": target, "message": {"n": 1}, "countdown": 8,
                                   "key": "k-1", "id": "env-replaced"})  # fmt: skip
        replaced = raw.envelope(env, {"topic": target, "message": {"n": 2}, "countdown": 10,
                                      "key": "k-2", "id": "env-replaced"})  # fmt: skip
        raw.envelope(env, {"topic": target, "message": "no", "countdown": 8, "id": "env-cancel"})
        raw.envelope(env, {"id": "env-cancel", "cancel": True})
        raw.envelope(env, {"topic": target, "message": "no", "countdown": 8, "id": "env-tomb"})
        raw.send(env, None, key=b"env-tomb")
        past = datetime.fromtimestamp(now_ms() / 1000 - 60, UTC).isoformat()
        due_now = raw.envelope(env, {"topic": target, "message": "late", "at": past})
        junk = raw.send(env, b"not json", headers=[("CALLER_SERVICE", b"billing")])
        no_due = raw.envelope(env, {"topic": target, "message": "m"})
        seen.wait_for(lambda d: arrived(d, target, 3, p.topics.dead_letters, raw.sources, 2), 90)
        time.sleep(4)  # a cancelled one or a duplicate would show up by now
        deliveries = [d for d in seen.snapshot() if d.topic == target or came_from(d, raw.sources)]
    delivered = by_id([d for d in deliveries if d.topic == target])
    plain_id = f"{env}:{plain.partition}:{plain.offset}"
    late_id = f"{env}:{due_now.partition}:{due_now.offset}"
    assert sorted(delivered) == sorted([plain_id, "env-replaced", late_id])
    assert all(len(v) == 1 for v in delivered.values()), "delivered more than once"
    (hello,) = delivered[plain_id]
    assert (hello.key, hello.value) == (None, b"hello")
    assert ("CALLER_SERVICE", b"billing") in hello.headers
    # Due at the record's own timestamp plus the countdown; never seen before it.
    assert hello.timestamp_ms >= plain.timestamp_ms + 8_000
    assert hello.arrival_ms >= plain.timestamp_ms + 8_000
    (update,) = delivered["env-replaced"]
    assert (update.key, update.value) == (b"k-2", b'{"n":2}')
    assert update.arrival_ms >= replaced.timestamp_ms + 10_000 > keyed.timestamp_ms + 8_000
    dead = {d.value: dict(d.headers) for d in deliveries if d.topic == p.topics.dead_letters}
    assert dead[b"not json"][ERROR] == (
        b"envelope is not JSON: Expecting value: line 1 column 1 (char 0)"
    )
    assert dead[b"not json"][SOURCE] == f"{env}/{junk.partition}/{junk.offset}".encode()
    assert dead[b"not json"]["CALLER_SERVICE"] == b"billing"
    no_due_value = json.dumps({"topic": target, "message": "m"}).encode()
    assert dead[no_due_value][ERROR] == b"envelope has neither 'countdown' nor 'at'"
    assert dead[no_due_value][SOURCE] == f"{env}/{no_due.partition}/{no_due.offset}".encode()


def test_timer_requests_end_to_end(contracts: ContractPipeline) -> None:
    p = contracts
    target = create_topic(p.bootstrap, unique_topic("target"), partitions=2)
    raw = RawProducer(p.bootstrap)
    second = now_ms() // 1000 + 9
    with DeliveryCollector(p.bootstrap, [target, p.topics.dead_letters]) as seen:
        timed = raw.send(
            p.timers, future(target, "cb-key", b"\x00binary"), key=str(second).encode()
        )
        unkeyed = raw.send(p.timers, future(target, "", b"no key"), key=str(second).encode())
        # Half an hour overdue: delivered (the shared pipeline expires at an hour late).
        overdue = raw.send(p.timers, future(target, "late", b"late"),
                           key=str(second - 1_800).encode())  # fmt: skip
        cancelled = raw.send(p.timers, future(target, "x", b"never"), key=str(second).encode())
        # Cancel by its id, <topic>:<partition>:<offset>: a tombstone in its partition.
        cancel_id = f"{p.timers}:{cancelled.partition}:{cancelled.offset}"
        raw.send(p.timers, None, key=cancel_id.encode(), partition=cancelled.partition)
        bad = raw.send(p.timers, b"\xff\xff\xff", key=str(second).encode())
        seen.wait_for(lambda d: arrived(d, target, 3, p.topics.dead_letters, raw.sources, 1), 90)
        time.sleep(4)
        deliveries = [d for d in seen.snapshot() if d.topic == target or came_from(d, raw.sources)]
    delivered = by_id([d for d in deliveries if d.topic == target])

    def sid(w: Written) -> str:
        return f"{p.timers}:{w.partition}:{w.offset}"

    assert sorted(delivered) == sorted([sid(timed), sid(unkeyed), sid(overdue)])
    assert all(len(v) == 1 for v in delivered.values()), "delivered more than once"
    (first,) = delivered[sid(timed)]
    assert (first.key, first.value) == (b"cb-key", b"\x00binary")
    assert first.timestamp_ms >= second * 1000
    assert first.arrival_ms >= second * 1000
    (no_key,) = delivered[sid(unkeyed)]
    assert (no_key.key, no_key.value) == (None, b"no key")
    (late,) = delivered[sid(overdue)]  # the original design dropped it silently
    assert late.value == b"late"
    (dead,) = [d for d in deliveries if d.topic == p.topics.dead_letters]
    assert dict(dead.headers)[SOURCE] == f"{p.timers}/{bad.partition}/{bad.offset}".encode()
    assert (dict(dead.headers)[ERROR] or b"").startswith(b"value is not a Future protobuf")


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_sigkill_replay_delivers_each_envelope_and_timer_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Envelopes and timer requests due over 15 s; the pipeline is SIGKILLed twice while
    they fall due: each is delivered once, never before it is due."""
    p = start(kafka_bootstrap, tmp_path / "checkpoint", "contracts-crash")
    target = create_topic(kafka_bootstrap, unique_topic("target"), partitions=2)
    raw = RawProducer(kafka_bootstrap)
    due: dict[str, int] = {}
    with p.process as pipeline, DeliveryCollector(kafka_bootstrap, [target]) as seen:
        pipeline.start()
        pipeline.wait_ready()
        base_s = now_ms() // 1000 + 4
        for i in range(150):
            countdown = 4 + i * 15 / 150
            w = raw.envelope(
                p.envelopes, {"topic": target, "message": f"e{i}", "countdown": countdown}
            )
            # As the parser reads the countdown: its JSON text, rounded up to the ms.
            due_ms = w.timestamp_ms + ceil_ms(Decimal(json.dumps(countdown)))
            due[f"{p.envelopes}:{w.partition}:{w.offset}"] = due_ms
        for i in range(60):
            second = base_s + i // 4
            w = raw.send(
                p.timers, future(target, f"t{i}", f"t{i}".encode()), key=str(second).encode()
            )
            due[f"{p.timers}:{w.partition}:{w.offset}"] = second * 1000
        for kill in (1, 2):
            enough = kill * len(due) // 3

            def some(d: list[Delivery], n: int = enough) -> bool:
                return len(d) >= n

            seen.wait_for(some, timeout_s=120)
            pipeline.kill()
            pipeline.start()
            pipeline.wait_ready()
        eventually(lambda: len({d.schedule_id for d in seen.snapshot()}) >= len(due), 120,
                   "every schedule delivered")  # fmt: skip
        time.sleep(5)
        deliveries = seen.snapshot()
        assert pipeline.terminate() == 0
    counts = Counter(d.schedule_id for d in deliveries)
    assert {k: n for k, n in counts.items() if n > 1} == {}, "duplicated"
    assert set(counts) == set(due), "lost or unknown"
    assert [d for d in deliveries if d.arrival_ms < due[d.schedule_id or ""]] == [], "early"
