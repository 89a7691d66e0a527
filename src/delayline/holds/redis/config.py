"""Settings of the Redis hold (no Redis or Spark import: the CLI reads them too)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from delayline.errors import ConfigError

DEFAULT_URL = "redis://127.0.0.1:6379/0"
DEFAULT_GRACE_MS = 15 * 60_000
"""How long past its due time a pending schedule's key lives (the original's
``EX countdown+900``): the longest outage of every pipeline that loses nothing."""
DEFAULT_LEASE_MS = 30_000
"""How long a pipeline may be silent before another takes over its unfinished claims."""
DEFAULT_PREFIX = "delayline"
_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


@dataclass(frozen=True, slots=True)
class RedisHoldConfig:
    """Where and how the Redis hold keeps pending schedules.

    Attributes:
        url: ``redis://[user:password@]host:port/db`` (``rediss://`` for TLS).
        grace_ms: A pending schedule's key expires this long after its due time.
        lease_ms: A claim (or a pipeline's registration) not renewed for this long is
            taken over by another pipeline; also the heartbeat's bound.
        prefix: Every key starts with ``{prefix}``: one hash slot, so the scripts'
            keys stay together on a Redis Cluster too; pipelines that share a prefix
            share their pending schedules.
        timeout_ms: How long a command (with its retries) may wait for Redis before
            the batch fails (a restart of Redis within it is ridden out).
        claim_limit: The most due schedules one Spark task claims per micro-batch (each
            batch has ``shuffle_partitions`` tasks, every one of which claims; a task
            hands over about 4-5k schedules a second here, so this bounds a batch's
            length).
    """

    url: str = DEFAULT_URL
    grace_ms: int = DEFAULT_GRACE_MS
    lease_ms: int = DEFAULT_LEASE_MS
    prefix: str = DEFAULT_PREFIX
    timeout_ms: int = 30_000
    claim_limit: int = 20_000

    def __post_init__(self) -> None:
        if not self.url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError(
                f"--redis-url must start with redis://, rediss:// or unix://, got {self.url!r}"
            )
        if self.grace_ms < 0:
            raise ConfigError(f"--redis-grace must be >= 0, got {self.grace_ms} ms")
        if self.lease_ms < 1_000:
            raise ConfigError(f"--redis-lease must be at least 1s, got {self.lease_ms} ms")
        if not _PREFIX.fullmatch(self.prefix):
            raise ConfigError(
                f"--redis-prefix must be 1-64 of letters, digits and _.:-, got {self.prefix!r}"
            )
        if self.timeout_ms <= 0 or self.claim_limit <= 0:
            raise ConfigError("redis timeout and claim limit must be positive")

    @property
    def safe_url(self) -> str:
        """The URL without its password, for logs and errors."""
        return re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", self.url)
