"""Retry-with-backoff on top of schedules: headers and arithmetic, no I/O."""

from __future__ import annotations

from collections.abc import Iterable

from delayline.client.config import RetryPolicy
from delayline.errors import RetriesExhaustedError

ATTEMPT = "retry-attempt"
ORIGINAL_TIMESTAMP = "retry-original-timestamp"


def plan_retry(
    previous_headers: Iterable[tuple[str, bytes | None]],
    now_ms: int,
    policy: RetryPolicy,
    attempt: int | None = None,
) -> tuple[int, list[tuple[str, bytes | None]]]:
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
    carried: list[tuple[str, bytes | None]] = []
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


def _int_or(value: bytes | None, default: int) -> int:
    try:
        return int((value or b"").decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return default
