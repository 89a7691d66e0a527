"""delayline's one HTTP client against a small local server: statuses, JSON or not, and
the failures that mean nobody answered."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from delayline.core.http import get_json
from delayline.errors import ConfigError, HttpUnavailableError


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/cut"):  # headers promise more than comes
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b'{"a"')
            return
        body = {"path": self.path, "auth": self.headers.get("Authorization")}
        data = b"not json" if self.path.startswith("/text") else json.dumps(body).encode()
        self.send_response(404 if self.path.startswith("/missing") else 200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_json_statuses_params_and_headers(url: str) -> None:
    status, body = get_json(f"{url}/a", params={"x": 1, "y": "b c"}, headers={"Authorization": "t"})
    assert status == 200
    assert body == {"path": "/a?x=1&y=b+c", "auth": "t"}
    assert get_json(f"{url}/missing")[0] == 404
    assert get_json(f"{url}/text") == (200, None)


def test_nobody_answering_is_retriable(url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        closed = taken.getsockname()[1]
    with pytest.raises(HttpUnavailableError) as refused:
        get_json(f"http://127.0.0.1:{closed}/", timeout_s=2)
    assert refused.value.retriable
    with pytest.raises(HttpUnavailableError):
        get_json(f"{url}/cut", timeout_s=2)


def test_only_http_urls() -> None:
    with pytest.raises(ConfigError, match="not an http"):
        get_json("file:///etc/passwd")
