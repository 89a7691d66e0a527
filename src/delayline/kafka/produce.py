"""Hand an OutgoingRecord to a librdkafka producer."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer

from delayline.contract import OutgoingRecord


def produce(producer: Producer, record: OutgoingRecord, on_delivery: Any) -> None:
    """Queue ``record``, waiting for queue space when librdkafka's buffer is full."""
    kwargs: dict[str, Any] = {
        "topic": record.topic,
        "key": record.key,
        "value": record.value,
        "headers": list(record.headers),
        "on_delivery": on_delivery,
    }
    if record.partition is not None:
        kwargs["partition"] = record.partition
    if record.timestamp_ms is not None:
        kwargs["timestamp"] = record.timestamp_ms
    while True:
        try:
            producer.produce(**kwargs)
            return
        except BufferError:
            producer.poll(0.05)
