"""The HTTP server of delayline's small servers (the metrics of a pipeline, a committer
and the oscillator): a thread per request, and request errors in the log, not on stderr.

The standard library's server prints a traceback on stderr for every request that
failed, a client gone before its answer among them (a scraper that timed out while the
process was paused: a broken pipe, normal). Here those go to the debug log and any other
failure to the warning log, through ``logging``, so a JSON log stays JSON lines.
"""

from __future__ import annotations

import logging
import sys
from http.server import ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)

CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)
"""Errors of a request whose client went away before its answer."""


class LoggingHTTPServer(ThreadingHTTPServer):
    """:class:`ThreadingHTTPServer` whose request errors are logged (see the module)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, CLIENT_GONE):
            log.debug("client %s went away before its answer: %s", client_address, error)
            return
        log.warning("request from %s failed", client_address, exc_info=True)
