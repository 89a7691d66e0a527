"""Bearer-token checks: writes always need the token, reads when configured."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from delayline.api.config import ApiConfig
from delayline.errors import AuthError

bearer = HTTPBearer(auto_error=False, description="The token given to `delayline api --token`.")


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


class WritesDisabledError(AuthError):
    """The API runs without a token, so it accepts no writes."""


def _check(config: ApiConfig, credentials: HTTPAuthorizationCredentials | None) -> None:
    if config.token is None:
        raise WritesDisabledError(
            "writes are disabled: start the API with --token (env DELAYLINE_API_TOKEN)"
        )
    if credentials is None:
        raise AuthError("missing bearer token: send 'Authorization: Bearer <token>'")
    if not hmac.compare_digest(credentials.credentials.encode(), config.token.encode()):
        raise AuthError("wrong bearer token")


def require_write(request: Request, credentials: Credentials) -> None:
    """Dependency of every write endpoint."""
    _check(request.app.state.config, credentials)


def require_read(request: Request, credentials: Credentials) -> None:
    """Dependency of every read endpoint: open unless ``reads_need_token``."""
    config: ApiConfig = request.app.state.config
    if config.reads_need_token:
        _check(config, credentials)
