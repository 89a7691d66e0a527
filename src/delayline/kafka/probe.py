"""Fail fast when nothing listens at the bootstrap address.

librdkafka retries a refused connection until its timeout runs out, so a command
pointed at the wrong port (or run before ``delayline broker start``) would wait the
whole timeout and then say only that Kafka "did not answer". Commands people run by
hand call :func:`require_listening` first: a plain TCP connect to each bootstrap
address, which a closed port refuses at once.

Library code that must tolerate a broker that comes later (the pipeline, the API's
catalog, the clients) does not call it.
"""

from __future__ import annotations

import socket
import time

from delayline.errors import KafkaUnavailableError

DEFAULT_KAFKA_PORT = 9092
PROBE_TIMEOUT_S = 2.0

HINT = (
    "check the address (-b/--bootstrap-servers, env DELAYLINE_BOOTSTRAP_SERVERS) "
    "or start a local broker with `delayline broker start`"
)


def bootstrap_addresses(bootstrap_servers: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` pairs of a bootstrap list, as librdkafka reads it.

    Accepts ``host:port``, ``host`` (port 9092), ``[::1]:9092`` and a
    ``PLAINTEXT://`` style prefix; entries are separated by commas.

    Raises:
        KafkaUnavailableError: no address, or a port that is not a number.
    """
    out: list[tuple[str, int]] = []
    for raw in bootstrap_servers.split(","):
        entry = raw.strip().rpartition("://")[2]
        if not entry:
            continue
        host, port = entry, str(DEFAULT_KAFKA_PORT)
        if entry.startswith("["):  # [IPv6]:port
            host, _, rest = entry[1:].partition("]")
            port = rest.removeprefix(":") or port
        elif entry.count(":") == 1:
            host, port = entry.split(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise KafkaUnavailableError(
                f"bad bootstrap address {raw.strip()!r}: use host:port; {HINT}"
            )
        out.append((host, int(port)))
    if not out:
        raise KafkaUnavailableError(f"no bootstrap address given; {HINT}")
    return out


def require_listening(bootstrap_servers: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Return once one bootstrap address accepts a TCP connection.

    Only the socket is tried: a broker that accepts but is not ready yet passes, and
    the Kafka client's own timeout applies after.

    Args:
        bootstrap_servers: The bootstrap list, ``host:port[,host:port]``.
        timeout_s: Bound on all the connects together (each gets what remains).

    Raises:
        KafkaUnavailableError: every address refused, timed out or did not resolve;
            the message names the addresses, why, and what to do.
    """
    deadline = time.monotonic() + timeout_s
    reasons: list[str] = []
    for host, port in bootstrap_addresses(bootstrap_servers):
        remaining = max(0.05, deadline - time.monotonic())
        try:
            with socket.create_connection((host, port), timeout=remaining):
                return
        except OSError as exc:
            reasons.append(f"{host}:{port} {_why(exc)}")
    raise KafkaUnavailableError(f"cannot connect to Kafka ({'; '.join(reasons)}); {HINT}")


def _why(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "refused the connection"
    if isinstance(exc, TimeoutError):
        return "did not answer"
    if isinstance(exc, socket.gaierror):
        return "is not a known host"
    return f"unreachable: {exc.strerror or exc}"
