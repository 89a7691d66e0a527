"""Parsing of durations and instants typed by people (CLI flags, env vars)."""

from __future__ import annotations

import re
from datetime import datetime

from delayline.core.clock import datetime_to_ms
from delayline.errors import ConfigError

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration_ms(text: str, *, allow_negative: bool = False) -> int:
    """Parse ``"90s"``, ``"1h30m"``, ``"500ms"``, ``"2d"`` or plain seconds ``"90"``.

    Args:
        text: The duration as typed.
        allow_negative: Accept a leading ``-`` (``"-5m"``: five minutes ago), for the
            few places where a time in the past makes sense. Elsewhere a negative
            duration is refused.

    Raises:
        ValueError: with a message that shows the accepted forms.
    """
    cleaned = text.strip().lower().replace(" ", "")
    sign = 1
    if cleaned.startswith("-"):
        if not allow_negative:
            raise ConfigError(f"bad duration {text!r}: must not be negative")
        sign, cleaned = -1, cleaned[1:]
    return sign * _unsigned_duration_ms(cleaned, text)


def _unsigned_duration_ms(cleaned: str, text: str) -> int:
    if re.fullmatch(r"\d+(?:\.\d+)?", cleaned):
        return round(float(cleaned) * 1000)
    parts = _PART.findall(cleaned)
    if not cleaned or "".join(n + u for n, u in parts) != cleaned:
        raise ConfigError(
            f"bad duration {text!r}: use seconds or units ms, s, m, h, d (e.g. 90s, 1h30m)"
        )
    return round(sum(float(n) * _UNIT_MS[u] for n, u in parts))


def parse_instant_ms(text: str) -> int:
    """Parse an ISO 8601 instant with a timezone, e.g. ``2026-11-22T17:00:00Z``.

    Raises:
        ValueError: not ISO 8601, or no timezone given (delayline never guesses one).
    """
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"bad time {text!r}: use ISO 8601, e.g. 2026-11-22T17:00:00Z") from None
    if value.tzinfo is None:
        raise ConfigError(f"time {text!r} has no timezone: add Z or an offset such as +01:00")
    return datetime_to_ms(value)


def format_duration_ms(ms: int) -> str:
    """Render a duration compactly for people: ``1h2m3s``, ``250ms``."""
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    if ms < 1000:
        return f"{sign}{ms}ms"
    seconds = ms // 1000
    out = ""
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            out += f"{seconds // size}{unit}"
            seconds %= size
    if seconds or not out:
        out += f"{seconds}s"
    return sign + out


def parse_positive_int(text: str) -> int:
    """A whole number of 1 or more (``1_000`` reads as 1000).

    Raises:
        ConfigError: anything else.
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"must be a whole number of 1 or more, got {text!r}")
    return value
