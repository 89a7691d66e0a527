"""Ending the transactions a killed run's fire tasks left open, before a restart."""

from __future__ import annotations

from confluent_kafka import KafkaException

from delayline.core.identifiers import partition_transactional_id
from delayline.errors import KafkaUnavailableError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.transactions import transactional_producer


def end_left_open(
    bootstrap_servers: str, transactional_id: str, partitions: int, timeout_s: float = 30.0
) -> None:
    """Abort what a killed run's fire tasks left open: a producer of each partition's
    transactional id (``partition_transactional_id``) initialised and closed. A
    transaction left open in the in-flight topic holds every read_committed reader there
    (the committer catching up after the restart) until it ends: otherwise when the
    batch's replay makes its producer again, once Spark has started, or at the
    transaction's timeout.

    Raises:
        KafkaUnavailableError: Kafka did not answer within ``timeout_s``.
    """
    for partition in range(partitions):
        tx_id = partition_transactional_id(transactional_id, partition)
        settings = kafka_client_config(bootstrap_servers, **{"transactional.id": tx_id})
        try:
            transactional_producer(settings, timeout_s).flush(0)
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"could not end the transactions of {tx_id}: {exc.args[0].str()}"
            ) from exc
