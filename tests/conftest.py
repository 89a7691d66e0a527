"""Shared pytest configuration: the integration broker lives here so that every
test directory that needs Kafka shares one broker per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from delayline.dev.testing import session_broker, unique_topic


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of the session's real broker (or $DELAYLINE_TEST_BOOTSTRAP)."""
    with session_broker(tmp_path_factory.mktemp("broker")) as bootstrap:
        yield bootstrap


@pytest.fixture
def topic_name() -> str:
    """A fresh topic name for this test."""
    return unique_topic()
