"""The Redis hold's entry in :data:`delayline.holds.registry.HOLD_KINDS`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from delayline.core.units import format_duration_ms, parse_duration_ms
from delayline.holds.kinds import Flag, HoldKind
from delayline.holds.redis.config import (
    DEFAULT_GRACE_MS,
    DEFAULT_LEASE_MS,
    DEFAULT_PREFIX,
    DEFAULT_URL,
    RedisHoldConfig,
)

if TYPE_CHECKING:
    from delayline.holds.hold import Hold


def _load() -> type[Hold]:
    from delayline.holds.redis.hold import RedisHold  # noqa: PLC0415 - redis, pyspark

    return RedisHold


REDIS = HoldKind(
    "redis",
    "a Redis sorted set at --redis-url, durable, shared by every pipeline of one --redis-prefix",
    _load,
    flags=(
        Flag(
            "--redis-url",
            "DELAYLINE_REDIS_URL",
            DEFAULT_URL,
            "the Redis: redis://[user:password@]host:port/db (`delayline redis start` "
            "runs one locally)",
            "url",
        ),
        Flag(
            "--redis-grace",
            "DELAYLINE_REDIS_GRACE",
            format_duration_ms(DEFAULT_GRACE_MS),
            "a pending schedule's Redis key expires this long after its due time: the "
            "longest outage of every pipeline that loses nothing (--rebuild restores more)",
            "grace_ms",
            parse_duration_ms,
            "DURATION",
        ),
        Flag(
            "--redis-lease",
            "DELAYLINE_REDIS_LEASE",
            format_duration_ms(DEFAULT_LEASE_MS),
            "a pipeline silent this long (no heartbeat) has its unfinished claims "
            "finished by another pipeline of the same Redis prefix",
            "lease_ms",
            parse_duration_ms,
            "DURATION",
        ),
        Flag(
            "--redis-prefix",
            "DELAYLINE_REDIS_PREFIX",
            DEFAULT_PREFIX,
            "every Redis key starts with {PREFIX}; pipelines of one prefix share their "
            "pending schedules and fire them together (each reads its own input topics)",
            "prefix",
        ),
    ),
    settings=RedisHoldConfig,
    needs_waker=True,
)  # fmt: skip
