"""Topics of retrying consumers, made when missing: a group's retry and dead-letter
topics, a dead-letter topic's redrive marks."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from delayline.client.config import ClientConfig
from delayline.client.consumer.retries import RetryConfig
from delayline.errors import KafkaUnavailableError, TopicConfigError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.topics import wait_for_leaders

log = logging.getLogger(__name__)


def ensure_retry_topics(
    client: ClientConfig, retry: RetryConfig, partitions: int, timeout_s: float = 30.0
) -> dict[str, str]:
    """Create ``retry``'s retry and dead-letter topics unless they exist, with
    ``partitions`` each and the cluster's replication factor.

    Returns and raises as :func:`ensure_topics`.
    """
    names = [retry.retry_topic, retry.dead_letter_topic]
    return ensure_topics(
        client.bootstrap_servers,
        [NewTopic(name, num_partitions=partitions) for name in names],
        kafka=dict(client.kafka),
        timeout_s=timeout_s,
    )


def ensure_topics(
    bootstrap_servers: str,
    topics: Iterable[NewTopic],
    *,
    kafka: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> dict[str, str]:
    """Create ``topics`` unless they exist (with ``kafka``'s security settings, after
    the process's).

    Returns:
        Each topic's name to ``"created"`` or ``"exists"``.

    Raises:
        TopicConfigError: Kafka refused to create one (an ACL, a policy).
        KafkaUnavailableError: the cluster did not answer within ``timeout_s``.
    """
    admin = AdminClient(kafka_client_config(bootstrap_servers, **dict(kafka or {})))
    futures = admin.create_topics(
        list(topics), operation_timeout=timeout_s, request_timeout=timeout_s
    )
    outcome: dict[str, str] = {}
    for name, future in futures.items():
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                outcome[name] = "exists"
                continue
            if error.retriable():
                raise KafkaUnavailableError(
                    f"could not create topic {name}: {error.str()}"
                ) from exc
            raise TopicConfigError(f"could not create topic {name}: {error.str()}") from exc
        outcome[name] = "created"
        log.info("created topic %s", name)
    wait_for_leaders(admin, [n for n, o in outcome.items() if o == "created"], timeout_s)
    return outcome
