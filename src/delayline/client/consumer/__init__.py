"""Retry later, the consumer's side: a consumer sends a record its handler failed on for
another try after a backoff, through delayline, without blocking its partition; or to a
dead-letter topic.

- :class:`Retries` (and :class:`AsyncRetries`): for a consumer loop of your own, in its
  error path.
- :class:`RetryingConsumer`: the whole loop, at least once or exactly once.
- :mod:`delayline.client.retry`: the headers every retry and dead letter carries, a
  contract for any language (docs/retry.md).
"""

from delayline.client.consumer.aio import AsyncRetries
from delayline.client.consumer.loop import LoopConfig, RetryingConsumer
from delayline.client.consumer.retries import DEAD, RETRIED, Retries, RetryConfig, retry_id
from delayline.client.consumer.topics import ensure_retry_topics
from delayline.client.retry import (
    ATTEMPT,
    DEAD_REASON,
    ERROR_CLASS,
    ERROR_MESSAGE,
    EXHAUSTED,
    GROUP,
    NOT_RETRYABLE,
    ORIGINAL_TIMESTAMP,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TOPIC,
    plan_retry,
)

__all__ = [
    "ATTEMPT",
    "DEAD",
    "DEAD_REASON",
    "ERROR_CLASS",
    "ERROR_MESSAGE",
    "EXHAUSTED",
    "GROUP",
    "NOT_RETRYABLE",
    "ORIGINAL_TIMESTAMP",
    "RETRIED",
    "SOURCE_OFFSET",
    "SOURCE_PARTITION",
    "SOURCE_TOPIC",
    "AsyncRetries",
    "LoopConfig",
    "Retries",
    "RetryConfig",
    "RetryingConsumer",
    "ensure_retry_topics",
    "plan_retry",
    "retry_id",
]
