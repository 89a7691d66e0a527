"""The KafkaError inside a KafkaException, or none."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from delayline.kafka.errors import kafka_error


def test_the_error_librdkafka_put_in_is_returned() -> None:
    inner = KafkaError(KafkaError.NOT_COORDINATOR)
    found = kafka_error(KafkaException(inner))
    assert found is not None
    assert found.code() == KafkaError.NOT_COORDINATOR


def test_anything_else_is_none() -> None:
    assert kafka_error(KafkaException("a message only")) is None
    assert kafka_error(KafkaException()) is None
