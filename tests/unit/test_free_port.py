"""free_port picks ports a client connection will not take (below the ephemeral range)."""

from __future__ import annotations

import random
import socket

from delayline.infra.ports import _ephemeral_low, free_port


def test_free_port_is_below_the_ephemeral_range_and_has_a_free_neighbour() -> None:
    low = _ephemeral_low()
    for seed in range(20):
        port = free_port(random.Random(seed))
        assert 20000 <= port < low - 1
        for candidate in (port, port + 1):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", candidate))


def test_free_port_skips_a_port_in_use() -> None:
    first = free_port(random.Random(7))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", first))
        taken.listen()
        assert free_port(random.Random(7)) != first
