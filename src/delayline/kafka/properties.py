"""A Java client properties file, as Kafka's own tools take it, for every client delayline runs.

delayline's Kafka clients are of two kinds: Spark's Kafka source (Java: the file's keys
pass unchanged, as ``kafka.``-prefixed options) and librdkafka (every other client:
producers, consumers and admin clients, on the driver and the executors). Java and
librdkafka name some settings differently; :func:`librdkafka_settings` translates them
here, in one place:

* ``sasl.jaas.config`` becomes ``sasl.username``/``sasl.password`` (PLAIN and SCRAM), or
  the OAUTHBEARER client id, secret and scope (with ``sasl.oauthbearer.method=oidc``
  when ``sasl.oauthbearer.token.endpoint.url`` is set);
* truststores: a PEM file is used as it is; JKS and PKCS12 truststores are read with the
  JDK's ``keytool`` into a PEM file of their certificates (in a private temporary
  directory), as librdkafka reads only PEM CA certificates;
* keystores (mutual TLS): PKCS12 as it is, JKS through ``keytool`` into PKCS12, PEM files
  and inline PEM (``ssl.keystore.key``, ``ssl.keystore.certificate.chain``);
* ``ssl.endpoint.identification.algorithm`` empty turns hostname verification off
  (librdkafka's ``none``); it is on by default, as in Java.

A key that means something to Java and cannot be carried to librdkafka (a callback
class, Java cipher-suite or protocol names) is refused at start with its name and the
reason, never dropped. Any other key passes through; librdkafka refuses unknown ones,
and so does :func:`check` with the key's name.

Secrets stay out of argv (``keytool`` gets its passwords through its environment) and
out of logs (:func:`redacted`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from delayline.errors import ConfigError

KAFKA_CONFIG_ENV = "DELAYLINE_KAFKA_CONFIG"
"""The environment variable that names the client properties file of every delayline
process (Spark's Python workers inherit it)."""

SECRET_NAMES = r"(?i)secret|password|token|access[.]?key|jaas|credential|ssl[.]key|keystore[.]key"  # noqa: S105
"""Names of settings whose values are never shown: Spark's own defaults (secret,
password, token, access key), SASL's JAAS configuration and inline TLS keys. A Java
regular expression as well as a Python one (Spark redacts with it too)."""
_SECRET = re.compile(SECRET_NAMES)

_REFUSED = {
    "sasl.client.callback.handler.class": "a Java class: librdkafka cannot load it",
    "sasl.login.class": "a Java class: librdkafka cannot load it",
    "ssl.engine.factory.class": "a Java class: librdkafka cannot load it",
    "ssl.cipher.suites": "Java and OpenSSL name cipher suites differently",
    "ssl.enabled.protocols": "librdkafka negotiates the TLS version itself (OpenSSL's)",
    "ssl.protocol": "librdkafka negotiates the TLS version itself (OpenSSL's)",
    "ssl.keymanager.algorithm": "a Java security provider setting",
    "ssl.trustmanager.algorithm": "a Java security provider setting",
    "ssl.secure.random.implementation": "a Java security provider setting",
    "ssl.provider": "a Java security provider setting",
}
"""Java client keys librdkafka has no counterpart for, and why."""

_JAVA_ONLY = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
        "ssl.truststore.certificates",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "sasl.oauthbearer.token.endpoint.url",
        "bootstrap.servers",
        # Java's token login, tuned: librdkafka fetches a token at start and again at 80 %
        # of its lifetime, and reads ``sub`` and ``scope`` as OIDC names them.
        "sasl.login.callback.handler.class",  # Java's OIDC login only: checked in _sasl
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.login.retry.backoff.max.ms",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.clock.skew.seconds",
    }
)
"""Keys translated here, or Java's alone (never passed to librdkafka under their Java
name); Spark's Kafka source takes every key as written."""

OAUTH_LOGIN_HANDLERS = frozenset(
    {
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
    }
)
"""Java's OIDC client-credentials login (Kafka 3.4 and later, and its older name):
librdkafka's ``sasl.oauthbearer.method=oidc`` is the same flow, so a file naming it is
carried; any other login class is refused."""

_LOGIN_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "basic",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "basic",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": "oauth",
}


