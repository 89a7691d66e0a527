"""One real pipeline for the modules that need no flags of their own, against the
session's broker: a pipeline start costs about 25 s here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import RunningPipeline, running_pipeline

ALLOWED = "(?!forbidden-).*"
"""The shared pipeline delivers to any topic but those starting with ``forbidden-``
(``tests/e2e/test_refusals.py`` writes to those)."""


@pytest.fixture(scope="session")
def pipeline(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningPipeline]:
    """A pipeline with a 1 h maximum lateness over two schedules topics, shared by the
    session's modules: each test writes to targets and ids of its own."""
    checkpoint = tmp_path_factory.mktemp("checkpoint")
    with running_pipeline(
        kafka_bootstrap, checkpoint, "--allowed-target-topics", ALLOWED
    ) as running:
        yield running
