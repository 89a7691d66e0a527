"""Settings of the producer-side client. Frozen, with units in the names."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delayline.contract.topology import DEFAULT_BOOTSTRAP_SERVERS, DEFAULT_SCHEDULES_TOPIC
from delayline.errors import ConfigError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.properties import librdkafka_settings, read_properties


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Settings of the producer-side client.

    Attributes:
        bootstrap_servers: Kafka bootstrap list, ``host:port[,host:port]``.
        schedules_topic: Topic schedules and cancels are written to.
        metadata_timeout_ms: How long to wait for the cluster to answer a metadata
            request before reporting it unreachable.
        delivery_timeout_ms: Upper bound on a record's time from produce to ack.
        producer_overrides: Extra librdkafka settings, applied last.
        kafka: The librdkafka settings of a secured cluster (TLS, SASL...), as
            :meth:`from_properties` reads them from a Java client properties file; they
            come after those of the process's ``DELAYLINE_KAFKA_CONFIG``, if any.
    """

    bootstrap_servers: str = DEFAULT_BOOTSTRAP_SERVERS
    schedules_topic: str = DEFAULT_SCHEDULES_TOPIC
    metadata_timeout_ms: int = 10_000
    delivery_timeout_ms: int = 30_000
    producer_overrides: tuple[tuple[str, str], ...] = field(default=())
    kafka: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @classmethod
    def from_properties(cls, path: str | Path, **settings: Any) -> ClientConfig:
        """A config for the cluster a Java client properties file describes (the file
        ``delayline --kafka-config`` and Kafka's tools take): its ``bootstrap.servers``
        (unless ``bootstrap_servers`` is given) and its security settings.

        Args:
            path: The properties file.
            settings: Any other field of :class:`ClientConfig`.

        Raises:
            KafkaConfigError: the file cannot be read, or a key in it cannot be carried
                to librdkafka (its name and the reason).
        """
        props = read_properties(Path(path))
        translated = librdkafka_settings(props, str(path))
        if "bootstrap.servers" in props:
            settings.setdefault("bootstrap_servers", props["bootstrap.servers"])
        return cls(kafka=tuple(translated.items()), **settings)

    def producer_config(self) -> dict[str, Any]:
        """librdkafka settings: idempotent, fully acknowledged writes."""
        conf = kafka_client_config(
            self.bootstrap_servers,
            **{
                "enable.idempotence": True,
                # A mistyped schedules topic must be an error, not a new uncompacted topic.
                "allow.auto.create.topics": False,
                "acks": "all",
                "linger.ms": 5,
                "delivery.timeout.ms": self.delivery_timeout_ms,
                # Metadata errors surface fast instead of after librdkafka's long default.
                "socket.connection.setup.timeout.ms": min(self.metadata_timeout_ms, 30_000),
            },
        )
        conf.update(dict(self.kafka))
        conf.update(dict(self.producer_overrides))
        return conf


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff for :meth:`Scheduler.schedule_retry`.

    Retry ``n`` (1-based) waits ``min(initial_delay_ms * multiplier**(n-1), max_delay_ms)``,
    shortened by a random share of up to ``jitter`` (never lengthened: ``max_delay_ms``
    stays the longest wait).

    Attributes:
        initial_delay_ms: Delay of the first retry.
        max_delay_ms: Ceiling of any single delay.
        multiplier: Growth factor between attempts.
        max_attempts: Highest retry number allowed: a record is tried at most
            ``1 + max_attempts`` times.
        jitter: 0 to 1: the largest share of a delay taken off at random, so that
            records that failed together are not all retried together.
    """

    initial_delay_ms: int = 5_000
    max_delay_ms: int = 3_600_000
    multiplier: float = 2.0
    max_attempts: int = 50
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.initial_delay_ms < 0 or self.max_delay_ms < self.initial_delay_ms:
            raise ConfigError("need 0 <= initial_delay_ms <= max_delay_ms")
        if self.multiplier < 1 or self.max_attempts < 1:
            raise ConfigError("need multiplier >= 1 and max_attempts >= 1")
        if not 0 <= self.jitter <= 1:
            raise ConfigError(f"jitter is a share from 0 to 1, got {self.jitter}")

    def jittered_ms(self, attempt: int, draw: float) -> int:
        """Delay before retry ``attempt`` with its jitter: ``draw`` (0 to 1, a random
        number the caller draws) of :attr:`jitter` taken off :meth:`delay_ms`."""
        return round(self.delay_ms(attempt) * (1 - self.jitter * draw))

    def delay_ms(self, attempt: int) -> int:
        """Delay before retry number ``attempt`` (1-based)."""
        if attempt < 1:
            raise ConfigError(f"attempt numbers start at 1, got {attempt}")
        delay = float(self.initial_delay_ms)
        for _ in range(attempt - 1):
            delay *= self.multiplier
            if delay >= self.max_delay_ms:
                return self.max_delay_ms
        return min(int(delay), self.max_delay_ms)
