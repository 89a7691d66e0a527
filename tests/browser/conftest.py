"""A real pipeline, the API and Debian's Chromium driven by Playwright.

Screenshots of every test land in ``test-artifacts/browser/``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.support import ARTIFACTS, RunningPipeline, running_stack

TOKEN = "browser-token"
CHROMIUM_ENV = "DELAYLINE_CHROMIUM"
SHOTS = ARTIFACTS / "browser"


@dataclass
class Stack:
    url: str
    pipeline: RunningPipeline


@pytest.fixture(scope="module")
def stack(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # With an envelope and a timer-request topic: the page shows every contract.
    with running_stack(kafka_bootstrap, tmp_path_factory, TOKEN, contracts=True) as (
        pipeline,
        url,
    ):
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


@pytest.fixture
def page(browser: Browser, stack: Stack, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1366, "height": 820}, base_url=stack.url)
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
        opened.screenshot(path=str(SHOTS / f"{request.node.name}.png"), full_page=True)
        context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"
    assert refused == [], f"the page broke its own Content-Security-Policy: {refused}"