class KafkaConfigError(ConfigError):
    """The client properties file cannot be read, or a setting in it cannot be carried
    to delayline's clients; the message names the file, the key and the reason."""


def read_properties(path: Path) -> dict[str, str]:
    """A Java ``.properties`` file: ``key=value``, ``key: value`` or ``key value`` lines,
    ``#`` and ``!`` comments, a trailing backslash continuing a line, and Java's escapes.

    Raises:
        KafkaConfigError: the file cannot be read.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KafkaConfigError(f"cannot read the Kafka client properties {path}: {exc}") from exc
    return parse_properties(text)


def parse_properties(text: str) -> dict[str, str]:
    """Parse the text of a Java ``.properties`` file (see :func:`read_properties`)."""
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical += line[:-1]
            continue
        logical += line
        key, value = _split(logical)
        out[_unescape(key)] = _unescape(value)
        logical = ""
    if logical:
        key, value = _split(logical)
        out[_unescape(key)] = _unescape(value)
    return out


def _split(line: str) -> tuple[str, str]:
    """Key and value of one logical line: the key ends at the first unescaped ``=``,
    ``:`` or white space; one separator and the white space around it go."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """The login module and options of one ``sasl.jaas.config`` entry:
    ``<module> required key="value" key2=value2;``.

    Raises:
        KafkaConfigError: it is not one entry of that form.
    """
    tokens = re.findall(r'"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;)', text)
    words: list[tuple[str, bool]] = []  # (text, was quoted)
    for quoted, bare, equals, semi in tokens:
        if semi:
            words.append((";", False))
        elif equals:
            words.append(("=", False))
        elif bare:
            words.append((bare, False))
        else:
            words.append((re.sub(r"\\(.)", r"\1", quoted), True))
    if len(words) < 3 or words[-1] != (";", False):
        raise KafkaConfigError(
            "sasl.jaas.config is not '<LoginModule> required key=\"value\" ...;'"
        )
    module, flag = words[0][0], words[1][0]
    if flag not in {"required", "requisite", "sufficient", "optional"}:
        raise KafkaConfigError(f"sasl.jaas.config: unknown control flag {flag!r}")
    options: dict[str, str] = {}
    body = words[2:-1]
    if len(body) % 3:
        raise KafkaConfigError("sasl.jaas.config: options must be key=value pairs")
    for i in range(0, len(body), 3):
        (key, _), (eq, _), (value, _) = body[i : i + 3]
        if eq != "=":
            raise KafkaConfigError(f"sasl.jaas.config: option {key!r} has no '='")
        options[key] = value
    return module, options


def librdkafka_settings(
    props: Mapping[str, str], source: str = "the client properties"
) -> dict[str, str]:
    """librdkafka's settings for the Java client properties ``props``.

    Args:
        props: The file's keys and values.
        source: Names the file in errors.

    Raises:
        KafkaConfigError: a key cannot be carried (its name and the reason), or a store
            cannot be read.
    """
    for key, why in _REFUSED.items():
        if key in props:
            raise KafkaConfigError(
                f"{key} (in {source}) cannot be carried to delayline's librdkafka clients: "
                f"{why}; remove it"
            )
    out = {k: v for k, v in props.items() if k not in _JAVA_ONLY}
    out.update(_sasl(props, source))
    out.update(_trust(props, source))
    out.update(_keystore(props, source))
    algorithm = props.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        if algorithm.strip().lower() not in {"", "https"}:
            raise KafkaConfigError(
                f"ssl.endpoint.identification.algorithm={algorithm!r} (in {source}): only "
                "'https' (the default) or empty (no hostname verification) are known"
            )
        out["ssl.endpoint.identification.algorithm"] = "https" if algorithm.strip() else "none"
    elif _uses_tls(props):
        out["ssl.endpoint.identification.algorithm"] = "https"
    return out


def spark_options(props: Mapping[str, str]) -> dict[str, str]:
    """The Kafka source's options for ``props`` (the Java client takes them as they are)."""
    return {f"kafka.{k}": v for k, v in props.items() if k != "bootstrap.servers"}


def redacted(settings: Mapping[str, object]) -> dict[str, object]:
    """``settings`` with every secret value replaced (for logs and answers)."""
    return {k: ("[redacted]" if _SECRET.search(k) else v) for k, v in settings.items()}


