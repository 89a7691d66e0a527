"""Helpers for tests of delayline and of applications that use it.

One real broker per test session, fresh topic names per test:

    with session_broker(tmp_dir) as bootstrap:
        topic = unique_topic("orders")
        create_topic(bootstrap, topic, partitions=3)
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from delayline.config import kafka_client_config
from delayline.infra.broker import BrokerConfig, LocalBroker, free_port

TEST_BOOTSTRAP_ENV = "DELAYLINE_TEST_BOOTSTRAP"


@contextmanager
def session_broker(data_dir: Path) -> Iterator[str]:
    """Yield a bootstrap address: ``$DELAYLINE_TEST_BOOTSTRAP`` if set, else a fresh
    local broker on free ports in ``data_dir``, stopped afterwards."""
    external = os.environ.get(TEST_BOOTSTRAP_ENV)
    if external:
        yield external
        return
    port = free_port()
    controller = free_port()
    broker = LocalBroker(BrokerConfig(data_dir=data_dir, port=port, controller_port=controller))
    broker.start()
    try:
        yield broker.config.bootstrap_servers
    finally:
        broker.stop()


def unique_topic(prefix: str = "test") -> str:
    """A topic name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create_topic(
    bootstrap_servers: str,
    name: str,
    *,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> str:
    """Create ``name`` and wait until it exists; return the name."""
    admin = AdminClient(kafka_client_config(bootstrap_servers))
    topic = NewTopic(
        name, num_partitions=partitions, replication_factor=1, config=dict(config or {})
    )
    admin.create_topics([topic], operation_timeout=timeout_s)[name].result(timeout=timeout_s)
    return name
