"""Local TCP ports: whether one accepts connections, and free ones for brokers and tests."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from delayline.errors import BrokerStartError


def require_free_port(host: str, port: int) -> None:
    """Raise unless ``port`` on ``host`` can be bound now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise BrokerStartError(
                f"port {port} on {host} is in use; pick another with --port"
            ) from None


def accepts(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port`` within ``timeout_s``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def free_port(rng: random.Random | None = None) -> int:
    """A loopback port free right now, with the next one free too (for tests).

    Chosen below the kernel's ephemeral range: a port the kernel handed out
    would soon go to some client's outgoing connection (Kafka clients open
    many), and a broker started on it a moment later found it taken (seen in
    CI). The next port is checked as well because it is the broker's default
    controller port.
    """
    rng = rng or random.Random()
    low = _ephemeral_low()
    if low < _FREE_PORT_MIN + 1000:  # an unusual kernel setting: stay clear above it
        low = 65000
    for _ in range(200):
        port = rng.randrange(_FREE_PORT_MIN, low - 1)
        if bindable(port) and bindable(port + 1):
            return port
    raise BrokerStartError(f"no free loopback port pair in {_FREE_PORT_MIN}-{low - 1}")


_FREE_PORT_MIN = 20000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port: int) -> bool:
    """Whether nothing listens on ``port`` of 127.0.0.1 (it can be bound now)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
