"""What librdkafka put inside a ``KafkaException``."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

COORDINATOR_MOVING = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
"""Answers of a group coordinator that moves or loads (a broker just started): retried."""


def kafka_error(exc: KafkaException) -> KafkaError | None:
    """The ``KafkaError`` a ``KafkaException`` carries (its code, ``retriable()``,
    ``fatal()``), or ``None`` when it carries something else."""
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None
