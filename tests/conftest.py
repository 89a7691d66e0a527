"""Shared pytest configuration: the markers each test folder implies, and the
integration broker, so that every test directory that needs Kafka shares one broker
per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from delayline.dev.testing import secured_broker as start_secured_broker
from delayline.dev.testing import session_broker, session_redis, unique_topic
from delayline.pipeline.config import JIT_OPTIONS

if TYPE_CHECKING:
    from tests.support import RunningPipeline

TESTS = Path(__file__).parent

# The one place that maps a test folder to its markers (registered in pyproject.toml):
# `-m "not slow"`, `-m integration`, `-m "not browser"` select by folder through it.
FOLDER_MARKERS: dict[str, tuple[str, ...]] = {
    "unit": (),
    "integration": ("integration",),
    "e2e": ("e2e", "slow"),
    "browser": ("browser", "slow"),
}


def pytest_configure(config: pytest.Config) -> None:
    """Pipelines started by the tests (``delayline run`` reads the variable) keep the JIT
    to its first tier: each lives a minute or two, where the optimising compiler costs
    more CPU than it saves (a fresh pipeline's trickle: 43% of a core against 31%), and
    the suite runs dozens on two cores. What they test does not depend on the JIT; the
    product's default (the full JIT) runs in ``tests/e2e/test_bench.py`` and in the
    README's quickstart (``tests/e2e/test_readme.py`` runs it without delayline's
    variables, as a newcomer would)."""
    os.environ.setdefault("DELAYLINE_JAVA_OPTIONS", JIT_OPTIONS["c1"])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test by the folder it lives in (a new folder must join the table)."""
    for item in items:
        parts = item.path.relative_to(TESTS).parts if item.path.is_relative_to(TESTS) else ()
        if len(parts) < 2:
            continue
        if parts[0] not in FOLDER_MARKERS:
            raise pytest.UsageError(
                f"tests/{parts[0]} has no entry in FOLDER_MARKERS (tests/conftest.py)"
            )
        for marker in FOLDER_MARKERS[parts[0]]:
            item.add_marker(marker)


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of the session's real broker (or $DELAYLINE_TEST_BOOTSTRAP)."""
    # ACLs enforced so a test can deny a write; nothing is denied until one does.
    with session_broker(tmp_path_factory.mktemp("broker"), acls=True) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the session's real Redis server (Debian's redis-server, AOF always)."""
    with session_redis(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="session")
def pipeline(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningPipeline]:
    """The session's one pipeline, shared by the e2e and browser modules that need no
    flags of their own (:func:`tests.support.shared_pipeline`): a pipeline start costs
    25-30 s here (about 50 on a Spark cluster)."""
    from tests.support import shared_pipeline  # noqa: PLC0415 - the e2e and browser tests'

    with shared_pipeline(kafka_bootstrap, tmp_path_factory) as running:
        yield running


@pytest.fixture
def topic_name() -> str:
    """A fresh topic name for this test."""
    return unique_topic()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local Spark session (with the connector and the JVM hold) for the test session.

    Unlike the suite's pipelines it keeps the full JIT: it lives the whole session and
    runs over a hundred hold-rule batches, which took 235 s with it against 276 s with
    the first tier alone (2 cores, measured one after the other)."""
    from delayline.pipeline.config import PipelineConfig  # noqa: PLC0415 - starts a JVM
    from delayline.pipeline.session import build_session  # noqa: PLC0415

    checkpoint = tmp_path_factory.mktemp("spark") / "checkpoint"
    session = build_session(
        PipelineConfig(
            checkpoint_dir=checkpoint, shuffle_partitions=2, java_options=JIT_OPTIONS["full"]
        )
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def oidc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An OpenID provider issuing OAUTHBEARER tokens to the clients a test registers."""
    from delayline.dev.oidc import OidcProvider  # noqa: PLC0415

    with OidcProvider(tmp_path_factory.mktemp("oidc")) as provider:
        yield provider


@pytest.fixture(scope="session")
def secured_broker(tmp_path_factory: pytest.TempPathFactory, oidc: Any) -> Iterator[Any]:
    """A broker as production clusters run: SASL_SSL with SCRAM users ``admin`` (super
    user) and ``delayline``, OAUTHBEARER tokens from ``oidc``, mutual TLS, and ACLs
    denying what none allows."""
    data_dir = tmp_path_factory.mktemp("secured")
    with start_secured_broker(data_dir, oauth_jwks_url=oidc.jwks_url) as broker:
        yield broker
