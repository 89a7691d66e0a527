"""Request errors of delayline's small HTTP servers go to the log, never to stderr: a
client gone before its answer at debug, anything else as a warning."""

from __future__ import annotations

import contextlib
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from threading import Thread
from typing import Any

import pytest

from delayline.core.http_server import LoggingHTTPServer


class Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        raise BrokenPipeError(32, "Broken pipe") if self.path == "/gone" else ValueError("bug")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = LoggingHTTPServer(("127.0.0.1", 0), Failing)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _get(url: str) -> None:
    with contextlib.suppress(urllib.error.URLError, ConnectionError):  # no answer came
        urllib.request.urlopen(url, timeout=5).close()


def test_request_errors_are_logged_not_printed(
    url: str, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="delayline.core.http_server")
    _get(f"{url}/gone")
    _get(f"{url}/bug")
    assert capfd.readouterr().err == ""  # the standard library printed a traceback here
    levels = {r.getMessage().split(" ")[0]: r.levelno for r in caplog.records}
    gone = [r for r in caplog.records if "went away" in r.getMessage()]
    failed = [r for r in caplog.records if "failed" in r.getMessage()]
    assert [r.levelno for r in gone] == [logging.DEBUG], levels
    assert [r.levelno for r in failed] == [logging.WARNING], levels
    assert failed[0].exc_info is not None
