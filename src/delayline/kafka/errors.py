"""What librdkafka put inside a ``KafkaException``."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException


def kafka_error(exc: KafkaException) -> KafkaError | None:
    """The ``KafkaError`` a ``KafkaException`` carries (its code, ``retriable()``,
    ``fatal()``), or ``None`` when it carries something else."""
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None
