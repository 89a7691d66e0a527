"""Ask the cluster about one topic, with errors that say what to do."""

from __future__ import annotations

from typing import Protocol

from confluent_kafka import KafkaException
from confluent_kafka.admin import ClusterMetadata  # type: ignore[attr-defined]

from delayline.errors import KafkaUnavailableError, TopicMissingError


class _HasMetadata(Protocol):
    def list_topics(self, topic: str | None = ..., timeout: float = ...) -> ClusterMetadata: ...


def topic_partitions(
    client: _HasMetadata, topic: str, bootstrap_servers: str, timeout_s: float, hint: str = ""
) -> list[int]:
    """The partition numbers of ``topic``, sorted, through any librdkafka client.

    Args:
        client: A producer or consumer (both answer metadata requests).
        topic: The topic asked about.
        bootstrap_servers: Named in the errors.
        timeout_s: Bound on the metadata request.
        hint: Appended to the missing-topic error (e.g. how to create it).

    Raises:
        KafkaUnavailableError: no answer within ``timeout_s``.
        TopicMissingError: the topic does not exist.
    """
    try:
        metadata = client.list_topics(topic, timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaUnavailableError(
            f"Kafka at {bootstrap_servers} did not answer within {timeout_s:g} s: {exc.args[0]}"
        ) from exc
    info = metadata.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        raise TopicMissingError(f"topic {topic!r} does not exist on {bootstrap_servers}{hint}")
    return sorted(info.partitions)
