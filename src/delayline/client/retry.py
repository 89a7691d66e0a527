"""The retry headers: what a retried record and a dead letter carry. Pure: no I/O.

A contract any language can follow (docs/retry.md): a consumer that
fails on a record writes a schedule whose payload, key and headers are the record's,
with these headers set, due after the policy's delay, to its group's retry topic. The
delivered record is that schedule's: every header comes back.
"""

from __future__ import annotations

from collections.abc import Iterable

from delayline.client.config import RetryPolicy
from delayline.errors import RetriesExhaustedError

ATTEMPT = "retry-attempt"
"""The retry this record is: 1 for the first (absent on a record never retried)."""
ORIGINAL_TIMESTAMP = "retry-original-timestamp"
"""When the record first failed, epoch milliseconds (decimal)."""
ERROR_CLASS = "retry-error-class"
"""The last failure's exception class, ``module.QualifiedName``."""
ERROR_MESSAGE = "retry-error-message"
"""The last failure's message, UTF-8, at most :data:`MAX_ERROR_BYTES`."""
SOURCE_TOPIC = "retry-source-topic"
"""Where the record was first read: its topic (kept through every retry)."""
SOURCE_PARTITION = "retry-source-partition"
"""... its partition (decimal)."""
SOURCE_OFFSET = "retry-source-offset"
"""... its offset (decimal)."""
GROUP = "retry-group"
"""The consumer group that failed on it."""
RETRY_TOPIC = "retry-topic"
"""On a dead letter: where its retries went, so where a redrive sends it."""
DEAD_REASON = "retry-dead-reason"
"""On a dead letter: :data:`EXHAUSTED`, :data:`NOT_RETRYABLE` or :data:`UNSCHEDULABLE`."""
EXHAUSTED = "exhausted"
"""Its retries were used up."""
NOT_RETRYABLE = "not-retryable"
"""Its error may not be retried."""
UNSCHEDULABLE = "unschedulable"
"""It cannot be a schedule (too large for the schedules topic, say): logged with why."""

RETRY_HEADERS = (
    ATTEMPT,
    ORIGINAL_TIMESTAMP,
    ERROR_CLASS,
    ERROR_MESSAGE,
    SOURCE_TOPIC,
    SOURCE_PARTITION,
    SOURCE_OFFSET,
    GROUP,
    RETRY_TOPIC,
    DEAD_REASON,
)
"""Every name above: set afresh on each retry, never carried from the record."""
MAX_ERROR_BYTES = 1_024
OWN_PREFIXES = ("scheduler-", "delayline-")
"""Headers of a delivered record that a scheduler put there (the due time, the source,
an occurrence): dropped from a retry, which is a new schedule of its own."""

HeaderPairs = list[tuple[str, bytes | None]]


def plan_retry(
    previous_headers: Iterable[tuple[str, bytes | None]],
    now_ms: int,
    policy: RetryPolicy,
    attempt: int | None = None,
) -> tuple[int, HeaderPairs]:
    """Work out the next retry from the headers of the message that failed.

    The attempt number is ``attempt`` if given, else one more than the
    ``retry-attempt`` header (1 when absent). ``retry-original-timestamp`` is
    kept from the headers, or set to ``now_ms`` on the first retry.

    Returns:
        ``(due_ms, headers)``: when to deliver, and the previous headers with the
        two retry headers replaced and all ``scheduler-*`` headers dropped.

    Raises:
        RetriesExhaustedError: the attempt is beyond ``policy.max_attempts``.
    """
    carried: HeaderPairs = []
    last_attempt = 0
    original_ms = now_ms
    for name, value in previous_headers:
        if name == ATTEMPT:
            last_attempt = _int_or(value, last_attempt)
        elif name == ORIGINAL_TIMESTAMP:
            original_ms = _int_or(value, original_ms)
        elif not name.startswith("scheduler-"):
            carried.append((name, value))
    number = attempt if attempt is not None else last_attempt + 1
    if number > policy.max_attempts:
        raise RetriesExhaustedError(
            f"retry attempt {number} exceeds the maximum of {policy.max_attempts}"
        )
    carried.append((ATTEMPT, str(number).encode()))
    carried.append((ORIGINAL_TIMESTAMP, str(original_ms).encode()))
    return now_ms + policy.delay_ms(number), carried


