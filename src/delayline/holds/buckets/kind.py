"""The bucket hold's entry in :data:`delayline.holds.registry.HOLD_KINDS`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from delayline.core.units import format_duration_ms, parse_duration_ms, parse_positive_int
from delayline.holds.buckets.bench import BucketsBench
from delayline.holds.buckets.config import (
    DEFAULT_BOUNDARIES_MS,
    DEFAULT_PARTITIONS,
    DEFAULT_RETENTION_MARGIN_MS,
    DEFAULT_TOPIC_PREFIX,
    BucketsConfig,
    parse_boundaries,
)
from delayline.holds.buckets.route import render_copy
from delayline.holds.kinds import BenchSide, Flag, HoldKind
from delayline.kafka.acls import PREFIXED, READ_WRITE, TOPIC, Acl

if TYPE_CHECKING:
    from delayline.contract import OutgoingRecord
    from delayline.holds.hold import Hold


def _load() -> type[Hold]:
    from delayline.holds.buckets.hold import BucketHold  # noqa: PLC0415 - pyspark

    return BucketHold


def _topics(bootstrap: str, layout: BucketsConfig, replication: int, timeout_s: float) -> list[str]:
    from delayline.holds.buckets.topics import ensure_bucket_topics  # noqa: PLC0415 - admin client

    outcome = ensure_bucket_topics(
        bootstrap, layout, replication_factor=replication, timeout_s=timeout_s
    )
    return [
        f"{name}: {what} (bucket {line.partition(': ')[2]})"
        for line, (name, what) in zip(layout.describe(), outcome.items(), strict=True)
    ]


def _acls(layout: BucketsConfig) -> list[Acl]:
    return [
        Acl(TOPIC, layout.topic_prefix, PREFIXED, ("Delete", *READ_WRITE),
            "bucket copies written, read, and deleted once read (DeleteRecords)")
    ]  # fmt: skip


def _render(row: Mapping[str, Any], layout: BucketsConfig, lead_ms: int) -> list[OutgoingRecord]:
    return [render_copy(row, layout, lead_ms)]


def _rows(figures: Mapping[str, Any] | None, baseline: object) -> list[tuple[str, Any]]:
    del baseline  # the broker's, measured for every hold
    if figures is None:
        return []
    return [
        ("broker disk of the bucket topics (bytes)", figures["bucket_topics_bytes"]),
        ("bucket topics' disk per pending schedule (bytes)", figures["bytes_per_pending"]),
    ]


BENCH = BenchSide(
    BucketsBench,
    # 10M pending due over 30 days is the restart scenario with --pending 10000000
    # --pending-span 30d.
    targets={
        "burst": (("ingest throughput (schedules/s)", "ingest_per_s", 20_000, ">="),),
        "steady": (("sustained ingest (schedules/s)", "ingest_per_s", 20_000, ">="),),
        "restart": (
            ("first delivery after restart (s)", "first_delivery_after_restart_s", 30, "<="),
            ("pipeline peak RSS (MiB) with the backlog held", "peak_rss_mb", 2048, "<="),
        ),
    },
    lateness_p99_ms=1_000,
    rows=_rows,
    compared=(
        (
            "broker disk of the bucket topics per pending schedule (bytes)",
            "buckets.bytes_per_pending",
        ),
    ),
)
"""``delayline bench --hold buckets``: the broker disk of its topics; its bounds."""


BUCKETS = HoldKind(
    "buckets",
    "Kafka time-bucket topics, durable; Spark state keeps only versions",
    _load,
    flags=(
        Flag(
            "--bucket-boundaries",
            "DELAYLINE_BUCKET_BOUNDARIES",
            ",".join(format_duration_ms(b) for b in DEFAULT_BOUNDARIES_MS),
            "the buckets' boundaries, comma-separated and increasing; bucket 0 holds "
            "waits below the first, the last everything past the last (the default "
            "doubles from 1s to about 12 days)",
            "boundaries_ms",
            parse_boundaries,
            "DURATIONS",
        ),
        Flag(
            "--bucket-topic-prefix",
            "DELAYLINE_BUCKET_TOPIC_PREFIX",
            DEFAULT_TOPIC_PREFIX,
            "bucket N is the topic PREFIX-NN",
            "topic_prefix",
        ),
        Flag(
            "--bucket-partitions",
            "DELAYLINE_BUCKET_PARTITIONS",
            DEFAULT_PARTITIONS,
            "partitions of each bucket topic created",
            "partitions",
            parse_positive_int,
        ),
        Flag(
            "--bucket-retention-margin",
            "DELAYLINE_BUCKET_RETENTION_MARGIN",
            format_duration_ms(DEFAULT_RETENTION_MARGIN_MS),
            "a bucket topic keeps copies this long past its range: the longest outage "
            "of the pipeline that loses nothing",
            "retention_margin_ms",
            parse_duration_ms,
            "DURATION",
        ),
    ),
    settings=BucketsConfig,
    topics=_topics,
    acls=_acls,
    render=_render,
    bench=BENCH,
)  # fmt: skip
