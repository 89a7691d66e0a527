"""The API's ``window_ms``: refused out of range with 422 and its reason, and shown on a
header-contract schedule (list and detail) as its headers state it. No Kafka: the app
answers a body it refuses before anything is written."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from pydantic import ValidationError

from delayline.api.app import create_app
from delayline.api.config import ApiConfig
from delayline.api.schemas import ScheduleCreate, full, summary
from delayline.catalog import Pending
from delayline.contract.contracts import ENVELOPE, HEADER, TIMER_REQUEST
from delayline.contract.pacing import MAX_WINDOW_MS

TOKEN = "t"
BODY = {"target_topic": "orders", "delay_ms": 60_000}


def pending(window_ms: int | None) -> Pending:
    return Pending("a", "s", 0, 7, 1_000, "orders", None, 0, 0, window_ms=window_ms)


@pytest.mark.parametrize("window_ms", [1, 1500, MAX_WINDOW_MS])
def test_a_window_within_an_hour_is_taken(window_ms: int) -> None:
    assert ScheduleCreate.model_validate({**BODY, "window_ms": window_ms}).window_ms == window_ms
    assert ScheduleCreate.model_validate(BODY).window_ms is None


@pytest.mark.parametrize("window_ms", [0, -1, MAX_WINDOW_MS + 1, "15m", 1.5])
def test_a_window_out_of_range_or_not_milliseconds_is_refused(window_ms: object) -> None:
    with pytest.raises(ValidationError) as refused:
        ScheduleCreate.model_validate({**BODY, "window_ms": window_ms})
    assert [e["loc"] for e in refused.value.errors()] == [("window_ms",)]


@pytest.mark.parametrize(
    ("window_ms", "says"),
    [
        (0, "window_ms: Input should be greater than or equal to 1"),
        (MAX_WINDOW_MS + 1, f"window_ms: Input should be less than or equal to {MAX_WINDOW_MS}"),
    ],
)
@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_the_api_answers_422_with_the_reason(window_ms: int, says: str, method: str) -> None:
    app = create_app(ApiConfig(token=TOKEN))  # no lifespan: no catalog, no Kafka
    path = "/schedules" if method == "POST" else "/schedules/a"

    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            return await client.request(
                method,
                path,
                json={**BODY, "window_ms": window_ms},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )

    answer = asyncio.run(ask())
    assert answer.status_code == 422
    assert answer.json() == {"detail": says}


def test_the_openapi_schema_states_the_range() -> None:
    schema = create_app(ApiConfig()).openapi()["components"]["schemas"]
    for name in ("ScheduleCreate", "ScheduleIn"):
        field = schema[name]["properties"]["window_ms"]
        assert field["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": MAX_WINDOW_MS}
        assert "never early" in field["description"]
    assert "window_ms" in schema["ScheduleSummary"]["properties"]


def test_list_and_detail_show_the_window_of_a_header_contract_schedule() -> None:
    assert summary(pending(90_000), HEADER).window_ms == 90_000
    assert full(pending(90_000), HEADER).window_ms == 90_000
    assert summary(pending(None), HEADER).window_ms is None
    # Only the header contract reads the header: an envelope's is only delivered.
    for contract in (ENVELOPE, TIMER_REQUEST):
        assert summary(pending(90_000), contract).window_ms is None
        assert full(pending(90_000), contract).window_ms is None
