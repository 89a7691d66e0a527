"""Schemathesis drives the API from its own OpenAPI: no input may cause a 5xx, and
every answer must match the documented schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from delayline.api.config import ApiConfig
from delayline.api.server import ApiServer
from delayline.contract.topology import Topology
from delayline.dev.testing import create_topic, unique_topic

TOKEN = "schema-token"


@pytest.fixture(scope="module")
def api_schema(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[schemathesis.BaseSchema]:
    schedules = create_topic(
        kafka_bootstrap, unique_topic("sched"), partitions=2, config={"cleanup.policy": "compact"}
    )
    server = ApiServer(
        ApiConfig(
            topology=Topology(
                kafka_bootstrap,
                (schedules,),
                history_topic=None,
                dead_letter_topic=create_topic(kafka_bootstrap, unique_topic("dlq")),
            ),
            catalog_path=Path(tmp_path_factory.mktemp("catalog")) / "catalog.db",
            port=0,
            token=TOKEN,
        )
    )
    url = server.start()
    try:
        yield schemathesis.openapi.from_url(f"{url}/openapi.json")
    finally:
        server.stop()


# schemathesis' pytest plugin (from_fixture) does not run under pytest 9: drive each
# operation's strategy with plain hypothesis instead.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(schemathesis.GenerationMode))
def test_no_input_causes_a_server_error(
    api_schema: schemathesis.BaseSchema, mode: schemathesis.GenerationMode
) -> None:
    """Positive cases follow the schema; negative ones break it on purpose."""
    operations: list[schemathesis.APIOperation[Any, Any, Any, Any]] = []
    for result in api_schema.get_all_operations():
        assert isinstance(result, Ok), result.err()
        operations.append(result.ok())
    assert len(operations) >= 10  # every route is documented, not an empty schema
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            database=None,
        )
        def exercise(case: schemathesis.Case[Any]) -> None:
            case.call_and_validate(
                headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS, timeout=30
            )

        try:
            exercise()
        except Unsatisfiable:
            # An operation without inputs (``/healthz``) has nothing to get wrong.
            assert mode is schemathesis.GenerationMode.NEGATIVE
