"""A real pipeline, the API and Debian's Chromium driven by Playwright.

Screenshots of every test land in ``test-artifacts/browser/``. Tests of what the page
shows of the API alone (and of a pipeline's ``/progress``, served canned) use
``canned_page``: the API over fresh topics, no pipeline.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.served import serve_json
from tests.support import ARTIFACTS, RunningPipeline, api_over, make_topics, running_api

TOKEN = "browser-token"
CHROMIUM_ENV = "DELAYLINE_CHROMIUM"
SHOTS = ARTIFACTS / "browser"


@dataclass
class Stack:
    url: str
    pipeline: RunningPipeline


@pytest.fixture(scope="module")
def stack(pipeline: RunningPipeline, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # The shared pipeline has an envelope and a timer-request topic: the page shows
    # every contract.
    with running_api(pipeline, tmp_path_factory, TOKEN) as url:
        yield Stack(url, pipeline)


def chromium_path() -> str:
    path = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        raise RuntimeError(
            f"no Chromium at {path}: install Debian's 'chromium' package or set {CHROMIUM_ENV}"
        )
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(), args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Progress:
    """A pipeline's metrics server answering ``/progress`` with ``answer`` (its last
    batch always just finished, so the pipeline reads as running)."""

    url: str = ""
    answer: dict[str, Any] = field(default_factory=dict)


@dataclass
class CannedStack:
    url: str
    progress: Progress


@contextmanager
def canned_progress() -> Iterator[Progress]:
    progress = Progress()

    def answer(path: str) -> dict[str, Any] | None:
        if path != "/progress":
            return None
        return {"last_batch": {"finished_ms": int(time.time() * 1000)}, **progress.answer}

    with serve_json(answer) as url:
        progress.url = url
        yield progress


@pytest.fixture(scope="module")
def canned_stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CannedStack]:
    """The API over fresh topics, its pipeline URL a canned ``/progress``; no pipeline."""
    topics = make_topics(kafka_bootstrap)
    catalog = tmp_path_factory.mktemp("catalog") / "catalog.db"
    with (
        canned_progress() as progress,
        api_over(kafka_bootstrap, topics, catalog, TOKEN, progress.url) as url,
    ):
        yield CannedStack(url, progress)


@pytest.fixture
def page(browser: Browser, stack: Stack, request: pytest.FixtureRequest) -> Iterator[Page]:
    with opened_page(browser, stack.url, request.node.name) as opened:
        yield opened


@pytest.fixture
def canned_page(
    browser: Browser, canned_stack: CannedStack, request: pytest.FixtureRequest
) -> Iterator[Page]:
    with opened_page(browser, canned_stack.url, request.node.name) as opened:
        yield opened


@contextmanager
def opened_page(browser: Browser, url: str, name: str) -> Iterator[Page]:
    """A page of the API at ``url``; fails the test on a JavaScript error or a breach of
    the page's Content-Security-Policy, and leaves a screenshot named ``name``."""
    context = browser.new_context(viewport={"width": 1366, "height": 820}, base_url=url)
    opened = context.new_page()
    errors: list[str] = []
    refused: list[str] = []  # what the page's Content-Security-Policy blocked
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.on(
        "console",
        lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None,
    )
    try:
        yield opened
    finally:
        SHOTS.mkdir(parents=True, exist_ok=True)
        opened.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
        context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"
    assert refused == [], f"the page broke its own Content-Security-Policy: {refused}"
