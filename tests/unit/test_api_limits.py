"""What the API refuses before reading (an oversized body) and what every answer carries
(security headers, no CORS), on the ASGI level and on the real app without Kafka."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

from delayline.api.app import create_app
from delayline.api.config import ApiConfig
from delayline.api.limits import UI_CSP, BodyLimit, SecurityHeaders
from delayline.contract.topology import Topology

LIMIT = 1_000


def call(app: FastAPI, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request to ``app`` in this process (no server, no lifespan)."""

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            return await client.request(method, url, **kwargs)

    return asyncio.run(send())


@pytest.fixture
def echo() -> tuple[FastAPI, list[int]]:
    """An app that reads the whole body and says how long it was; ``reads`` records each
    body it got."""
    app = FastAPI()
    reads: list[int] = []

    @app.post("/echo")
    async def echo_body(request: Request) -> PlainTextResponse:
        body = await request.body()
        reads.append(len(body))
        return PlainTextResponse(str(len(body)), headers={"x-frame-options": "SAMEORIGIN"})

    @app.get("/ui/page")
    def page() -> PlainTextResponse:
        return PlainTextResponse("ui")

    app.add_middleware(SecurityHeaders)
    app.add_middleware(BodyLimit, max_bytes=LIMIT)
    return app, reads


def test_a_declared_oversized_body_is_refused_unread(echo: tuple[FastAPI, list[int]]) -> None:
    app, reads = echo
    answer = call(app, "POST", "/echo", content=b"x" * (LIMIT + 1))
    assert answer.status_code == 413
    assert "limit is 1,000 bytes" in answer.json()["detail"]
    assert "--max-body-bytes" in answer.json()["detail"]
    assert reads == []  # the endpoint never ran
    assert call(app, "POST", "/echo", content=b"x" * LIMIT).text == str(LIMIT)
    assert reads == [LIMIT]


def test_a_chunked_body_is_cut_off_once_past_the_limit(echo: tuple[FastAPI, list[int]]) -> None:
    app, reads = echo

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: sent chunked
        for _ in range(10):
            yield b"y" * 300

    answer = call(app, "POST", "/echo", content=chunks())
    assert "content-length" not in answer.request.headers
    assert answer.status_code == 413
    assert reads == []


def test_security_headers_everywhere_and_the_policy_on_the_ui(
    echo: tuple[FastAPI, list[int]],
) -> None:
    app, _ = echo
    api = call(app, "POST", "/echo", content=b"1")
    ui = call(app, "GET", "/ui/page")
    for answer in (api, ui):
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
    assert "content-security-policy" not in api.headers
    assert api.headers["x-frame-options"] == "SAMEORIGIN"  # the app's own is kept
    assert ui.headers["content-security-policy"] == UI_CSP
    assert ui.headers["x-frame-options"] == "DENY"


@pytest.fixture
def app(tmp_path: Path) -> FastAPI:
    """The real API (its lifespan, which needs Kafka, is not started)."""
    return create_app(
        ApiConfig(
            topology=Topology("127.0.0.1:1", ("nowhere",)),
            catalog_path=tmp_path / "c.db",
            token="s3cret-token",
        )
    )


def test_no_cors_by_default(app: FastAPI) -> None:
    evil = {"Origin": "https://evil.example"}
    preflight = call(
        app,
        "OPTIONS",
        "/schedules",
        headers={**evil, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization"},
    )  # fmt: skip
    assert preflight.status_code != 200
    ui = call(app, "GET", "/ui/", headers=evil)
    assert ui.status_code == 200
    for answer in (preflight, ui):
        assert not any(h.startswith("access-control-") for h in answer.headers)
    assert "script-src 'self'" in ui.headers["content-security-policy"]


def test_the_token_never_shows_in_the_settings(app: FastAPI) -> None:
    config = app.state.config
    assert "s3cret-token" not in repr(config)
    assert "s3cret-token" not in str(config)


def test_a_chunked_body_past_the_limit_is_413_on_the_real_app(app: FastAPI) -> None:
    """FastAPI reads a route's body itself and answers 400 to a read that fails: the
    limit must say 413 through it."""

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(3000):
            yield b"z" * 1000

    answer = call(app, "POST", "/schedules", content=chunks(),
                  headers={"Authorization": "Bearer s3cret-token"})  # fmt: skip
    assert answer.status_code == 413, answer.text
    assert "--max-body-bytes" in answer.json()["detail"]