def _uses_tls(props: Mapping[str, str]) -> bool:
    return props.get("security.protocol", "PLAINTEXT").upper() in {"SSL", "SASL_SSL"}


def _sasl(props: Mapping[str, str], source: str) -> dict[str, str]:
    handler = props.get("sasl.login.callback.handler.class")
    mechanism = props.get("sasl.mechanism", "PLAIN").strip().upper()
    if handler is not None and (
        handler.strip() not in OAUTH_LOGIN_HANDLERS or mechanism != "OAUTHBEARER"
    ):
        raise KafkaConfigError(
            f"sasl.login.callback.handler.class (in {source}) cannot be carried to "
            "delayline's librdkafka clients: a Java class librdkafka cannot load (only Java's "
            "OIDC login, with sasl.mechanism=OAUTHBEARER, is librdkafka's own); remove it"
        )
    out: dict[str, str] = {}
    jaas = props.get("sasl.jaas.config")
    endpoint = props.get("sasl.oauthbearer.token.endpoint.url")
    if endpoint:
        out["sasl.oauthbearer.token.endpoint.url"] = endpoint
        out["sasl.oauthbearer.method"] = "oidc"
    if jaas is None:
        return out
    try:
        module, options = parse_jaas(jaas)
    except KafkaConfigError as exc:
        raise KafkaConfigError(f"{exc} (in {source})") from None
    kind = _LOGIN_MODULES.get(module)
    if kind is None:
        raise KafkaConfigError(
            f"sasl.jaas.config (in {source}) uses {module}: delayline's librdkafka clients "
            "know PlainLoginModule, ScramLoginModule and OAuthBearerLoginModule"
        )
    if kind == "oauth":
        return {**out, **_oauth(options, endpoint, source)}
    if mechanism not in {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}:
        raise KafkaConfigError(
            f"sasl.jaas.config (in {source}) has a username and password, but "
            f"sasl.mechanism is {mechanism}"
        )
    for key in ("username", "password"):
        if key not in options:
            raise KafkaConfigError(f"sasl.jaas.config (in {source}) has no {key}")
    return {**out, "sasl.username": options["username"], "sasl.password": options["password"]}


def _oauth(options: Mapping[str, str], endpoint: str | None, source: str) -> dict[str, str]:
    """OAUTHBEARER's client credentials, for librdkafka's OIDC token fetch."""
    if not endpoint:
        raise KafkaConfigError(
            f"OAUTHBEARER (in {source}) without sasl.oauthbearer.token.endpoint.url: "
            "delayline's librdkafka clients fetch tokens from an OIDC token endpoint only"
        )
    names = {"clientId": "sasl.oauthbearer.client.id",
             "clientSecret": "sasl.oauthbearer.client.secret",
             "scope": "sasl.oauthbearer.scope"}  # fmt: skip
    out: dict[str, str] = {}
    extensions = []
    for option, value in options.items():
        if option in names:
            out[names[option]] = value
        elif option.startswith("extension_"):
            extensions.append(f"{option.removeprefix('extension_')}={value}")
        else:
            raise KafkaConfigError(
                f"sasl.jaas.config (in {source}): the OAuthBearerLoginModule option "
                f"{option} cannot be carried to delayline's librdkafka clients (they take "
                "clientId, clientSecret, scope and extension_NAME)"
            )
    if extensions:
        out["sasl.oauthbearer.extensions"] = ",".join(extensions)
    return out


def _trust(props: Mapping[str, str], source: str) -> dict[str, str]:
    inline = props.get("ssl.truststore.certificates")
    if inline:
        return {"ssl.ca.pem": inline}
    location = props.get("ssl.truststore.location")
    if not location:
        return {}
    kind = props.get("ssl.truststore.type", "JKS").upper()
    path = _existing(location, "ssl.truststore.location", source)
    if kind == "PEM":
        return {"ssl.ca.location": str(path)}
    if kind not in {"JKS", "PKCS12"}:
        raise KafkaConfigError(f"ssl.truststore.type={kind} (in {source}): JKS, PKCS12 or PEM")
    password = props.get("ssl.truststore.password", "")
    return {"ssl.ca.location": str(_truststore_pem(path, kind, password, source))}


