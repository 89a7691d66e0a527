"""A secured local broker (``delayline broker start --security sasl-ssl``): TLS, SASL and
ACLs as a production cluster has them, on loopback.

Listeners:

* ``SASL_SSL`` on the client port: SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN over TLS, with a
  certificate made at the first start for ``localhost`` and ``127.0.0.1`` (the JDK's
  ``keytool``; hostname verification passes);
* ``SSL`` on port+3: mutual TLS, the principal being the client certificate's subject
  (``User:CN=delayline-mtls``; a client keystore is made beside the server's);
* ``INTERNAL`` (SASL_PLAINTEXT, PLAIN) on port+2 for the broker's own requests, and the
  KRaft ``CONTROLLER`` listener on port+1 (PLAINTEXT: its anonymous principal is a super
  user, as KRaft needs, and it serves controller requests only).

The ``StandardAuthorizer`` denies what no ACL allows (``allow.everyone.if.no.acl.found``
false); ``admin`` is a super user. Users ``admin`` and ``delayline`` get random
passwords; the client properties files ``admin.properties`` and ``delayline.properties``
(owner-only) are written next to the broker's data, in the Java format
``--kafka-config`` and Kafka's tools take. Passwords never reach a command line: the
server's are in its properties file (owner-only), ``keytool`` reads its own from the
environment, and SCRAM users are created through the admin API.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from delayline.errors import InfraError
from delayline.kafka.properties import write_private

PLAINTEXT = "plaintext"
SASL_SSL = "sasl-ssl"
SECURITY_MODES = (PLAINTEXT, SASL_SSL)
ADMIN = "admin"
DELAYLINE = "delayline"
MTLS_SUBJECT = "CN=delayline-mtls"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_OAUTH_PREFIX = "listener.name.sasl_ssl.oauthbearer."
_JWT_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator"
OAUTH_AUDIENCE = "kafka"
"""The audience (``aud``) an OAUTHBEARER token must name."""
ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
"""The JVM property naming the OAUTHBEARER URLs a Kafka 4 client or broker may read."""
ALLOWED_FILES = "org.apache.kafka.sasl.oauthbearer.allowed.files"


@dataclass(frozen=True, slots=True)
class SecureFiles:
    """Where a secured broker's certificates, passwords and client files live."""

    data_dir: Path

    @property
    def tls(self) -> Path:
        return self.data_dir / "tls"

    @property
    def server_keystore(self) -> Path:
        return self.tls / "broker.p12"

    @property
    def ca_pem(self) -> Path:
        """The broker's certificate (self-signed): what clients trust."""
        return self.tls / "ca.pem"

    @property
    def truststore_p12(self) -> Path:
        """The same certificate as a PKCS12 truststore (for Java clients that want one)."""
        return self.tls / "truststore.p12"

    @property
    def client_keystore(self) -> Path:
        """The mutual-TLS client's key and certificate (PKCS12)."""
        return self.tls / "client.p12"

    @property
    def server_truststore(self) -> Path:
        """What the broker trusts of clients: the mutual-TLS client's certificate."""
        return self.tls / "clients.p12"

    @property
    def secrets_file(self) -> Path:
        return self.tls / "secrets.json"

    @property
    def admin_properties(self) -> Path:
        return self.data_dir / "admin.properties"

    @property
    def delayline_properties(self) -> Path:
        return self.data_dir / "delayline.properties"

    @property
    def mtls_properties(self) -> Path:
        return self.data_dir / "delayline-mtls.properties"


def secrets_of(files: SecureFiles) -> dict[str, str]:
    """The broker's passwords (made at the first start, kept owner-only)."""
    if files.secrets_file.is_file():
        loaded: dict[str, str] = json.loads(files.secrets_file.read_text())
        return loaded
    made = {name: secrets.token_urlsafe(18) for name in ("store", ADMIN, DELAYLINE)}
    files.tls.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(files.secrets_file, json.dumps(made))
    return made


def prepare(files: SecureFiles, host: str, oauth_jwks_url: str | None = None) -> dict[str, str]:
    """Certificates (once) and the server settings of the secured listeners; with
    ``oauth_jwks_url``, the SASL_SSL listener also takes OAUTHBEARER tokens that key set
    verifies (the principal is the token's ``sub``).

    Raises:
        InfraError: ``keytool`` is missing or failed.
    """
    made = secrets_of(files)
    store = made["store"]
    if not files.server_keystore.is_file():
        _make_stores(files, store)
    admin = made[ADMIN]
    admin_jaas = f'{PLAIN} required username="{ADMIN}" password="{admin}" user_{ADMIN}="{admin}";'
    users = f'user_{ADMIN}="{made[ADMIN]}" user_{DELAYLINE}="{made[DELAYLINE]}"'
    del host  # listeners are set by the broker (it knows its ports)
    oauth = (
        {
            f"{_OAUTH_PREFIX}sasl.jaas.config": f"{OAUTH} required;",
            f"{_OAUTH_PREFIX}sasl.server.callback.handler.class": _VALIDATOR,
            # Kafka 4.1's default validator (DefaultJwtValidator, as the callback handler
            # makes it) verifies no signature: a token any key signed was accepted.
            # BrokerJwtValidator checks the signature against the key set, and the
            # audience. Only the top-level names are read (not the listener's).
            "sasl.oauthbearer.jwt.validator.class": _JWT_VALIDATOR,
            "sasl.oauthbearer.jwks.endpoint.url": oauth_jwks_url,
            "sasl.oauthbearer.expected.audience": OAUTH_AUDIENCE,
        }
        if oauth_jwks_url
        else {}
    )
    return {
        **oauth,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"
        + (",OAUTHBEARER" if oauth_jwks_url else ""),
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": admin_jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": f"{PLAIN} required {users};",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{SCRAM} required;",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": f"{SCRAM} required;",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(files.server_keystore),
        "ssl.keystore.password": store,
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.truststore.type": "PKCS12",
        "listener.name.ssl.ssl.truststore.location": str(files.server_truststore),
        "listener.name.ssl.ssl.truststore.password": store,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{ADMIN};User:ANONYMOUS",
    }


