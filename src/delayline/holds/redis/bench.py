"""The Redis hold's side of ``delayline bench --hold redis``: a private server (unless
``--redis-url`` names one), its raw baseline (what Redis alone does on this machine, in
the same run) and the memory the hold's pending schedules take."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from delayline.core.stats import summary
from delayline.holds.kinds import BenchPlace
from delayline.holds.redis.config import RedisHoldConfig
from delayline.holds.redis.scripts import Keys
from delayline.holds.redis.store import connect
from delayline.infra.ports import free_port
from delayline.infra.redis_server import LocalRedis, RedisServerConfig

PAYLOAD_BYTES = 100
"""As the broker baseline's records."""


def start_private(root: Path) -> LocalRedis:
    """A Redis for this run (``appendfsync always``, as the hold's tests run it)."""
    server = LocalRedis(RedisServerConfig(data_dir=root / "redis", port=free_port()))
    server.start()
    return server


def baseline(url: str, writes: int, batch: int = 1_000) -> dict[str, Any]:
    """Pipelined ZADD + SET of ``writes`` members (the hold's two writes per schedule,
    ``batch`` per round trip, as a task sends them) and the round trip of one PING."""
    client = connect(RedisHoldConfig(url=url))
    prefix = f"bench-baseline-{uuid.uuid4().hex[:6]}"
    payload = b"x" * PAYLOAD_BYTES
    began = time.perf_counter()
    for start in range(0, writes, batch):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + batch, writes)):
            member = f"{i}".encode()
            pipe.zadd(f"{prefix}:due", {member: i})
            pipe.set(f"{prefix}:s:{i}", payload, px=600_000)
        pipe.execute()
    write_s = time.perf_counter() - began
    pings = []
    for _ in range(1_000):
        t = time.perf_counter()
        client.ping()
        pings.append(round((time.perf_counter() - t) * 1e6))
    keys = client.keys(f"{prefix}:*")
    for start in range(0, len(keys), 10_000):
        client.delete(*keys[start : start + 10_000])
    client.close()
    return {
        "writes_per_s": round(writes / write_s),
        "ping_us": summary(pings),
    }


def memory(url: str, prefix: str) -> dict[str, Any]:
    """Redis's memory and the pending schedules of ``prefix`` (bytes per schedule when
    any are pending: the whole server's use over their number, an upper bound)."""
    client = connect(RedisHoldConfig(url=url, prefix=prefix))
    info = client.info("memory")
    pending = int(client.zcard(Keys(prefix).due))
    client.close()
    used = int(info["used_memory"])
    return {
        "used_memory_mb": round(used / 2**20, 1),
        "peak_memory_mb": round(int(info["used_memory_peak"]) / 2**20, 1),
        "pending": pending,
        "bytes_per_pending": round(used / pending) if pending else None,
    }


class RedisBench:
    """The Redis hold in one bench run: the server given, or a private one under the
    run's directory; the run's keys under ``bench-<run>``."""

    def __init__(self, place: BenchPlace) -> None:
        self.server: LocalRedis | None = None
        url = place.options.get("url") or None
        if url is None:
            place.progress(f"starting a private Redis in {place.work_dir / 'redis'}")
            self.server = start_private(place.work_dir)
            url = self.server.config.url
        self.url: str = url
        self.prefix = f"bench-{place.run}"
        self.run_flags = ["--redis-url", self.url, "--redis-prefix", self.prefix]
        self._progress = place.progress

    def baseline(self, writes: int) -> dict[str, Any]:
        self._progress("measuring the raw Redis (pipelined ZADD+SET, PING)")
        return baseline(self.url, writes)

    def figures(self, pending: int) -> dict[str, Any]:
        del pending  # Redis counts its own
        return memory(self.url, self.prefix)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
