"""Run the API with uvicorn: in the foreground, or in a thread for tests and the demo."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import uvicorn

from delayline.api.app import create_app
from delayline.api.config import ApiConfig
from delayline.errors import ConfigError, DelaylineError


class ApiServer:
    """The API on a real socket.

    The socket is bound here, before the app starts: a port in use is an error at once,
    and no catalog follower is started for a server that will never serve.

    Args:
        config: API settings; port 0 picks a free port.
        any_port_if_taken: Listen on a free port when ``config.port`` is taken.

    Raises:
        ConfigError: the address cannot be bound.
    """

    def __init__(self, config: ApiConfig, *, any_port_if_taken: bool = False) -> None:
        self.config = config
        try:
            self._socket = _bind(config.host, config.port)
        except OSError as exc:
            if not any_port_if_taken:
                raise ConfigError(f"cannot listen on {config.host}:{config.port}: {exc}") from exc
            self._socket = _bind(config.host, 0)
        # No log configuration of uvicorn's own: its lines go where, and as, the process's
        # go (``--log-format``).
        self._server = uvicorn.Server(
            uvicorn.Config(create_app(config), log_level="warning", log_config=None, lifespan="on")
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8080``."""
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self, timeout_s: float = 30.0) -> str:
        """Serve in a background thread; return the base URL once the app has started.

        Raises:
            DelaylineError: the app did not start in time.
        """
        self._thread = threading.Thread(target=self._run, name="delayline-api", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise DelaylineError("the API did not start; see the log above")
            time.sleep(0.05)
        return self.url

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)

    def serve(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve in this thread until SIGINT or SIGTERM (uvicorn stops gracefully)."""

        def announce() -> None:
            while not self._server.started and not self._server.should_exit:
                time.sleep(0.05)
            if self._server.started and on_ready is not None:
                on_ready(self.url)

        threading.Thread(target=announce, daemon=True).start()
        self._run()

    def _run(self) -> None:
        self._server.run(sockets=[self._socket])


def serve(config: ApiConfig, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve ``config`` in the foreground until SIGINT or SIGTERM."""
    ApiServer(config).serve(on_ready)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock
