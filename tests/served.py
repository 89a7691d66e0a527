"""A small HTTP server answering JSON, for tests of what reads a metrics server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str], dict[str, Any] | None]
"""The JSON body for a GET of a path, or ``None``: 404."""


@contextmanager
def serve_json(answer: Answer) -> Iterator[str]:
    """Serve ``answer`` on a free port of 127.0.0.1 until the block ends; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body_of = answer(self.path)
            if body_of is None:
                self.send_error(404)
                return
            body = json.dumps(body_of).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name="served-json", daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
