"""What a retried record and a dead letter carry, and who may be retried: pure logic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.client.config import RetryPolicy
from delayline.client.consumer import RetryConfig, retry_id
from delayline.client.retry import (
    ATTEMPT,
    ERROR_CLASS,
    ERROR_MESSAGE,
    GROUP,
    MAX_ERROR_BYTES,
    ORIGINAL_TIMESTAMP,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TOPIC,
    Failure,
    error_class,
    error_message,
)
from delayline.contract import ConsumedRecord
from delayline.errors import ConfigError


class DeclinedError(Exception):
    pass


def test_a_first_failure_keeps_the_records_headers_and_stamps_where_and_when() -> None:
    failure = Failure([("trace", b"t1"), ("empty", None)], "orders", 2, 41, now_ms=1_000)
    assert failure.retries == 0
    headers = failure.headers("billing", DeclinedError("card declined"), attempt=1)
    assert headers == [
        ("trace", b"t1"),
        ("empty", None),
        (ATTEMPT, b"1"),
        (ORIGINAL_TIMESTAMP, b"1000"),
        (ERROR_CLASS, b"tests.unit.test_retry_headers.DeclinedError"),
        (ERROR_MESSAGE, b"card declined"),
        (SOURCE_TOPIC, b"orders"),
        (SOURCE_PARTITION, b"2"),
        (SOURCE_OFFSET, b"41"),
        (GROUP, b"billing"),
    ]


def test_a_retry_that_fails_again_keeps_its_source_and_first_failure() -> None:
    first = Failure([("trace", b"t1")], "orders", 2, 41, now_ms=1_000)
    delivered = [
        *first.headers("billing", DeclinedError("x"), attempt=1),
        ("scheduler-epoch", b"2.0"),  # what delayline adds on delivery: dropped
        ("scheduler-topic", b"sched"),
        ("delayline-occurrence", b"3"),
    ]
    again = Failure(delivered, "billing-retry", 0, 7, now_ms=5_000)
    assert again.retries == 1
    assert again.first_ms == 1_000
    assert again.source == ("orders", 2, 41)
    assert again.carried == [("trace", b"t1")]
    headers = dict(again.headers("billing", KeyError("k"), attempt=2))
    assert headers[ATTEMPT] == b"2"
    assert headers[ERROR_CLASS] == b"KeyError"  # a builtin: no module
    assert headers[SOURCE_OFFSET] == b"41"


@pytest.mark.parametrize("attempt", [b"x", b"-1", b"+2", b"", None, "\u0663".encode()])
def test_garbage_retry_headers_count_as_absent(attempt: bytes | None) -> None:
    failure = Failure([(ATTEMPT, attempt), (ORIGINAL_TIMESTAMP, None)], "t", 0, 1, now_ms=9)
    assert failure.retries == 0
    assert failure.first_ms == 9


def test_another_groups_retry_headers_are_not_this_groups_count() -> None:
    """A retry sent back to a shared source topic is read by every group of it: each
    counts its own tries."""
    theirs = Failure([], "orders", 0, 5, now_ms=1).headers("a", KeyError(), attempt=3)
    mine = Failure(theirs, "orders", 0, 9, now_ms=2, group="b")
    assert (mine.retries, mine.first_ms, mine.source) == (0, 2, ("orders", 0, 9))
    same = Failure(theirs, "orders", 0, 9, now_ms=2, group="a")
    assert (same.retries, same.first_ms, same.source) == (3, 1, ("orders", 0, 5))


@given(st.text(min_size=0, max_size=3_000))
def test_an_error_message_is_cut_on_a_character_boundary(text: str) -> None:
    cut = error_message(ValueError(text))
    assert len(cut) <= MAX_ERROR_BYTES
    assert text.encode("utf-8", "replace").startswith(cut)
    cut.decode("utf-8")  # whole characters only


def test_error_class_names_the_module() -> None:
    assert error_class(DeclinedError()) == "tests.unit.test_retry_headers.DeclinedError"
    assert error_class(TimeoutError()) == "TimeoutError"


def test_the_group_names_its_topics_unless_told() -> None:
    config = RetryConfig("billing")
    assert (config.retry_topic, config.dead_letter_topic) == ("billing-retry", "billing-dlt")
    named = RetryConfig("billing", retry_topic="r", dead_letter_topic="d")
    assert (named.retry_topic, named.dead_letter_topic) == ("r", "d")
    with pytest.raises(ConfigError, match="group"):
        RetryConfig("")
    with pytest.raises(ConfigError, match="retry topic name"):
        RetryConfig("g", retry_topic="no spaces")


def test_not_retryable_classes_and_the_predicate_decide() -> None:
    config = RetryConfig(
        "g", not_retryable=(DeclinedError,), retryable=lambda e: not isinstance(e, KeyError)
    )
    assert config.may_retry(TimeoutError())
    assert not config.may_retry(DeclinedError())
    assert not config.may_retry(KeyError())
    assert RetryConfig("g").may_retry(DeclinedError())


@given(st.integers(1, 60), st.floats(0, 1, exclude_max=True), st.floats(0, 1))
def test_jitter_only_shortens_a_delay_and_by_its_share_at_most(
    attempt: int, draw: float, jitter: float
) -> None:
    policy = RetryPolicy(initial_delay_ms=1_000, max_delay_ms=60_000, jitter=jitter)
    full = policy.delay_ms(attempt)
    delay = policy.jittered_ms(attempt, draw)
    assert full * (1 - jitter) - 1 <= delay <= full


def test_jitter_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="jitter"):
        RetryPolicy(jitter=1.5)


def test_a_retry_id_is_the_groups_and_the_records_place() -> None:
    record = ConsumedRecord("orders", 2, 41, 0, None, b"v", ())
    assert retry_id("billing", record) == "retry/billing/orders/2/41"
