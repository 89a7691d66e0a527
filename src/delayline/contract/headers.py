"""Header names and value formats of the schedules-topic contract.

The names are those of the ``kafka-message-scheduler`` design, so producers
written for it work unchanged.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from delayline.core.model import MAX_EPOCH_MS
from delayline.errors import InvalidScheduleError

EPOCH = "scheduler-epoch"
TARGET_TOPIC = "scheduler-target-topic"
TARGET_KEY = "scheduler-target-key"
CONTROL_HEADERS = frozenset({EPOCH, TARGET_TOPIC, TARGET_KEY})
"""Headers that steer delivery; each may appear at most once on a schedule."""

# Added to the delivered record.
TIMESTAMP = "scheduler-timestamp"
KEY = "scheduler-key"
TOPIC = "scheduler-topic"
DELIVERY_HEADERS = frozenset({TIMESTAMP, KEY, TOPIC})

# Written by the pipeline.
FIRED_OFFSET = "delayline-fired-offset"
"""On the tombstone written after a delivery: offset of the version that fired, so a
newer version of the same id that arrived meanwhile is not cancelled by it."""
PLAN = "delayline-plan"
"""On the tombstone a hand-over writes, when the hold drops its own before the shuffle
(:attr:`delayline.holds.hold.Hold.tombstone_mark`): the mark of the pipeline's start
whose batch wrote it. That start's hold raised the version it names (a replay within it
raises it again, the same way) and holds nothing it ends, so it drops the tombstone
unless :data:`REVIEW` is on it; any other start (a restart, a rebuild) reads it."""
REVIEW = "delayline-review"
"""On a copy of delayline's own tombstone that the committer's watch writes after it
when a record of its id landed between the version it names and it: the hold reads that
one (it may hide a newer version from compaction, which the hold then rewrites)."""
COPY_OF = "delayline-copy-of"
"""On a copy the pipeline appends of a held version (a rewrite, so compaction keeps it):
the offset of the version it copies, in the same partition. A copy is that version,
ordered at that offset: it never supersedes a newer version written before it landed.
Never delivered."""
REARM_OF = "delayline-rearm-of"
"""On the record the committer writes to re-arm a recurring schedule: the offset of the
version whose occurrence it delivered. It tells delayline's re-arms apart from what
producers write (:mod:`delayline.committer.rearms`). Never delivered."""
ERROR = "delayline-error"
"""On a dead letter: why the record was rejected."""
SOURCE = "delayline-source"
"""On a dead letter: ``topic/partition/offset`` of the rejected record; on a history
record: that of the version that fired."""
DUE = "delayline-due"
"""On a history record: the due time of what fired, Unix seconds as ``scheduler-epoch``
writes them (whatever contract it came in by)."""
TARGET = "delayline-target-topic"
"""On a history record: the topic it was delivered to."""

# Recurring schedules, groups and pauses (:mod:`delayline.contract.recurring`).
CRON = "delayline-cron"
EVERY = "delayline-every"
TIME_ZONE = "delayline-time-zone"
UNTIL = "delayline-until"
MAX_OCCURRENCES = "delayline-max-occurrences"
CATCH_UP = "delayline-catch-up"
CATCH_UP_WINDOW = "delayline-catch-up-window"
OCCURRENCE = "delayline-occurrence"
GROUP = "delayline-group"
PAUSED = "delayline-paused"
WINDOW = "delayline-window"
"""A flexible delivery window (:mod:`delayline.contract.window`)."""
RECURRENCE_HEADERS = (CRON, EVERY, TIME_ZONE, UNTIL, MAX_OCCURRENCES, CATCH_UP, CATCH_UP_WINDOW)
"""The headers that state a recurrence."""

RESERVED_HEADERS = (
    CONTROL_HEADERS | DELIVERY_HEADERS | {*RECURRENCE_HEADERS, OCCURRENCE, GROUP, PAUSED, WINDOW}
)
"""Names a client's extra headers may not use (each has an argument of its own)."""

# ASCII only, digits and white space alike: the pipeline checks the same rules in Spark
# SQL (:mod:`delayline.contract.columns`), where Unicode classes would differ.
WHITESPACE = " \t\n\r\f\x0b"
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_NOT_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
_MS_SCALE = (1000, 100, 10, 1)
"""What a fraction of 0 to 3 digits is multiplied by to make milliseconds."""


class EpochError(InvalidScheduleError):
    """An epoch header value is unusable; the message is the reason."""


def parse_epoch_ms(text: str) -> int:
    """Parse Unix seconds as a decimal string into epoch milliseconds.

    ``"1893456000"`` and ``"1893456000.250"`` are accepted, with ASCII digits and
    ASCII white space around them. Digits beyond the millisecond round up, so a
    schedule never fires before the instant written.

    Raises:
        EpochError: the value is empty, not a plain decimal number, not finite,
            negative, or beyond 9999-12-31.
    """
    stripped = text.strip(WHITESPACE)
    # The usual form, seconds to the millisecond at most (1-15 ASCII digits, then 1-3
    # after a point, if any): exact in integers, nothing to round. String methods, not a
    # regular expression: every schedule the committer's watch reads comes here.
    seconds_text, point, fraction = stripped.partition(".")
    if (
        stripped.isascii()
        and seconds_text.isdigit()
        and len(seconds_text) <= 15
        and (not point or (fraction.isdigit() and len(fraction) <= 3))
    ):
        fraction_ms = int(fraction) * _MS_SCALE[len(fraction)] if point else 0
        epoch_ms = int(seconds_text) * 1000 + fraction_ms
        if epoch_ms <= MAX_EPOCH_MS:
            return epoch_ms
    if not stripped:
        raise EpochError("empty")
    if not _DECIMAL.fullmatch(stripped):
        if _NOT_FINITE.fullmatch(stripped):
            raise EpochError(f"not a finite number: {clip(stripped)}")
        raise EpochError(f"not a decimal number of seconds: {clip(stripped)}")
    try:
        seconds = Decimal(stripped)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise EpochError(f"not a decimal number of seconds: {clip(stripped)}") from exc
    if seconds < 0:
        raise EpochError(f"negative: {clip(stripped)}")
    millis = seconds * 1000
    epoch_ms = int(millis.to_integral_value(rounding="ROUND_CEILING"))
    if epoch_ms > MAX_EPOCH_MS:
        raise EpochError(f"beyond year 9999: {clip(stripped)}")
    return epoch_ms


def format_epoch(epoch_ms: int) -> str:
    """Render epoch milliseconds as Unix seconds: ``"1893456000"`` or ``"1893456000.250"``."""
    seconds, millis = divmod(epoch_ms, 1000)
    return str(seconds) if millis == 0 else f"{seconds}.{millis:03d}"


def clip(text: str, limit: int = 40) -> str:
    """Quote a value for a reason string without letting it grow unbounded."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
