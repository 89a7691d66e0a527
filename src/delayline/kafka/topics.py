"""Create delayline's topics and check existing ones are fit for use."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from delayline.contract.topics import target_topic_problem, topic_name_problem
from delayline.contract.topology import Topology
from delayline.errors import ConfigError, KafkaUnavailableError, TopicConfigError
from delayline.kafka.config import kafka_client_config

log = logging.getLogger(__name__)


CLUSTER_DEFAULT = -1
"""A replication factor that asks for the cluster's ``default.replication.factor`` (Kafka
2.4 and later): 1 on a single broker, what the operators chose on a real cluster."""
ANY_POLICY = "any"
"""A target topic may have any ``cleanup.policy``; one created here is not compacted."""
INFLIGHT_MAX_BYTES = 8 * 1024 * 1024
"""The largest record batch the in-flight topic takes (its ``max.message.bytes``), and so
the largest schedule handed over: well above the 1 MiB a schedules topic takes by
default, so a schedule any such topic accepted is handed over, never delivered early."""


@dataclass(frozen=True, slots=True)
class TopicsConfig:
    """The topics delayline owns and how to create them.

    Attributes:
        topology: The cluster and topic names; every schedules topic is ensured.
        target_topics: Topics delayline delivers to, created when missing (delayline
            itself never creates a target: a delivery to a missing one is refused).
        partitions: Partitions of each topic created.
        replication_factor: Replicas of each topic created (:data:`CLUSTER_DEFAULT`: the
            cluster's ``default.replication.factor``).
        timeout_ms: Per admin request.
    """

    topology: Topology = field(default_factory=Topology)
    partitions: int = 4
    replication_factor: int = CLUSTER_DEFAULT
    timeout_ms: int = 15_000
    target_topics: tuple[str, ...] = ()

    def wanted(self) -> dict[str, str]:
        """Topic name to required ``cleanup.policy`` (:data:`ANY_POLICY` for targets).

        Raises:
            ConfigError: a target topic name is invalid, internal, or one of delayline's.
        """
        t = self.topology
        wanted = dict.fromkeys(t.schedules_topics, "compact")
        # Not keyed by schedule id (an envelope's key may be empty, a timer request's is
        # its second): compaction would drop schedules. Retention ends their records.
        wanted.update(dict.fromkeys((*t.envelope_topics, *t.timer_request_topics), "delete"))
        wanted[t.dead_letter_topic] = "delete"
        wanted[t.commits_topic] = "compact"
        if t.history_topic:
            wanted[t.history_topic] = "delete"
        for name in self.target_topics:
            problem = target_topic_problem(name)
            if problem is not None:
                raise ConfigError(f"target topic {name!r} is {problem}")
            if name in wanted:
                raise ConfigError(f"target topic {name!r} is one of delayline's own topics")
            wanted[name] = ANY_POLICY
        return wanted


def ensure_topics(config: TopicsConfig) -> dict[str, str]:
    """Create the missing topics; verify the cleanup policy of existing ones.

    Safe to run any number of times, also concurrently with another instance.

    Returns:
        Topic name to what happened: ``"created"`` or ``"exists"``.

    Raises:
        TopicConfigError: an existing topic has the wrong ``cleanup.policy``
            (the schedules topic must be compacted; the others must not be).
        KafkaUnavailableError: the cluster did not answer in time.
    """
    if config.partitions < 1:
        raise ConfigError("partitions must be at least 1")
    if config.replication_factor < 1 and config.replication_factor != CLUSTER_DEFAULT:
        raise ConfigError(
            f"replication factor {config.replication_factor} must be at least 1, or "
            f"{CLUSTER_DEFAULT} for the cluster's default.replication.factor"
        )
    wanted = config.wanted()
    admin = AdminClient(kafka_client_config(config.topology.bootstrap_servers))
    timeout_s = config.timeout_ms / 1000
    existing = _existing_topics(admin, config)
    outcome: dict[str, str] = {}
    to_create = [
        NewTopic(
            name,
            num_partitions=config.partitions,
            replication_factor=config.replication_factor,
            config={"cleanup.policy": "delete" if policy == ANY_POLICY else policy},
        )
        for name, policy in wanted.items()
        if name not in existing
    ]
    if to_create:
        for name, future in admin.create_topics(to_create, operation_timeout=timeout_s).items():
            try:
                future.result(timeout=timeout_s)
                outcome[name] = "created"
                log.info("created topic %s (cleanup.policy=%s)", name, wanted[name])
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise TopicConfigError(
                        f"could not create topic {name}: {exc.args[0].str()}"
                    ) from exc
                existing.add(name)  # another instance won the race; check it below
    for name in wanted:
        if name in existing:
            if wanted[name] != ANY_POLICY:
                _check_policy(admin, name, wanted[name], timeout_s)
            outcome[name] = "exists"
    wait_for_leaders(admin, list(wanted), timeout_s)
    return outcome


def _existing_topics(admin: AdminClient, config: TopicsConfig) -> set[str]:
    try:
        metadata = admin.list_topics(timeout=config.timeout_ms / 1000)
    except KafkaException as exc:
        raise KafkaUnavailableError(
            f"Kafka at {config.topology.bootstrap_servers} did not answer within "
            f"{config.timeout_ms / 1000:g} s: {exc.args[0]}"
        ) from exc
    return set(metadata.topics)


def _check_policy(admin: AdminClient, name: str, policy: str, timeout_s: float) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    try:
        entries = admin.describe_configs([resource])[resource].result(timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaUnavailableError(
            f"could not read config of topic {name}: {exc.args[0]}"
        ) from exc
    actual = entries["cleanup.policy"].value if "cleanup.policy" in entries else "delete"
    policies = set((actual or "").split(","))
    ok = "compact" in policies if policy == "compact" else "compact" not in policies
    if not ok:
        need = "compacted (cleanup.policy=compact)" if policy == "compact" else "not compacted"
        raise TopicConfigError(
            f"topic {name} exists with cleanup.policy={actual} but must be {need}; "
            f"fix with: kafka-configs --alter --entity-type topics --entity-name {name} "
            f"--add-config cleanup.policy={policy}"
        )


def create_topic(
    bootstrap_servers: str,
    name: str,
    *,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
    replication_factor: int = CLUSTER_DEFAULT,
) -> str:
    """Create one topic and wait until it exists; return its name. Its replication factor
    is the cluster's ``default.replication.factor`` unless ``replication_factor`` is
    given: delayline's own topics (in-flight, wake) hold what is not yet delivered, so
    they get the replicas the cluster gives every topic.

    Raises:
        KafkaException: Kafka refused, for example because the topic exists.
    """
    admin = AdminClient(kafka_client_config(bootstrap_servers))
    topic = NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        config=dict(config or {}),
    )
    admin.create_topics([topic], operation_timeout=timeout_s)[name].result(timeout=timeout_s)
    wait_for_leaders(admin, [name], timeout_s)
    return name


def wait_for_leaders(admin: AdminClient, names: list[str], timeout_s: float) -> None:
    """Block until every partition of ``names`` has a leader.

    CreateTopics returns before leaders are elected; a read or watermark
    request in that window fails with NOT_LEADER_FOR_PARTITION.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        metadata = admin.list_topics(timeout=timeout_s)
        waiting = [
            name
            for name in names
            if (info := metadata.topics.get(name)) is None
            or info.error is not None
            or not info.partitions
            or any(p.leader < 0 or p.error is not None for p in info.partitions.values())
        ]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise KafkaUnavailableError(
                f"no leader for topic(s) {', '.join(waiting)} after {timeout_s:g} s"
            )
        time.sleep(0.05)


def cluster_brokers(bootstrap_servers: str, timeout_s: float) -> list[dict[str, object]]:
    """The cluster's brokers as ``{"id", "host", "port"}``; empty when unreachable."""
    admin = AdminClient(kafka_client_config(bootstrap_servers))
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        log.debug("no metadata from %s: %s", bootstrap_servers, exc)
        return []
    return [
        {"id": b.id, "host": b.host, "port": b.port}
        for b in sorted(metadata.brokers.values(), key=lambda b: b.id)
    ]


def partition_count(bootstrap_servers: str, name: str, timeout_s: float = 10.0) -> int | None:
    """How many partitions topic ``name`` has; ``None`` when it does not exist or the
    cluster did not answer within ``timeout_s``."""
    admin = AdminClient(kafka_client_config(bootstrap_servers))
    try:
        found = admin.list_topics(name, timeout=timeout_s).topics.get(name)
    except KafkaException as exc:
        log.debug("no metadata of %s from %s: %s", name, bootstrap_servers, exc)
        return None
    if found is None or found.error is not None:
        return None
    return len(found.partitions)


WAKE_RETENTION_MS = 3_600_000
"""Wake records matter only until the next micro-batch; an hour is plenty."""
OSCILLATOR_RETENTION_MS = 86_400_000
INFLIGHT_SEGMENT_MS = 3_600_000
"""Segments of the in-flight topic roll hourly, so compaction can drop delivered ones."""


def ensure_wake_topic(bootstrap_servers: str, name: str, timeout_s: float = 30.0) -> str:
    """Create the pipeline's wake topic unless it exists: one partition, deleted after an hour.

    Returns:
        ``"created"`` or ``"exists"``.

    Raises:
        ConfigError: the name is not a valid topic name.
        TopicConfigError: Kafka refused to create it.
        KafkaUnavailableError: the cluster did not answer in time.
    """
    config = {"cleanup.policy": "delete", "retention.ms": str(WAKE_RETENTION_MS)}
    return _ensure_internal_topic(bootstrap_servers, name, "wake", config, timeout_s)


def ensure_notice_topic(bootstrap_servers: str, name: str, timeout_s: float = 30.0) -> str:
    """Create the pipeline's notice topic unless it exists
    (:mod:`delayline.kafka.notice_store`): one partition, compacted (its one key's latest
    record is the rules, kept however long ago it was written).

    Returns and raises as :func:`ensure_wake_topic`; also raises TopicConfigError when
    it exists but is not compacted.
    """
    config = {"cleanup.policy": "compact"}
    outcome = _ensure_internal_topic(bootstrap_servers, name, "notice", config, timeout_s)
    if outcome == "exists":
        admin = AdminClient(kafka_client_config(bootstrap_servers))
        _check_policy(admin, name, "compact", timeout_s)
    return outcome


def ensure_oscillator_topic(bootstrap_servers: str, name: str, timeout_s: float = 30.0) -> str:
    """Create an oscillator's topic unless it exists: one partition, deleted after a day
    (a consumer that is down for less still finds every second).

    Returns and raises as :func:`ensure_wake_topic`.
    """
    config = {"cleanup.policy": "delete", "retention.ms": str(OSCILLATOR_RETENTION_MS)}
    return _ensure_internal_topic(bootstrap_servers, name, "oscillator", config, timeout_s)


def ensure_inflight_topic(
    bootstrap_servers: str, name: str, partitions: int = 1, timeout_s: float = 30.0
) -> str:
    """Create the pipeline's in-flight topic unless it exists (:mod:`delayline.fire.inflight`),
    with at least ``partitions`` partitions (an existing one with fewer is grown: each
    record names its partition and its tombstone goes to the same one, so nothing
    handed over is lost or moved; one with more keeps them).

    Compacted (a delivered schedule's record is removed by its tombstone; one not yet
    delivered stays, however long the pipeline is down), stamped on append (the
    committer measures the broker's clock through it).

    Returns ``created``, ``exists`` or ``grown``; raises as :func:`ensure_wake_topic`.
    """
    config = {
        "cleanup.policy": "compact",
        "message.timestamp.type": "LogAppendTime",
        "segment.ms": str(INFLIGHT_SEGMENT_MS),
        "max.message.bytes": str(INFLIGHT_MAX_BYTES),
    }
    outcome = _ensure_internal_topic(
        bootstrap_servers, name, "in-flight", config, timeout_s, partitions
    )
    if outcome == "created":
        return outcome
    admin = AdminClient(kafka_client_config(bootstrap_servers))
    _raise_message_limit(admin, name, INFLIGHT_MAX_BYTES, timeout_s)
    try:
        found = admin.list_topics(name, timeout=timeout_s).topics[name]
        if found.error is not None or len(found.partitions) >= partitions:
            return outcome
        had = len(found.partitions)
        grow = NewPartitions(name, partitions)
        admin.create_partitions([grow], operation_timeout=timeout_s)[name].result(timeout_s)
        wait_for_leaders(admin, [name], timeout_s)
    except KafkaException as exc:
        raise TopicConfigError(
            f"could not grow in-flight topic {name} to {partitions} partitions: {exc.args[0]}"
        ) from exc
    log.info("grew in-flight topic %s from %d to %d partitions", name, had, partitions)
    return "grown"


def _raise_message_limit(admin: AdminClient, name: str, limit: int, timeout_s: float) -> None:
    """Raise topic ``name``'s ``max.message.bytes`` to ``limit`` if it is lower (an
    in-flight topic made by an earlier version of delayline).

    Raises:
        TopicConfigError: it is lower and could not be raised (``AlterConfigs`` denied).
        KafkaUnavailableError: its configuration could not be read.
    """
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    try:
        entries = admin.describe_configs([resource])[resource].result(timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaUnavailableError(f"could not read config of topic {name}: {exc}") from exc
    entry = entries.get("max.message.bytes")
    current = int(entry.value) if entry is not None and entry.value else 0
    if current >= limit:
        return
    change = ConfigEntry(
        "max.message.bytes", str(limit), incremental_operation=AlterConfigOpType.SET
    )
    wanted = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[change])
    try:
        admin.incremental_alter_configs([wanted])[wanted].result(timeout=timeout_s)
    except KafkaException as exc:
        raise TopicConfigError(
            f"topic {name} takes records of {current} bytes at most, under the {limit} a "
            f"hand-over may take, and could not be raised ({exc.args[0]}); grant AlterConfigs "
            f"on it or fix with: kafka-configs --alter --entity-type topics --entity-name "
            f"{name} --add-config max.message.bytes={limit}"
        ) from exc
    log.info("raised max.message.bytes of topic %s from %d to %d", name, current, limit)


def _ensure_internal_topic(
    bootstrap_servers: str,
    name: str,
    what: str,
    config: dict[str, str],
    timeout_s: float,
    partitions: int = 1,
) -> str:
    problem = topic_name_problem(name)
    if problem is not None:
        raise ConfigError(f"{what} topic name {name!r} is invalid: {problem}")
    try:
        create_topic(
            bootstrap_servers, name, partitions=partitions, config=config, timeout_s=timeout_s
        )
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise TopicConfigError(f"could not create topic {name}: {exc.args[0].str()}") from exc
        return "exists"
    log.info("created %s topic %s", what, name)
    return "created"