def _keystore(props: Mapping[str, str], source: str) -> dict[str, str]:
    out: dict[str, str] = {}
    if props.get("ssl.key.password"):
        out["ssl.key.password"] = props["ssl.key.password"]
    if props.get("ssl.keystore.key"):
        out["ssl.key.pem"] = props["ssl.keystore.key"]
        out["ssl.certificate.pem"] = props.get("ssl.keystore.certificate.chain", "")
        return out
    location = props.get("ssl.keystore.location")
    if not location:
        return out
    path = _existing(location, "ssl.keystore.location", source)
    kind = props.get("ssl.keystore.type", "JKS").upper()
    password = props.get("ssl.keystore.password", "")
    if kind == "PEM":
        out["ssl.key.location"] = str(path)
        out["ssl.certificate.location"] = str(path)
        return out
    if kind == "JKS":
        path = _jks_to_pkcs12(path, password, source)
    elif kind != "PKCS12":
        raise KafkaConfigError(f"ssl.keystore.type={kind} (in {source}): JKS, PKCS12 or PEM")
    out["ssl.keystore.location"] = str(path)
    out["ssl.keystore.password"] = password
    return out


def _existing(location: str, key: str, source: str) -> Path:
    path = Path(location).expanduser()
    if not path.is_file():
        raise KafkaConfigError(f"{key}={location} (in {source}): no such file on this machine")
    return path


def _private_dir() -> Path:
    """A directory only this user reads, for the stores converted here."""
    root = Path(tempfile.gettempdir()) / f"delayline-tls-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    os.chmod(root, 0o700)
    return root


def _converted(path: Path, tag: str, suffix: str) -> Path:
    """Where the conversion of ``path`` goes: named by its content, so a changed store is
    converted again and an unchanged one once per machine."""
    digest = hashlib.sha256(tag.encode() + b"\0" + path.read_bytes()).hexdigest()[:24]
    return _private_dir() / f"{digest}{suffix}"


def _keytool(args: list[str], passwords: Mapping[str, str], what: str) -> str:
    """Run ``keytool`` with passwords in its environment (never in argv)."""
    tool = shutil.which("keytool")
    if tool is None:
        raise KafkaConfigError(
            f"{what} needs the JDK's keytool to read it (not on PATH); install Java, or "
            "give a PEM file instead"
        )
    env = {**os.environ, **passwords}
    done = subprocess.run([tool, *args], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        detail = (done.stdout + done.stderr).strip().splitlines()
        last = detail[-1] if detail else "?"
        raise KafkaConfigError(f"{what}: keytool could not read it: {last}")
    return done.stdout


def _truststore_pem(path: Path, kind: str, password: str, source: str) -> Path:
    target = _converted(path, f"trust:{kind}:{password}", ".pem")
    if target.is_file():
        return target
    what = f"the truststore {path} (in {source})"
    listing = _keytool(
        ["-list", "-rfc", "-keystore", str(path), "-storetype", kind,
         "-storepass:env", "DELAYLINE_STOREPASS"],
        {"DELAYLINE_STOREPASS": password},
        what,
    )  # fmt: skip
    certs = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", listing, re.S)
    if not certs:
        raise KafkaConfigError(f"{what} holds no certificate")
    write_private(target, "\n".join(certs) + "\n")
    return target


def _jks_to_pkcs12(path: Path, password: str, source: str) -> Path:
    target = _converted(path, f"key:{password}", ".p12")
    if target.is_file():
        return target
    staged = target.with_suffix(f".{os.getpid()}.p12")
    _keytool(
        ["-importkeystore", "-noprompt", "-srckeystore", str(path), "-srcstoretype", "JKS",
         "-destkeystore", str(staged), "-deststoretype", "PKCS12",
         "-srcstorepass:env", "DELAYLINE_STOREPASS", "-deststorepass:env", "DELAYLINE_STOREPASS"],
        {"DELAYLINE_STOREPASS": password},
        f"the keystore {path} (in {source})",
    )  # fmt: skip
    os.chmod(staged, 0o600)
    os.replace(staged, target)
    return target


def write_private(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` readable by its owner only, atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(f".{target.name}.{os.getpid()}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(staged, target)
