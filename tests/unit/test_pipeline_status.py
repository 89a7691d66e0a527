"""The API's view of a pipeline (``/info``): stalled or running, from its ``/progress``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from delayline.api.pipeline_status import pipeline_status
from tests.served import serve_json

NOW = 10_000_000
MINUTE = 60_000


@pytest.fixture
def served() -> Iterator[tuple[str, dict[str, Any]]]:
    """A ``/progress`` answering whatever the test puts in the dict."""
    answer: dict[str, Any] = {}
    with serve_json(lambda _path: answer) as url:
        yield url, answer


def status(url: str) -> str:
    return str(pipeline_status(url, NOW)["status"])


def test_an_idle_pipeline_is_running_while_it_owes_no_batch(
    served: tuple[str, dict[str, Any]],
) -> None:
    url, answer = served
    waker: dict[str, int | None] = {
        "wakes": 9,
        "margin_ms": 2_000,
        "unread": 0,
        "heartbeat_ms": 5 * MINUTE,
    }
    answer.update(last_batch={"finished_ms": NOW - 4 * MINUTE}, waker=waker)
    waker["waiting_since_ms"] = None
    assert status(url) == "running"
    waker["waiting_since_ms"] = NOW - MINUTE + 1
    assert status(url) == "running"
    waker["waiting_since_ms"] = NOW - MINUTE - 1
    assert status(url) == "stalled"
    waker["waiting_since_ms"] = None
    answer["last_batch"] = {"finished_ms": NOW - 6 * MINUTE - 1}  # past the backstop
    assert status(url) == "stalled"


def test_without_a_wakers_answer_a_minute_without_a_batch_is_stalled(
    served: tuple[str, dict[str, Any]],
) -> None:
    url, answer = served
    answer["last_batch"] = {"finished_ms": NOW - MINUTE}
    assert status(url) == "running"
    answer["last_batch"] = {"finished_ms": NOW - MINUTE - 1}
    assert status(url) == "stalled"
    answer["last_batch"] = None  # no batch yet
    assert status(url) == "stalled"


def test_no_url_or_no_answer() -> None:
    assert pipeline_status(None, NOW)["status"] == "not configured"
    assert pipeline_status("http://127.0.0.1:9", NOW, timeout_s=0.5)["status"] == "unreachable"
