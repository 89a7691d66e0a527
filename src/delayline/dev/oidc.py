"""A small OpenID Connect provider for tests and demos of OAUTHBEARER.

It does what a company's identity provider (Keycloak, Okta, Entra ID, Cognito) does for
Kafka clients, on loopback:

* the OAuth 2.0 client-credentials grant at ``POST /token``: a registered client (HTTP
  Basic authentication, or ``client_id``/``client_secret`` in the form) gets an access
  token, a JWT signed with RS256 whose ``sub`` is the client id (the broker's principal
  becomes ``User:<client id>``), with ``iss``, ``aud``, ``iat``, ``exp``, ``scope`` and a
  ``kid`` in its header;
* the key set that verifies the tokens, as a file (``jwks.json``), which a broker reads
  with ``sasl.oauthbearer.jwks.endpoint.url`` (a ``file://`` URL).

The signing key is made once and kept, owner-only, in the provider's directory, so a
broker started with its key set keeps accepting the tokens after the provider restarts.
Client secrets and tokens are never logged. Not for production: it has no TLS and keeps
its clients in memory.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
import threading
import time
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from delayline.errors import InfraError
from delayline.infra.broker_security import OAUTH_AUDIENCE
from delayline.kafka.properties import write_private

log = logging.getLogger(__name__)

GRANT = "client_credentials"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int_b64(number: int) -> str:
    return _b64(number.to_bytes((number.bit_length() + 7) // 8, "big"))


class OidcProvider:
    """An OpenID provider on ``127.0.0.1`` (see the module); a context manager that
    serves while open.

    Args:
        directory: Where the signing key (``key.pem``) and ``jwks.json`` are kept.
        audience: The tokens' ``aud``.
        lifetime_s: How long a token is valid.
    """

    def __init__(self, directory: Path, *, audience: str = OAUTH_AUDIENCE, lifetime_s: int = 3600):
        self.directory = directory
        self.audience = audience
        self.lifetime_s = lifetime_s
        self.issued: Counter[str] = Counter()
        """Tokens issued, by client id."""
        self._clients: dict[str, str] = {}
        self._lock = threading.Lock()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._key = self._load_key()
        public = self._key.public_key().public_numbers()
        der = self._key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.kid = hashlib.sha256(der).hexdigest()[:16]
        jwks = {
            "keys": [
                {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                 "n": _int_b64(public.n), "e": _int_b64(public.e)}
            ]
        }  # fmt: skip
        self.jwks_file.write_text(json.dumps(jwks))
        self._server: ThreadingHTTPServer | None = None

    @property
    def jwks_file(self) -> Path:
        """The key set as a file."""
        return self.directory / "jwks.json"

    @property
    def jwks_url(self) -> str:
        """The key set as a ``file://`` URL (what a broker started before the provider
        serves can read)."""
        return self.jwks_file.resolve().as_uri()

    @property
    def issuer(self) -> str:
        """The base URL (``iss``); only while serving."""
        if self._server is None:
            raise InfraError("the OIDC provider is not serving")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def token_url(self) -> str:
        """The token endpoint (``sasl.oauthbearer.token.endpoint.url``)."""
        return f"{self.issuer}/token"

    def register(self, client_id: str) -> str:
        """Register ``client_id`` with a new random secret, and return the secret."""
        secret = secrets.token_urlsafe(18)
        with self._lock:
            self._clients[client_id] = secret
        return secret

    def issue(self, headers: Any, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """Answer a token request (its headers and form): the status and the JSON body."""
        if form.get("grant_type") != GRANT:
            return 400, {"error": "unsupported_grant_type"}
        client_id = self._authenticate(headers, form)
        if client_id is None:
            return 401, {"error": "invalid_client"}
        token = self._token(client_id, form.get("scope", ""))
        with self._lock:
            self.issued[client_id] += 1
        log.info("OIDC token issued to %s", client_id)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime_s}

    def _token(self, client_id: str, scope: str) -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": client_id,
                  "aud": self.audience, "iat": now, "exp": now + self.lifetime_s,
                  "scope": scope, "jti": secrets.token_hex(8)}  # fmt: skip
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def __enter__(self) -> OidcProvider:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="oidc", daemon=True).start()
        log.info("OIDC provider serving at %s", self.issuer)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _authenticate(self, headers: Any, form: dict[str, str]) -> str | None:
        """The client id whose credentials the request carries, or ``None``."""
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        basic = str(headers.get("Authorization", ""))
        if basic.lower().startswith("basic "):
            try:
                decoded = base64.b64decode(basic[6:].strip()).decode()
            except ValueError:
                return None
            raw_id, _, raw_secret = decoded.partition(":")
            client_id = urllib.parse.unquote_plus(raw_id)
            secret = urllib.parse.unquote_plus(raw_secret)
        with self._lock:
            expected = self._clients.get(client_id)
        if expected is None or not secrets.compare_digest(expected, secret):
            return None
        return client_id

    def _load_key(self) -> rsa.RSAPrivateKey:
        path = self.directory / "key.pem"
        if path.is_file():
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
            if isinstance(key, rsa.RSAPrivateKey):
                return key
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        write_private(path, pem.decode())
        return key


def _handler(provider: OidcProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            log.debug("OIDC %s", self.requestline)

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            if self.path != "/token":
                self._answer(404, {"error": "not_found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, 65536)).decode(errors="replace")
            self._answer(*provider.issue(self.headers, dict(urllib.parse.parse_qsl(body))))

    return Handler