def internal_client(files: SecureFiles) -> dict[str, str]:
    """librdkafka settings of the broker's ``admin`` on the INTERNAL listener (to wait
    for the broker and create the SCRAM users before the TLS listener can be used)."""
    made = secrets_of(files)
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": ADMIN,
        "sasl.password": made[ADMIN],
    }


def create_users(admin: object, files: SecureFiles) -> None:
    """Create (or reset) the SCRAM users ``admin`` and ``delayline`` through ``admin``
    (an :class:`confluent_kafka.admin.AdminClient` on the INTERNAL listener).

    Raises:
        InfraError: the broker refused.
    """

    made = secrets_of(files)
    # One credential of a user per request: the broker refuses two.
    for mechanism in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):
        upserts = [
            UserScramCredentialUpsertion(
                name, ScramCredentialInfo(mechanism, 8192), made[name].encode()
            )
            for name in (ADMIN, DELAYLINE)
        ]
        futures = admin.alter_user_scram_credentials(upserts)  # type: ignore[attr-defined]
        for name, future in futures.items():
            try:
                future.result(30)
            except Exception as exc:
                raise InfraError(f"could not create the SCRAM user {name}: {exc}") from exc


def write_client_files(files: SecureFiles, bootstrap: str, mtls_bootstrap: str) -> None:
    """``admin.properties``, ``delayline.properties`` and ``delayline-mtls.properties``
    (owner-only): what ``--kafka-config`` and Kafka's tools take."""
    made = secrets_of(files)
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(files.ca_pem)}
    for user, path in ((ADMIN, files.admin_properties), (DELAYLINE, files.delayline_properties)):
        props = {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM} required username="{user}" password="{made[user]}";',
            **trust,
        }
        write_private(path, _properties_text(props))
    mtls = {
        "bootstrap.servers": mtls_bootstrap,
        "security.protocol": "SSL",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(files.client_keystore),
        "ssl.keystore.password": made["store"],
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(files.truststore_p12),
        "ssl.truststore.password": made["store"],
    }
    write_private(files.mtls_properties, _properties_text(mtls))


def _properties_text(props: dict[str, str]) -> str:
    """Java properties lines (values here hold no characters that need escaping but
    backslashes, which are doubled)."""
    return "".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in props.items())


def _make_stores(files: SecureFiles, store: str) -> None:
    files.tls.mkdir(mode=0o700, parents=True, exist_ok=True)
    client_pem = files.tls / "client.pem"
    for alias, subject, keystore, pem, truststore in (
        ("broker", "CN=localhost", files.server_keystore, files.ca_pem, files.truststore_p12),
        ("client", MTLS_SUBJECT, files.client_keystore, client_pem, files.server_truststore),
    ):
        in_store = ["-keystore", str(keystore), "-storetype", "PKCS12"]
        san = ["-ext", "SAN=dns:localhost,ip:127.0.0.1"] if alias == "broker" else []
        _keytool(["-genkeypair", "-alias", alias, "-keyalg", "RSA", "-keysize", "2048",
                  "-validity", "3650", "-dname", subject, *san, *in_store], store)  # fmt: skip
        _keytool(["-exportcert", "-rfc", "-alias", alias, "-file", str(pem), *in_store], store)
        _keytool(["-importcert", "-noprompt", "-alias", alias, "-file", str(pem),
                  "-keystore", str(truststore), "-storetype", "PKCS12"], store)  # fmt: skip
    for path in files.tls.iterdir():
        os.chmod(path, 0o600)


def _keytool(args: list[str], store: str) -> None:
    """Run ``keytool`` with the store password in its environment, never in argv."""
    tool = shutil.which("keytool")
    if tool is None:
        raise InfraError("keytool (the JDK's) is not on PATH; install Java 17 or newer")
    done = subprocess.run(
        [tool, *args, "-storepass:env", "DELAYLINE_STOREPASS"],
        env={**os.environ, "DELAYLINE_STOREPASS": store},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise InfraError(f"keytool {args[0]} failed: {(done.stdout + done.stderr).strip()}")
