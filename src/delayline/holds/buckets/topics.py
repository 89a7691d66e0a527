"""Create the bucket topics, and check that existing ones keep every copy until read.

A bucket topic must not be compacted (a copy is keyed by its schedule id, and copies of
one id may be live and dead at once), must keep a copy at least as long as the copy can
wait in it (its range) and should keep it longer by the margin (the longest outage of
the pipeline that loses nothing), must not delete by size, and must keep the producer's
timestamps (a copy's timestamp is the batch time its wait is counted from).
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
)

from delayline.core.units import format_duration_ms
from delayline.errors import KafkaUnavailableError, TopicConfigError
from delayline.holds.buckets.config import BucketsConfig
from delayline.kafka.config import kafka_client_config
from delayline.kafka.topics import CLUSTER_DEFAULT

log = logging.getLogger(__name__)

SEGMENT_BYTES = 64 * 1024 * 1024
SEGMENT_MS = 3_600_000


def bucket_topic_config(layout: BucketsConfig, bucket: int) -> dict[str, str]:
    """The settings a bucket topic is created with."""
    return {
        "cleanup.policy": "delete",
        "retention.ms": str(layout.retention_ms(bucket)),
        "retention.bytes": "-1",
        "message.timestamp.type": "CreateTime",
        # Read copies are deleted (DeleteRecords) once their batch commits; a segment's
        # disk is freed when all of it is, so segments stay small and roll hourly.
        "segment.bytes": str(SEGMENT_BYTES),
        "segment.ms": str(SEGMENT_MS),
    }


def ensure_bucket_topics(
    bootstrap_servers: str,
    layout: BucketsConfig,
    *,
    replication_factor: int = CLUSTER_DEFAULT,
    timeout_s: float = 30.0,
) -> dict[str, str]:
    """Create the missing bucket topics; check the existing ones.

    Returns:
        Topic name to ``"created"`` or ``"exists"``.

    Raises:
        TopicConfigError: an existing bucket topic could lose copies (the message says
            which setting and the command that fixes it).
        KafkaUnavailableError: the cluster did not answer in time.
    """
    admin = AdminClient(kafka_client_config(bootstrap_servers))
    try:
        existing = set(admin.list_topics(timeout=timeout_s).topics)
    except KafkaException as exc:
        raise KafkaUnavailableError(f"Kafka at {bootstrap_servers}: {exc.args[0]}") from exc
    wanted = {
        topic: NewTopic(
            topic,
            num_partitions=layout.partitions,
            replication_factor=replication_factor,
            config=bucket_topic_config(layout, bucket),
        )
        for bucket, topic in enumerate(layout.topics)
        if topic not in existing
    }
    outcome = {}
    if wanted:
        futures = admin.create_topics(list(wanted.values()), operation_timeout=timeout_s)
        for name, future in futures.items():
            try:
                future.result(timeout=timeout_s)
                outcome[name] = "created"
                log.info("created bucket topic %s", name)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise TopicConfigError(
                        f"could not create bucket topic {name}: {exc.args[0].str()}"
                    ) from exc
                existing.add(name)
    for bucket, topic in enumerate(layout.topics):
        if topic in existing:
            _check(admin, layout, bucket, timeout_s)
            outcome[topic] = "exists"
    return {topic: outcome[topic] for topic in layout.topics}


def _check(admin: AdminClient, layout: BucketsConfig, bucket: int, timeout_s: float) -> None:
    topic = layout.topic(bucket)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource])[resource].result(timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaUnavailableError(f"could not read config of topic {topic}: {exc}") from exc

    def value(name: str, default: str) -> str:
        entry = entries.get(name)
        return default if entry is None or entry.value is None else str(entry.value)

    fix = f"kafka-configs --alter --entity-type topics --entity-name {topic} --add-config"
    policy = value("cleanup.policy", "delete")
    if "compact" in policy.split(","):
        raise TopicConfigError(
            f"bucket topic {topic} is compacted (cleanup.policy={policy}): compaction "
            f"drops copies that are still live; fix with: {fix} cleanup.policy=delete"
        )
    if value("message.timestamp.type", "CreateTime") != "CreateTime":
        raise TopicConfigError(
            f"bucket topic {topic} stamps records on append: a copy's wait is counted "
            f"from the batch time it carries; fix with: {fix} message.timestamp.type=CreateTime"
        )
    if int(value("retention.bytes", "-1")) >= 0:
        raise TopicConfigError(
            f"bucket topic {topic} deletes by size (retention.bytes="
            f"{value('retention.bytes', '-1')}): copies would go before they are read; "
            f"fix with: {fix} retention.bytes=-1"
        )
    retention = int(value("retention.ms", "604800000"))
    if retention < 0:
        return  # kept forever
    upper = layout.upper_ms(bucket)
    stay = 2 * layout.lower_ms(bucket) if upper is None else upper
    wanted = layout.retention_ms(bucket)
    if retention <= stay:
        raise TopicConfigError(
            f"bucket topic {topic} keeps records {format_duration_ms(retention)}, but a copy "
            f"can wait there up to {format_duration_ms(stay)}: copies would be deleted "
            f"before they are read; fix with: {fix} retention.ms={wanted}"
        )
    if retention < wanted:
        log.warning(
            "bucket topic %s keeps records %s: a pipeline down for more than %s loses "
            "copies (the margin asked for is %s; retention.ms=%d gives it)",
            topic,
            format_duration_ms(retention),
            format_duration_ms(retention - stay),
            format_duration_ms(layout.retention_margin_ms),
            wanted,
        )
