"""The bucket layout: which bucket a wait goes to, when a copy is ready, retention."""

from __future__ import annotations

from typing import Any

import pytest

from delayline.errors import ConfigError
from delayline.holds.buckets.config import BucketsConfig, parse_boundaries

S = 1_000


def test_the_default_layout_doubles_from_one_second_to_an_open_ended_last_bucket() -> None:
    layout = BucketsConfig()
    assert layout.count == 22
    assert layout.topics[0] == "delayline-bucket-00"
    assert layout.topics[-1] == "delayline-bucket-21"
    assert (layout.lower_ms(0), layout.upper_ms(0)) == (0, S)
    assert (layout.lower_ms(1), layout.upper_ms(1)) == (S, 2 * S)
    assert (layout.lower_ms(21), layout.upper_ms(21)) == (2**20 * S, None)
    assert layout.describe()[2] == "delayline-bucket-02: 2s-4s"
    assert layout.describe()[-1].endswith("12d3h16m16s-...")


@pytest.mark.parametrize(
    ("wait_ms", "bucket"),
    [(-5, 0), (0, 0), (999, 0), (1_000, 1), (1_999, 1), (2_000, 2), (3_999, 2),
     (100_000, 7), (2**20 * S - 1, 20), (2**20 * S, 21), (40 * 86_400_000, 21)],
)  # fmt: skip
def test_a_wait_goes_to_the_bucket_whose_range_holds_it(wait_ms: int, bucket: int) -> None:
    assert BucketsConfig().bucket_for(wait_ms) == bucket


def test_a_ready_copy_always_has_a_smaller_bucket_to_go_to() -> None:
    """Read after its bucket's lower bound, a copy's wait is below that bound: for
    doubling boundaries, a strictly smaller bucket (the last one excepted)."""
    layout = BucketsConfig()
    for bucket in range(1, layout.count - 1):
        upper = layout.upper_ms(bucket)
        assert upper is not None
        for wait in (layout.lower_ms(bucket), upper - 1):
            assert layout.bucket_for(wait) == bucket
            assert layout.bucket_for(wait - layout.lower_ms(bucket)) < bucket


def test_a_copy_is_ready_once_it_has_waited_its_buckets_lower_bound() -> None:
    layout = BucketsConfig()
    assert layout.ready_until_ms(0, 50_000) == 50_000
    assert layout.ready_until_ms(3, 50_000) == 46_000


def test_retention_covers_the_range_and_the_margin() -> None:
    layout = BucketsConfig(retention_margin_ms=60 * S)
    assert layout.retention_ms(0) == S + 60 * S
    assert layout.retention_ms(4) == 16 * S + 60 * S
    assert layout.retention_ms(21) == 2 * 2**20 * S + 60 * S


def test_boundaries_are_typed_as_durations() -> None:
    assert parse_boundaries("500ms, 1s,1m") == (500, 1_000, 60_000)
    with pytest.raises(ConfigError, match="bucket-boundaries"):
        parse_boundaries("1s,soon")
    with pytest.raises(ConfigError, match="at least one"):
        parse_boundaries(" , ")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"boundaries_ms": ()}, "strictly increasing"),
        ({"boundaries_ms": (0, 1_000)}, "positive"),
        ({"boundaries_ms": (2_000, 1_000)}, "strictly increasing"),
        ({"boundaries_ms": tuple(range(1, 70))}, "at most 64"),
        ({"topic_prefix": "a b"}, "topic-prefix"),
        ({"partitions": 0}, "partitions"),
        ({"retention_margin_ms": -1}, "retention-margin"),
    ],
)
def test_a_bad_layout_is_refused_with_the_flag_to_fix(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BucketsConfig(**kwargs)


def test_a_bucket_is_found_by_its_topic() -> None:
    layout = BucketsConfig(topic_prefix="b", boundaries_ms=(1_000,))
    assert layout.topics == ("b-00", "b-01")
    assert layout.bucket_of("b-01") == 1
    with pytest.raises(ConfigError):
        layout.bucket_of("b-02")
