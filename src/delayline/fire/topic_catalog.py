"""Facts about target topics, read from the cluster and kept while they allow delivery.

:class:`TopicCatalog` decides which deliveries of a batch are refused before any is
produced (:func:`~delayline.fire.refusals.precheck` over its facts) and confirms a
broker's refusal with fresh ones; :class:`AdminDescriber` is the only part that talks to
Kafka.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclOperation,
    AdminClient,
    ConfigResource,
)

from delayline.contract import OutgoingRecord
from delayline.fire.refusals import TOPIC_REFUSALS, Failure, TopicFacts, name_problem, precheck
from delayline.kafka.config import kafka_client_config
from delayline.kafka.errors import kafka_error

log = logging.getLogger(__name__)

Describe = Callable[[Collection[str], bool], Mapping[str, TopicFacts | None]]
"""``(topics, with write authorisation) -> facts``; ``None`` (or absent) for a topic
the cluster could not be asked about. Never raises."""


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


FACTS_TTL_MS = 60_000
"""How long :class:`TopicCatalog` keeps the facts that allow delivery to a topic."""


class TopicCatalog:
    """Facts about target topics: those that allow delivery are kept ``ttl_ms``.

    A fact that refuses a delivery (the topic is missing, the record over its limit)
    is always read for the batch it refuses, so a topic created or a limit raised
    takes effect at once, and a replay judges on facts as fresh as the first run.
    """

    def __init__(
        self,
        describe: Describe,
        ttl_ms: int = FACTS_TTL_MS,
        clock: Callable[[], int] = _monotonic_ms,
        allowed: str | None = None,
    ) -> None:
        self.allowed = allowed
        """``--allowed-target-topics``: deliveries to other topics are refused."""
        self._describe = describe
        self._ttl_ms = ttl_ms
        self._clock = clock
        self._cache: dict[str, tuple[int, TopicFacts]] = {}

    def check(self, deliveries: Mapping[int, OutgoingRecord]) -> dict[int, str]:
        """The deliveries to dead-letter before producing anything (see
        :func:`~delayline.fire.refusals.precheck`)."""
        topics = {
            d.topic for d in deliveries.values() if name_problem(d.topic, self.allowed) is None
        }
        now = self._clock()
        facts: dict[str, TopicFacts | None] = {}
        for topic in topics:
            cached = self._cache.get(topic)
            if cached is not None and now - cached[0] < self._ttl_ms:
                facts[topic] = cached[1]
        # Write authorisation is asked up front: a denied topic inside a transaction
        # can end it with a fatal INVALID_TXN_STATE instead of a refusal we can judge.
        fresh = self._read(topics - facts.keys(), authorization=True)
        facts.update(fresh)
        refused = precheck(deliveries, facts, self.allowed)
        # A refusal from a cached fact is read again before it counts.
        stale = {deliveries[i].topic for i in refused} & (topics - fresh.keys())
        if stale:
            facts.update(self._read(stale, authorization=True))
            refused = precheck(deliveries, facts, self.allowed)
        return refused

    def stale(self, topics: Collection[str], within_ms: int) -> set[str]:
        """Those of ``topics`` whose facts are unknown or expire within ``within_ms``."""
        now = self._clock()
        return {
            topic
            for topic in topics
            if (entry := self._cache.get(topic)) is None
            or now - entry[0] >= self._ttl_ms - within_ms
        }

    def confirm(self, topics: Collection[str]) -> dict[str, TopicFacts | None]:
        """Fresh facts, write authorisation included, to confirm a broker's refusal."""
        return self._read(topics, authorization=True)

    def cached(self, topic: str) -> TopicFacts | None:
        """The last facts that allowed delivery to ``topic``, however old."""
        entry = self._cache.get(topic)
        return None if entry is None else entry[1]

    def _read(
        self, topics: Collection[str], *, authorization: bool
    ) -> dict[str, TopicFacts | None]:
        if not topics:
            return {}
        facts = dict(self._describe(topics, authorization))
        now = self._clock()
        for topic in topics:
            fact = facts.setdefault(topic, None)
            if fact is not None and fact.refusal() is None:
                self._cache[topic] = (now, fact)
            else:
                self._cache.pop(topic, None)
        return facts


class AdminDescriber:
    """:data:`Describe` over an admin client: DescribeTopics (which never creates a
    topic, unlike a metadata request naming it) and DescribeConfigs."""

    def __init__(self, bootstrap_servers: str, timeout_ms: int) -> None:
        self._admin = AdminClient(kafka_client_config(bootstrap_servers))
        self._timeout_s = timeout_ms / 1000

    def __call__(
        self, topics: Collection[str], authorization: bool
    ) -> dict[str, TopicFacts | None]:
        names = sorted(topics)
        facts: dict[str, TopicFacts | None] = dict.fromkeys(names)
        try:
            described = self._admin.describe_topics(
                TopicCollection(names),
                request_timeout=self._timeout_s,
                include_authorized_operations=authorization,
            )
        except KafkaException as exc:
            log.warning("could not describe topics %s: %s", ", ".join(names), exc)
            return facts
        found: dict[str, TopicFacts] = {}
        for name, future in described.items():
            try:
                description = future.result(timeout=self._timeout_s)
            except KafkaException as exc:
                error = kafka_error(exc)
                if error is not None and error.code() in TOPIC_REFUSALS:
                    facts[name] = TopicFacts(error=Failure.of(error))
                else:
                    log.warning("could not describe topic %s: %s", name, exc)
                continue
            ops = description.authorized_operations
            writable = None if not authorization or ops is None else AclOperation.WRITE in ops
            found[name] = TopicFacts(writable=writable)
        for name, fact in found.items():
            facts[name] = fact
        resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in found]
        if not resources:
            return facts
        try:
            configs = self._admin.describe_configs(resources, request_timeout=self._timeout_s)
        except KafkaException as exc:
            log.warning("could not read topic configs: %s", exc)
            return facts
        for resource, future in configs.items():
            try:
                entries = future.result(timeout=self._timeout_s)
                limit = int(entries["max.message.bytes"].value)
                compacted = "compact" in entries["cleanup.policy"].value.split(",")
                stamp = entries["message.timestamp.type"].value
            except (KafkaException, KeyError, ValueError) as exc:
                log.debug("no config of topic %s: %s", resource.name, exc)
                continue
            fact = found[resource.name]
            facts[resource.name] = TopicFacts(
                fact.error, limit, compacted, fact.writable, stamp == "LogAppendTime"
            )
        return facts