class Failure:
    """One failed try of a record, read from its headers: which retry it was, where it
    was first read, when it first failed. Pure.

    Args:
        headers: The failed record's headers.
        topic, partition, offset: Where the failed record was read (the source the first
            time, a retry topic after).
        now_ms: When it failed.
        group: The group that failed on it: retry headers another group wrote (its
            retries back to a shared source topic) are not this group's, and count as
            absent. ``None``: any group's count.
    """

    def __init__(
        self,
        headers: Iterable[tuple[str, bytes | None]],
        topic: str,
        partition: int,
        offset: int,
        now_ms: int,
        *,
        group: str | None = None,
    ) -> None:
        self.retries = 0
        """How many retries the record already had (its ``retry-attempt``, 0 if none)."""
        self.first_ms = now_ms
        self.source = (topic, partition, offset)
        """Where it was first read."""
        self.carried: HeaderPairs = []
        """Its own headers: without the retry headers and a scheduler's."""
        found: dict[str, bytes | None] = {}
        for name, value in headers:
            if name in RETRY_HEADERS:
                found[name] = value
            elif not name.startswith(OWN_PREFIXES):
                self.carried.append((name, value))
        if group is not None and found.get(GROUP) not in (None, group.encode()):
            found = {}
        self.retries = _int_or(found.get(ATTEMPT), 0)
        self.first_ms = _int_or(found.get(ORIGINAL_TIMESTAMP), now_ms)
        source_topic = found.get(SOURCE_TOPIC)
        if source_topic:
            self.source = (
                source_topic.decode("utf-8", "replace"),
                _int_or(found.get(SOURCE_PARTITION), -1),
                _int_or(found.get(SOURCE_OFFSET), -1),
            )

    def headers(self, group: str, error: BaseException, *, attempt: int | None) -> HeaderPairs:
        """The record's own headers, then the retry headers: ``attempt`` as
        :data:`ATTEMPT` (``None``: kept as it was, for a dead letter), the first failure,
        the error, the source and ``group``."""
        topic, partition, offset = self.source
        retry: HeaderPairs = [
            (ATTEMPT, str(self.retries if attempt is None else attempt).encode()),
            (ORIGINAL_TIMESTAMP, str(self.first_ms).encode()),
            (ERROR_CLASS, error_class(error).encode()),
            (ERROR_MESSAGE, error_message(error)),
            (SOURCE_TOPIC, topic.encode()),
            (SOURCE_PARTITION, str(partition).encode()),
            (SOURCE_OFFSET, str(offset).encode()),
            (GROUP, group.encode()),
        ]
        return [*self.carried, *retry]


def error_class(error: BaseException) -> str:
    """``module.QualifiedName`` of ``error``'s class (no module for builtins)."""
    kind = type(error)
    return (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )


def error_message(error: BaseException) -> bytes:
    """``str(error)`` as UTF-8, cut to :data:`MAX_ERROR_BYTES` on a character boundary."""
    text = str(error).encode("utf-8", "replace")
    if len(text) <= MAX_ERROR_BYTES:
        return text
    return text[:MAX_ERROR_BYTES].decode("utf-8", "ignore").encode()


def header_value(headers: Iterable[tuple[str, bytes | None]], name: str) -> bytes | None:
    """The last value of header ``name`` (``None``: absent or null)."""
    found = None
    for key, value in headers:
        if key == name:
            found = value
    return found


def _int_or(value: bytes | None, default: int) -> int:
    """``value`` as a number of ASCII digits (no sign), else ``default``."""
    if not value or not value.isdigit() or not value.isascii():
        return default
    return int(value)
