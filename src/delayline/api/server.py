"""Run the API with uvicorn: in the foreground, or in a thread for tests and the demo."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import uvicorn

from delayline.api.app import create_app
from delayline.api.config import ApiConfig
from delayline.errors import DelaylineError


class ApiServer:
    """The API on a real socket, in a background thread.

    Args:
        config: API settings; port 0 picks a free port.
    """

    def __init__(self, config: ApiConfig) -> None:
        self.config = config
        self._server = uvicorn.Server(
            uvicorn.Config(
                create_app(config),
                host=config.host,
                port=config.port,
                log_level="warning",
                lifespan="on",
            )
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8080``."""
        sockets = [s for server in self._server.servers for s in server.sockets]
        host, port = sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self, timeout_s: float = 30.0) -> str:
        """Start serving; return the base URL once the socket listens.

        Raises:
            DelaylineError: the server did not start in time.
        """
        self._thread = threading.Thread(target=self._server.run, name="delayline-api", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise DelaylineError("the API server did not start (port in use?)")
            time.sleep(0.05)
        return self.url

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)


def serve(config: ApiConfig, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve in the foreground until SIGINT or SIGTERM (uvicorn stops gracefully)."""
    server = ApiServer(config)

    def announce() -> None:
        while not server._server.started:
            if server._server.should_exit:
                return
            time.sleep(0.05)
        if on_ready is not None:
            on_ready(server.url)

    threading.Thread(target=announce, daemon=True).start()
    server._server.run()
    if not server._server.started:
        raise DelaylineError(f"the API could not listen on {config.host}:{config.port}")
