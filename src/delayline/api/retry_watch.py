"""What the API knows of retrying consumer groups (docs/retry.md): per group, the retries
delivered back to it and its dead letters, by the topic each record was first read from,
counted from its retry and dead-letter topics (read committed, from their beginnings)."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import KafkaError

from delayline.client.retry import DEAD_REASON, SOURCE_TOPIC, header_value
from delayline.kafka.reader import message_headers, private_consumer

log = logging.getLogger(__name__)

MAX_SOURCES = 100
"""Source topics counted apart per group; any further ones are counted as ``(other)``:
the labels come from records, which must not mint unbounded series."""
OTHER = "(other)"
UNKNOWN = "(unknown)"


@dataclass
class GroupRetries:
    """One group's counts.

    Attributes:
        group: The consumer group.
        retry_topic: Its retry topic (``<group>-retry``).
        dead_letter_topic: Its dead-letter topic (``<group>-dlt``).
        retries: Retries delivered back to it, by source topic.
        dead_letters: Its dead letters, by (source topic, reason).
    """

    group: str
    retry_topic: str
    dead_letter_topic: str
    retries: Counter[str] = field(default_factory=Counter)
    dead_letters: Counter[tuple[str, str]] = field(default_factory=Counter)
    sources: set[str] = field(default_factory=set)
    """The source topics counted apart."""

    def copy(self) -> GroupRetries:
        return GroupRetries(
            self.group,
            self.retry_topic,
            self.dead_letter_topic,
            Counter(self.retries),
            Counter(self.dead_letters),
            set(self.sources),
        )


class RetryWatch:
    """Reads the retry and dead-letter topics of ``groups`` in a thread and counts. A
    topic made later is found within the metadata refresh (10 s)."""

    def __init__(self, bootstrap_servers: str, groups: tuple[str, ...]) -> None:
        self._groups = {g: GroupRetries(g, f"{g}-retry", f"{g}-dlt") for g in groups}
        self._by_topic: dict[str, tuple[GroupRetries, bool]] = {}
        for counts in self._groups.values():
            self._by_topic[counts.retry_topic] = (counts, False)
            self._by_topic[counts.dead_letter_topic] = (counts, True)
        self._bootstrap = bootstrap_servers
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delayline-retry-watch", daemon=True)

    def start(self) -> None:
        if self._groups:
            self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def snapshot(self) -> list[GroupRetries]:
        """Each group's counts so far (copies), in the order given."""
        with self._lock:
            return [counts.copy() for counts in self._groups.values()]

    def _run(self) -> None:
        consumer = private_consumer(
            self._bootstrap,
            "delayline-retry-watch",
            overrides={"topic.metadata.refresh.interval.ms": 10_000},
        )
        consumer.subscribe(list(self._by_topic))
        try:
            while not self._stop.is_set():
                messages = consumer.consume(1_000, 0.5)
                with self._lock:
                    for message in messages:
                        error = message.error()
                        if error is None:
                            self._count(message.topic() or "", message_headers(message))
                        elif error.code() != KafkaError._PARTITION_EOF:
                            log.debug("retry watch: %s", error.str())
        finally:
            consumer.close()

    def _count(self, topic: str, headers: tuple[tuple[str, bytes | None], ...]) -> None:
        counts, dead = self._by_topic[topic]
        source = (header_value(headers, SOURCE_TOPIC) or UNKNOWN.encode()).decode(
            "utf-8", "replace"
        )
        if source not in counts.sources:
            if len(counts.sources) >= MAX_SOURCES:
                source = OTHER
            else:
                counts.sources.add(source)
        if dead:
            reason = (header_value(headers, DEAD_REASON) or b"").decode("utf-8", "replace")
            counts.dead_letters[(source, reason or UNKNOWN)] += 1
        else:
            counts.retries[source] += 1
