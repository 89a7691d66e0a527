"""Hand an OutgoingRecord to a librdkafka producer."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer

from delayline.contract import OutgoingRecord
from delayline.core.model import Headers
from delayline.errors import DeliveryError
from delayline.kafka.config import kafka_client_config


def produce(producer: Producer, record: OutgoingRecord, on_delivery: Any) -> None:
    """Queue ``record``, waiting for queue space when librdkafka's buffer is full."""
    topic, key, value, headers, partition, timestamp = record
    where = -1 if partition is None else partition  # -1: the partitioner's
    while True:
        try:
            _queue(producer, topic, value, key, headers, where, timestamp, on_delivery)
            return
        except BufferError:
            producer.poll(0.05)


def _queue(
    producer: Producer,
    topic: str,
    value: bytes | None,
    key: bytes | None,
    headers: Headers,
    partition: int,
    timestamp: int | None,
    on_delivery: Any,
) -> None:
    """One ``produce`` call. This runs for every record written: to confluent-kafka's own
    producer, topic, value and key go by position (its documented order) and only the
    keywords a record needs (each one given costs its argument parsing: an in-flight
    tombstone 0.7 us with its partition alone, 1.4 with every keyword); any other
    producer (a subclass may order its arguments otherwise: ``SerializingProducer``
    takes the key first) gets every argument by name."""
    if type(producer) is not Producer:
        producer.produce(
            topic=topic, value=value, key=key, partition=partition, on_delivery=on_delivery,
            timestamp=timestamp or 0, headers=list(headers),
        )  # fmt: skip
    elif on_delivery is not None:
        producer.produce(
            topic, value, key, partition=partition, on_delivery=on_delivery,
            timestamp=timestamp or 0, headers=list(headers),
        )  # fmt: skip
    elif headers:
        producer.produce(
            topic, value, key, partition=partition, timestamp=timestamp or 0, headers=list(headers)
        )
    elif timestamp:
        producer.produce(topic, value, key, partition=partition, timestamp=timestamp)
    else:
        producer.produce(topic, value, key, partition=partition)


def produce_one(
    bootstrap_servers: str, record: OutgoingRecord, timeout_ms: int
) -> tuple[int, int, int]:
    """Write ``record`` and wait for Kafka's acknowledgement (idempotent producer, acks=all).

    Returns:
        The partition and offset it was written at, and its timestamp (epoch ms).

    Raises:
        DeliveryError: Kafka refused it, or did not acknowledge it within ``timeout_ms``.
    """
    producer = Producer(
        {**kafka_client_config(bootstrap_servers), "enable.idempotence": True,
         "delivery.timeout.ms": max(timeout_ms, 1000),
         # Keyed records land where the Java client and delayline's own client put them.
         "partitioner": "murmur2_random"}
    )  # fmt: skip
    outcome: list[tuple[Any, Any]] = []
    produce(producer, record, lambda err, msg: outcome.append((err, msg)))
    producer.flush(max(timeout_ms, 1000) / 1000 + 1)
    if not outcome:
        raise DeliveryError([(record.topic, f"not acknowledged within {timeout_ms} ms")])
    err, msg = outcome[0]
    if err is not None:
        raise DeliveryError([(record.topic, str(err))])
    return int(msg.partition()), int(msg.offset()), int(msg.timestamp()[1])
