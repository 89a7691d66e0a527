"""Settings every librdkafka client delayline creates starts from.

They include the client properties file of the process (``--kafka-config``, or the
environment variable :data:`delayline.kafka.properties.KAFKA_CONFIG_ENV` that the
command line sets, so Spark's Python workers and every thread read the same file):
TLS, SASL and any other client property, translated once per process
(:mod:`delayline.kafka.properties`).
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Any

from delayline.kafka.properties import (
    KAFKA_CONFIG_ENV,
    KafkaConfigError,
    librdkafka_settings,
    read_properties,
)

RDKAFKA_LOGGER = logging.getLogger("delayline.rdkafka")
"""librdkafka's own log lines (connection refused, retries) go here, not to stderr.

It is quiet unless raised to DEBUG (``delayline -v``): delayline reports the
errors that matter itself, in one line, with what to do.
"""
RDKAFKA_LOGGER.setLevel(logging.CRITICAL)


def kafka_client_config(bootstrap_servers: str, **extra: Any) -> dict[str, Any]:
    """Base settings for any librdkafka client delayline creates: the bootstrap list,
    the process's client properties (:func:`client_settings`), then ``extra``."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "logger": RDKAFKA_LOGGER,
        **client_settings(),
        **extra,
    }


def client_settings() -> dict[str, str]:
    """librdkafka's settings from the client properties file the environment names
    (none when it names none).

    Raises:
        KafkaConfigError: the file cannot be read or carried (see :func:`use_client_properties`).
    """
    path = os.environ.get(KAFKA_CONFIG_ENV, "").strip()
    return dict(_settings(path)) if path else {}


def client_properties() -> dict[str, str]:
    """The Java client properties of the file the environment names, as written (for
    Spark's Kafka source); none when it names none."""
    path = os.environ.get(KAFKA_CONFIG_ENV, "").strip()
    return read_properties(Path(path)) if path else {}


def use_client_properties(path: Path) -> dict[str, str]:
    """Make ``path`` the client properties of this process and its children, once it
    is known to carry: read, translated, and every key known to librdkafka.

    Returns:
        The librdkafka settings it gives.

    Raises:
        KafkaConfigError: it cannot be read, a key cannot be carried, or librdkafka
            refuses a key (each named, with the reason).
    """
    resolved = str(path.expanduser().resolve())
    settings = dict(_settings(resolved))
    check(settings, resolved)
    os.environ[KAFKA_CONFIG_ENV] = resolved
    return settings


def check(settings: dict[str, str], source: str) -> None:
    """Raise :class:`KafkaConfigError` naming the first key librdkafka refuses."""
    from confluent_kafka import KafkaException, Producer  # noqa: PLC0415 - heavy

    try:
        Producer({**settings, "bootstrap.servers": "127.0.0.1:9", "logger": RDKAFKA_LOGGER})
    except KafkaException as exc:
        raise KafkaConfigError(
            f"the Kafka client properties {source} cannot be carried to delayline's "
            f"librdkafka clients: {exc.args[0] if exc.args else exc}"
        ) from None


@functools.cache
def _settings(path: str) -> tuple[tuple[str, str], ...]:
    props = read_properties(Path(path))
    return tuple(librdkafka_settings(props, path).items())


__all__ = [
    "RDKAFKA_LOGGER",
    "KafkaConfigError",
    "check",
    "client_properties",
    "client_settings",
    "kafka_client_config",
    "use_client_properties",
]
