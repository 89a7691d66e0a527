"""Helpers for tests of delayline and of applications that use it.

One real broker per test session, fresh topic names per test:

    with session_broker(tmp_dir) as bootstrap:
        topic = unique_topic("orders")
        create_topic(bootstrap, topic, partitions=3)
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.infra.broker_security import SASL_SSL
from delayline.infra.ports import bindable, free_port
from delayline.infra.redis_server import LocalRedis, RedisServerConfig
from delayline.kafka.topics import create_topic

TEST_BOOTSTRAP_ENV = "DELAYLINE_TEST_BOOTSTRAP"

__all__ = ["TEST_BOOTSTRAP_ENV", "create_topic", "session_broker", "session_redis", "unique_topic"]


@contextmanager
def session_broker(data_dir: Path, *, acls: bool = False) -> Iterator[str]:
    """Yield a bootstrap address: ``$DELAYLINE_TEST_BOOTSTRAP`` if set, else a fresh
    local broker on free ports in ``data_dir``, stopped afterwards. With ``acls`` that
    broker enforces ACLs (see :attr:`BrokerConfig.acls`): none exist until a test adds one."""
    external = os.environ.get(TEST_BOOTSTRAP_ENV)
    if external:
        yield external
        return
    port = free_port()
    controller = free_port()
    broker = LocalBroker(
        BrokerConfig(data_dir=data_dir, port=port, controller_port=controller, acls=acls)
    )
    broker.start()
    try:
        yield broker.config.bootstrap_servers
    finally:
        broker.stop()


@contextmanager
def secured_broker(data_dir: Path, oauth_jwks_url: str | None = None) -> Iterator[LocalBroker]:
    """A fresh local broker with ``--security sasl-ssl`` (TLS, SCRAM users, ACLs denying
    what none allows; OAUTHBEARER tokens ``oauth_jwks_url`` verifies) on free ports in
    ``data_dir``, stopped afterwards."""
    port = free_port()
    while not all(bindable(port + i) for i in range(1, 4)):
        port = free_port()
    config = BrokerConfig(data_dir=data_dir, port=port, security=SASL_SSL,
                          oauth_jwks_url=oauth_jwks_url)  # fmt: skip
    broker = LocalBroker(config)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@contextmanager
def session_redis(data_dir: Path) -> Iterator[str]:
    """Yield the URL of a fresh local Redis (``appendfsync always``) on a free port in
    ``data_dir``, stopped afterwards."""

    server = LocalRedis(RedisServerConfig(data_dir=data_dir, port=free_port()))
    server.start()
    try:
        yield server.config.url
    finally:
        server.stop()


def unique_topic(prefix: str = "test") -> str:
    """A topic name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
