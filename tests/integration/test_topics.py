from __future__ import annotations

from dataclasses import replace

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from delayline.contract.topology import Topology
from delayline.dev.testing import create_topic, unique_topic
from delayline.errors import ConfigError, TopicConfigError
from delayline.kafka.topics import (
    INFLIGHT_MAX_BYTES,
    TopicsConfig,
    ensure_inflight_topic,
    ensure_topics,
)


def cleanup_policy(bootstrap: str, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    policy: str = admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value
    return policy


def partitions(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def names(bootstrap: str = "", *, history: bool = True) -> TopicsConfig:
    return TopicsConfig(
        Topology(
            bootstrap_servers=bootstrap or "unused:9092",
            schedules_topics=(unique_topic("sched"),),
            dead_letter_topic=unique_topic("dlq"),
            history_topic=unique_topic("hist") if history else None,
            commits_topic=unique_topic("commits"),
        )
    )


def test_creates_topics_with_the_right_policies_and_is_idempotent(kafka_bootstrap: str) -> None:
    config = replace(names(kafka_bootstrap), partitions=3)
    assert ensure_topics(config) == {
        config.topology.schedules_topic: "created",
        config.topology.dead_letter_topic: "created",
        config.topology.commits_topic: "created",
        config.topology.history_topic: "created",
    }
    assert cleanup_policy(kafka_bootstrap, config.topology.schedules_topic) == "compact"
    assert cleanup_policy(kafka_bootstrap, config.topology.commits_topic) == "compact"
    assert cleanup_policy(kafka_bootstrap, config.topology.dead_letter_topic) == "delete"
    assert cleanup_policy(kafka_bootstrap, str(config.topology.history_topic)) == "delete"
    assert partitions(kafka_bootstrap, config.topology.schedules_topic) == 3
    assert set(ensure_topics(config).values()) == {"exists"}


def test_schedules_topic_that_is_not_compacted_is_refused(kafka_bootstrap: str) -> None:
    base = config = names(kafka_bootstrap, history=False)
    create_topic(
        kafka_bootstrap, base.topology.schedules_topic, config={"cleanup.policy": "delete"}
    )
    with pytest.raises(TopicConfigError, match=r"cleanup.policy=delete but must be compacted"):
        ensure_topics(config)


def test_compacted_dead_letter_topic_is_refused(kafka_bootstrap: str) -> None:
    base = config = names(kafka_bootstrap, history=False)
    create_topic(
        kafka_bootstrap, base.topology.dead_letter_topic, config={"cleanup.policy": "compact"}
    )
    with pytest.raises(TopicConfigError, match="must be not compacted"):
        ensure_topics(config)


def test_compact_delete_counts_as_compacted(kafka_bootstrap: str) -> None:
    base = config = names(kafka_bootstrap, history=False)
    create_topic(
        kafka_bootstrap, base.topology.schedules_topic, config={"cleanup.policy": "compact,delete"}
    )
    assert ensure_topics(config)[base.topology.schedules_topic] == "exists"


def test_target_topics_are_created_and_any_existing_policy_is_accepted(
    kafka_bootstrap: str,
) -> None:
    fresh, compacted = unique_topic("target"), unique_topic("target")
    create_topic(kafka_bootstrap, compacted, config={"cleanup.policy": "compact"})
    config = replace(names(kafka_bootstrap, history=False), target_topics=(fresh, compacted))
    outcome = ensure_topics(config)
    assert (outcome[fresh], outcome[compacted]) == ("created", "exists")
    assert cleanup_policy(kafka_bootstrap, fresh) == "delete"


@pytest.mark.parametrize("bad", ["__consumer_offsets", "a b"])
def test_a_bad_target_topic_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="target topic"):
        replace(names(), target_topics=(bad,)).wanted()


def replicas(bootstrap: str, topic: str) -> set[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
    return {len(p.replicas) for p in found}


def cluster_replication_factor(bootstrap: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    broker = next(iter(admin.list_topics(timeout=10).brokers))
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
    return int(
        admin.describe_configs([resource])[resource].result(10)["default.replication.factor"].value
    )


def test_topics_get_the_clusters_replication_factor_unless_one_is_given(
    kafka_bootstrap: str,
) -> None:
    config = names(kafka_bootstrap, history=False)
    ensure_topics(config)
    inflight = unique_topic("inflight")
    ensure_inflight_topic(kafka_bootstrap, inflight)
    wanted = {cluster_replication_factor(kafka_bootstrap)}
    for topic in (config.topology.schedules_topic, config.topology.commits_topic, inflight):
        assert replicas(kafka_bootstrap, topic) == wanted
    # A factor given explicitly reaches Kafka: more than its one broker is refused clearly.
    more = replace(names(kafka_bootstrap, history=False), replication_factor=2)
    with pytest.raises(TopicConfigError, match="replication factor"):
        ensure_topics(more)


@pytest.mark.parametrize("factor", [0, -2])
def test_a_replication_factor_below_one_is_refused(factor: int) -> None:
    with pytest.raises(ConfigError, match=r"default\.replication\.factor"):
        ensure_topics(replace(names(), replication_factor=factor))


def max_message_bytes(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(10)
    return int(entries["max.message.bytes"].value)


def test_the_inflight_topic_takes_the_largest_hand_over_and_an_earlier_ones_limit_is_raised(
    kafka_bootstrap: str,
) -> None:
    made = unique_topic("inflight")
    assert ensure_inflight_topic(kafka_bootstrap, made) == "created"
    assert max_message_bytes(kafka_bootstrap, made) == INFLIGHT_MAX_BYTES
    # As an earlier version made it: the broker's default limit (about 1 MiB).
    earlier = create_topic(
        kafka_bootstrap,
        unique_topic("inflight"),
        config={"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime"},
    )
    assert max_message_bytes(kafka_bootstrap, earlier) < INFLIGHT_MAX_BYTES
    assert ensure_inflight_topic(kafka_bootstrap, earlier, 2) == "grown"
    assert max_message_bytes(kafka_bootstrap, earlier) == INFLIGHT_MAX_BYTES
    assert partitions(kafka_bootstrap, earlier) == 2
