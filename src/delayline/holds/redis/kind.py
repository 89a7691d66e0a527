"""The Redis hold's entry in :data:`delayline.holds.registry.HOLD_KINDS`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from delayline.core.units import format_duration_ms, parse_duration_ms
from delayline.holds.kinds import BenchPlace, BenchSide, Flag, HoldBench, HoldKind
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


def _bench(place: BenchPlace) -> HoldBench:
    from delayline.holds.redis.bench import RedisBench  # noqa: PLC0415 - redis

    return RedisBench(place)


def _rows(
    figures: Mapping[str, Any] | None, baseline: Mapping[str, Any] | None
) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    if figures is not None:
        rows += [
            ("Redis memory used / peak (MiB)",
             f"{figures['used_memory_mb']}/{figures['peak_memory_mb']}"),
            ("Redis pending at the end", figures["pending"]),
            ("Redis bytes per pending schedule", figures["bytes_per_pending"]),
        ]  # fmt: skip
    if baseline is not None:
        rows += [
            ("raw Redis ZADD+SET pipelined (/s)", baseline["writes_per_s"]),
            ("raw Redis PING p50/p99/max (us)", baseline["ping_us"]),
        ]
    return rows


BENCH = BenchSide(
    _bench,
    flags=(
        Flag(
            "--redis-url",
            "DELAYLINE_BENCH_REDIS_URL",
            "",
            "an existing Redis (default: a private one, started under the run's directory)",
            "url",
        ),
    ),
    targets={
        "burst": (
            ("delivery throughput (schedules/s)", "fire_per_s", 20_000, ">="),
            ("ingest throughput (schedules/s)", "ingest_per_s", 50_000, ">="),
        ),
        "steady": (("sustained ingest (schedules/s)", "ingest_per_s", 50_000, ">="),),
        "backlog": (("pipeline peak RSS (MiB) with the backlog held", "peak_rss_mb", 2048, "<="),),
    },
    lateness_p99_ms=1_000,
    rows=_rows,
    compared=(("Redis bytes per pending schedule", "redis.bytes_per_pending"),),
)
"""``delayline bench --hold redis``: Redis's own baseline and memory; its bounds."""


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
    bench=BENCH,
)  # fmt: skip
