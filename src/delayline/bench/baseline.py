"""The physical limit: the same broker, the same client settings, no delayline.

Produce N records as fast as possible (idempotent, acks=all, like the client),
consume them back with ``read_committed``; then a paced run measures end-to-end
latency. Every delayline figure is reported as a ratio to these.
"""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer

from delayline.contract import OutgoingRecord
from delayline.core.stats import summary
from delayline.kafka.config import kafka_client_config
from delayline.kafka.produce import produce
from delayline.kafka.reader import private_consumer
from delayline.kafka.topics import create_topic

_STAMP = struct.Struct(">q")


def measure_baseline(bootstrap: str, records: int, payload_bytes: int = 100) -> dict[str, Any]:
    """Raw produce and consume throughput (records/s) and latency (ms) of the broker."""
    topic = create_topic(bootstrap, f"bench-baseline-{uuid.uuid4().hex[:8]}", partitions=3)
    producer = Producer(
        kafka_client_config(
            bootstrap, **{"enable.idempotence": True, "acks": "all", "linger.ms": 5}
        )
    )
    payload = b"x" * payload_bytes
    began = time.perf_counter()
    for i in range(records):
        produce(producer, OutgoingRecord(topic, str(i).encode(), payload), None)
    producer.flush(60)
    produce_s = time.perf_counter() - began

    consumer = _consumer(bootstrap, topic)
    began = time.perf_counter()
    seen = 0
    while seen < records and time.perf_counter() - began < 120:
        seen += len(consumer.consume(10_000, 0.5))
    consume_s = time.perf_counter() - began
    consumer.close()

    latency = _latency(bootstrap, topic, producer, min(records, 5_000))
    return {
        "records": records,
        "produce_per_s": round(records / produce_s),
        "consume_per_s": round(seen / consume_s),
        "latency_ms": summary(latency),
    }


def _latency(bootstrap: str, topic: str, producer: Producer, count: int) -> list[int]:
    """Paced at 1,000/s: time from produce to a read_committed consumer seeing it."""
    consumer = _consumer(bootstrap, topic, from_end=True)
    consumer.consume(1, 2.0)  # join before producing
    out: list[int] = []
    start = time.time()
    for i in range(count):
        produce(producer, OutgoingRecord(topic, b"lat", _STAMP.pack(time.time_ns())), None)
        producer.poll(0)
        lag = start + (i + 1) / 1000 - time.time()
        if lag > 0:
            time.sleep(lag)
        for msg in consumer.consume(1000, 0):
            out.append(_latency_of(msg))
    producer.flush(30)
    deadline = time.time() + 30
    while len(out) < count and time.time() < deadline:
        out.extend(_latency_of(m) for m in consumer.consume(1000, 0.2))
    consumer.close()
    return out


def _latency_of(msg: Any) -> int:
    value = msg.value() or b""
    if len(value) != _STAMP.size:
        return 0
    return int((time.time_ns() - _STAMP.unpack(value)[0]) // 1_000_000)


def _consumer(bootstrap: str, topic: str, *, from_end: bool = False) -> Consumer:
    consumer = private_consumer(
        bootstrap,
        "bench",
        overrides={
            "auto.offset.reset": "latest" if from_end else "earliest",
            "fetch.wait.max.ms": 10,
        },
    )
    consumer.subscribe([topic])
    return consumer
