"""One real pipeline per module, on fresh topics, against the session's broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import RunningPipeline, running_pipeline


@pytest.fixture(scope="module")
def pipeline(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningPipeline]:
    """A pipeline with a 1 h maximum lateness over two schedules topics."""
    with running_pipeline(kafka_bootstrap, tmp_path_factory.mktemp("checkpoint")) as running:
        yield running
