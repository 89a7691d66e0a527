"""What every answer of the API carries, and what it refuses before reading: an oversized
body (413) and, on the admin page, anything its Content-Security-Policy does not allow.

Both are plain ASGI middleware. They run before routing, so a 30 MB body is refused from
its ``Content-Length`` without a byte of it read. A body sent without a length (chunked)
is counted as it arrives, and refused once it passes the limit.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

from delayline.errors import DelaylineError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


UI_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""The admin page's policy: its own scripts, styles and API calls only; no inline code,
no framing (clickjacking), no form posted elsewhere."""

SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
"""Sent with every answer."""
UI_HEADERS = (
    (b"content-security-policy", UI_CSP.encode()),
    (b"x-frame-options", b"DENY"),
)
"""Sent with every answer under ``/ui`` (and the redirect to it)."""


class BodyTooLargeError(HTTPException, DelaylineError):
    """The body passed the limit while it was being read: a 413 wherever the read fails,
    in a route's own body parsing (which FastAPI turns into 400 for other errors) or in
    :class:`BodyLimit`."""

    def __init__(self, max_bytes: int, declared: int | None = None) -> None:
        size = "more" if declared is None else f"{declared:,} bytes"
        super().__init__(
            413,
            f"request body too large: {size}, the limit is {max_bytes:,} bytes "
            "(delayline api --max-body-bytes)",
        )


class BodyLimit:
    """Answer 413 to a request whose body is larger than ``max_bytes``.

    Guarantees: no more than ``max_bytes`` of a body reach the application. A declared
    ``Content-Length`` above the limit is refused before anything is read. A body without
    one fails its read once it passes the limit, and is answered 413 if nothing was sent
    yet.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send, declared)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLargeError(self.max_bytes)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLargeError:
            if not started:
                await self._refuse(send, None)

    async def _refuse(self, send: Send, declared: int | None) -> None:
        body = json.dumps({"detail": BodyTooLargeError(self.max_bytes, declared).detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class SecurityHeaders:
    """Add :data:`SECURITY_HEADERS` to every answer, and :data:`UI_HEADERS` to the
    admin page's. Headers the application set itself are left alone."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        extra = SECURITY_HEADERS + (UI_HEADERS if path == "/" or path.startswith("/ui") else ())

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(n, v) for n, v in extra if n not in present]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
