"""The bucket hold's flags, shared by ``run`` and ``topics create``."""

from __future__ import annotations

import argparse
from typing import Any

from delayline.cli._common import duration_arg, env_flag, positive_int
from delayline.core.units import format_duration_ms, parse_duration_ms
from delayline.errors import ConfigError
from delayline.holds.buckets.config import (
    DEFAULT_BOUNDARIES_MS,
    DEFAULT_RETENTION_MARGIN_MS,
    BucketsConfig,
    parse_boundaries,
)


def _boundaries(text: str) -> tuple[int, ...]:
    try:
        return parse_boundaries(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_bucket_flags(parser: argparse.ArgumentParser | Any) -> None:
    """``--bucket-boundaries``, ``--bucket-topic-prefix``, ``--bucket-partitions`` and
    ``--bucket-retention-margin``, each with its environment variable."""
    default = ",".join(format_duration_ms(b) for b in DEFAULT_BOUNDARIES_MS)
    env_flag(
        parser,
        "--bucket-boundaries",
        env="DELAYLINE_BUCKET_BOUNDARIES",
        default=default,
        type=_boundaries,
        metavar="DURATIONS",
        help="--hold buckets: the buckets' boundaries, comma-separated and increasing; "
        "bucket 0 holds waits below the first, the last everything past the last "
        "(the default doubles from 1s to about 12 days)",
    )
    env_flag(
        parser,
        "--bucket-topic-prefix",
        env="DELAYLINE_BUCKET_TOPIC_PREFIX",
        default="delayline-bucket",
        help="--hold buckets: bucket N is the topic PREFIX-NN",
    )
    env_flag(
        parser,
        "--bucket-partitions",
        env="DELAYLINE_BUCKET_PARTITIONS",
        default=2,
        type=positive_int,
        help="--hold buckets: partitions of each bucket topic created",
    )
    env_flag(
        parser,
        "--bucket-retention-margin",
        env="DELAYLINE_BUCKET_RETENTION_MARGIN",
        default=format_duration_ms(DEFAULT_RETENTION_MARGIN_MS),
        type=duration_arg(parse_duration_ms),
        dest="bucket_retention_margin_ms",
        metavar="DURATION",
        help="--hold buckets: a bucket topic keeps copies this long past its range: the "
        "longest outage of the pipeline that loses nothing",
    )


def buckets_from(args: argparse.Namespace) -> BucketsConfig:
    """The :class:`BucketsConfig` the flags of :func:`add_bucket_flags` ask for."""
    return BucketsConfig(
        boundaries_ms=tuple(args.bucket_boundaries),
        topic_prefix=args.bucket_topic_prefix,
        partitions=args.bucket_partitions,
        retention_margin_ms=args.bucket_retention_margin_ms,
    )
