from typing import Any

import pytest

from delayline.client.config import RetryPolicy
from delayline.client.retry import ATTEMPT, ORIGINAL_TIMESTAMP, plan_retry
from delayline.errors import RetriesExhaustedError


def test_default_backoff_doubles_from_5s_to_1h() -> None:
    policy = RetryPolicy()
    delays = [policy.delay_ms(n) for n in range(1, 13)]
    assert delays[:5] == [5_000, 10_000, 20_000, 40_000, 80_000]
    assert delays[-1] == 3_600_000
    assert max(delays) == 3_600_000
    assert policy.delay_ms(50) == 3_600_000
    assert policy.max_attempts == 50


def test_custom_policy() -> None:
    policy = RetryPolicy(initial_delay_ms=100, max_delay_ms=1000, multiplier=3, max_attempts=4)
    assert [policy.delay_ms(n) for n in (1, 2, 3, 4)] == [100, 300, 900, 1000]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_delay_ms": -1},
        {"initial_delay_ms": 10, "max_delay_ms": 5},
        {"multiplier": 0.5},
        {"max_attempts": 0},
    ],
)
def test_policy_rejects_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="need"):
        RetryPolicy(**kwargs)


def test_first_retry_stamps_attempt_and_original_time() -> None:
    due, headers = plan_retry([("trace", b"t1")], now_ms=1_000_000, policy=RetryPolicy())
    assert due == 1_005_000
    assert headers == [("trace", b"t1"), (ATTEMPT, b"1"), (ORIGINAL_TIMESTAMP, b"1000000")]


def test_next_retry_counts_up_keeps_original_and_drops_scheduler_headers() -> None:
    previous = [
        ("scheduler-epoch", b"1"),
        ("scheduler-key", b"old"),
        (ATTEMPT, b"3"),
        (ORIGINAL_TIMESTAMP, b"42"),
        ("trace", b"t1"),
    ]
    due, headers = plan_retry(previous, now_ms=2_000_000, policy=RetryPolicy())
    assert due == 2_000_000 + 40_000
    assert headers == [("trace", b"t1"), (ATTEMPT, b"4"), (ORIGINAL_TIMESTAMP, b"42")]


def test_explicit_attempt_wins_and_garbage_headers_are_ignored() -> None:
    due, headers = plan_retry([(ATTEMPT, b"x"), (ORIGINAL_TIMESTAMP, None)], 0, RetryPolicy(), 2)
    assert due == 10_000
    assert headers == [(ATTEMPT, b"2"), (ORIGINAL_TIMESTAMP, b"0")]


def test_beyond_max_attempts_raises() -> None:
    with pytest.raises(RetriesExhaustedError, match="51 exceeds the maximum of 50"):
        plan_retry([(ATTEMPT, b"50")], 0, RetryPolicy())
