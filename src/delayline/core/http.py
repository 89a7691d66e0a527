"""The one HTTP client delayline's own calls use (the command line asking the API, the
API asking the pipeline's metrics server, the local cluster's status, the client's
:class:`delayline.client.ApiClient`): JSON over HTTP, standard library only, so the
client-only install has it too."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from delayline.errors import ConfigError, HttpUnavailableError


def get_json(
    url: str,
    *,
    params: Mapping[str, str | int] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
) -> tuple[int, Any]:
    """GET ``url``: :func:`request_json` with method GET."""
    return request_json("GET", url, params=params, headers=headers, timeout_s=timeout_s)


def request_json(
    method: str,
    url: str,
    *,
    params: Mapping[str, str | int] | None = None,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
) -> tuple[int, Any]:
    """Send ``method`` to ``url`` (with the query ``params`` and ``body`` as JSON, when
    given) and decode the answer.

    Returns:
        The HTTP status (an error status included) and the JSON body, ``None`` when
        the body is not JSON.

    Raises:
        ConfigError: ``url`` is not ``http://`` or ``https://``.
        HttpUnavailableError: nothing answered (refused, timed out, a name that does not
            resolve); retriable.
    """
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise ConfigError(f"{url!r} is not an http:// or https:// URL")
    if params:
        url += ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
    sent = {"Accept": "application/json", **(headers or {})}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked above
        url, data=data, headers=sent, method=method
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            return response.status, _json_or_none(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, _json_or_none(exc.read())
    except (OSError, ValueError, http.client.HTTPException) as exc:
        # URLError, refused, timeout, a malformed URL, an answer cut short or garbled
        raise HttpUnavailableError(str(getattr(exc, "reason", exc))) from exc


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None
