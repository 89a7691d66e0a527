"""What paces a delivery: a schedule's flexible window, a target topic's rate.

(How the committer applies them: :mod:`delayline.committer.pacing`.)

A schedule with a ``delayline-window`` header (a duration: ``60s``, ``15m``) may be
delivered anywhere from its due time to its due time plus the window; the committer
spreads such schedules over their windows (:mod:`delayline.committer.pacing`), so a burst
due at one instant reaches its consumers evenly. Never before the due time.

Like a recurrence, a window the library refuses (not a duration, zero, longer than
:data:`MAX_WINDOW_MS`) makes the schedule a dead letter when it falls due, with the
reason in ``delayline-error``; the client, the command line and the API refuse it before
writing. Only the header contract reads it: an envelope's or a timer request's headers
are only delivered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from delayline.contract import headers as h
from delayline.contract.headers import WINDOW
from delayline.core.model import Headers
from delayline.core.units import format_duration_ms, parse_duration_ms
from delayline.errors import ConfigError, InvalidScheduleError

MAX_WINDOW_MS = 3_600_000
"""The longest window: its schedules wait in the committer's memory meanwhile, and a
restarted committer reads the input topics again from the earliest of them."""
WINDOW_REFUSED = "window refused"
"""The start of a dead letter's reason when its window is refused."""


class WindowError(InvalidScheduleError):
    """A ``delayline-window`` header is unusable; the message is the reason."""


def has_window(headers: Headers) -> bool:
    """Whether ``headers`` carry a window header (usable or not)."""
    # A loop, not any() over a generator: 180 against 500 ns with three headers here, for
    # every schedule the committer reads.
    for name, _ in headers:  # noqa: SIM110
        if name == WINDOW:
            return True
    return False


def window_of(headers: Headers) -> int | None:
    """The window ``headers`` state, in milliseconds; ``None`` without one.

    Raises:
        WindowError: the header appears twice, or is not a duration within
            1 ms..:data:`MAX_WINDOW_MS`.
    """
    values = [value for name, value in headers if name == WINDOW]
    if not values:
        return None
    if len(values) > 1:
        raise WindowError(f"header {WINDOW} appears more than once")
    try:
        text = (values[0] or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise WindowError(f"header {WINDOW} is not valid UTF-8") from None
    try:
        window_ms = parse_duration_ms(text)
    except ConfigError:
        raise WindowError(
            f"header {WINDOW} is {h.clip(text)}: use a duration such as 30s, 15m or 1h"
        ) from None
    check_window_ms(window_ms)
    return window_ms


def check_window_ms(window_ms: int) -> None:
    """Refuse a window outside 1 ms..:data:`MAX_WINDOW_MS`.

    Raises:
        WindowError: with the accepted range.
    """
    if not 0 < window_ms <= MAX_WINDOW_MS:
        raise WindowError(
            f"a delivery window must be within 1ms..{format_duration_ms(MAX_WINDOW_MS)}, "
            f"not {format_duration_ms(window_ms)}"
        )


def window_headers(window_ms: int | None) -> Headers:
    """The header stating ``window_ms`` (none for ``None``).

    Raises:
        WindowError: the window is out of range.
    """
    if window_ms is None:
        return ()
    check_window_ms(window_ms)
    text = format_duration_ms(window_ms) if window_ms % 1000 == 0 else f"{window_ms}ms"
    return ((WINDOW, text.encode()),)


DEFAULT_TOPIC = "*"
"""``--target-rate '*=N/s'``: the rate of every target topic without one of its own."""
MAX_RATE_PER_S = 1_000_000.0
_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*/\s*(s|sec|second|m|min|minute)\s*$")


@dataclass(frozen=True, slots=True)
class TargetRates:
    """The delivery rate of each target topic, deliveries per second.

    Attributes:
        per_topic: (topic, rate) pairs, one per topic.
        default_per_s: The rate of every other topic; ``None``: unlimited.
    """

    per_topic: tuple[tuple[str, float], ...] = ()
    default_per_s: float | None = None

    def __post_init__(self) -> None:
        topics = [t for t, _ in self.per_topic]
        if len(set(topics)) != len(topics):
            raise ConfigError("a target topic's rate is given twice")
        rates = [r for _, r in self.per_topic]
        if self.default_per_s is not None:
            rates.append(self.default_per_s)
        for rate in rates:
            if not 0 < rate <= MAX_RATE_PER_S:
                raise ConfigError(
                    f"a target rate must be above 0 and at most {MAX_RATE_PER_S:,.0f}/s, "
                    f"not {rate:g}/s"
                )

    def __bool__(self) -> bool:
        return bool(self.per_topic) or self.default_per_s is not None

    def of(self, topic: str) -> float | None:
        """The rate of ``topic`` (deliveries per second); ``None``: unlimited."""
        for name, rate in self.per_topic:
            if name == topic:
                return rate
        return self.default_per_s

    def describe(self) -> list[str]:
        """Each rate as ``--target-rate`` takes it."""
        out = [f"{topic}={_format_rate(rate)}" for topic, rate in self.per_topic]
        if self.default_per_s is not None:
            out.append(f"{DEFAULT_TOPIC}={_format_rate(self.default_per_s)}")
        return out

    @classmethod
    def parse(cls, items: Iterable[str]) -> TargetRates:
        """Rates from ``TOPIC=N/s`` items (``N/min`` too; topic ``*``: every other topic).

        Raises:
            ConfigError: an item of another form, a rate out of range, a topic twice.
        """
        per_topic: list[tuple[str, float]] = []
        default: float | None = None
        for item in items:
            topic, sep, text = item.partition("=")
            topic = topic.strip()
            match = _RATE.match(text)
            if not sep or not topic or match is None:
                raise ConfigError(
                    f"--target-rate {item!r}: write TOPIC=N/s (or N/min), e.g. "
                    f"orders=2000/s, or {DEFAULT_TOPIC}=N/s for every other topic"
                )
            rate = float(match.group(1)) / (1 if match.group(2).startswith("s") else 60)
            if topic == DEFAULT_TOPIC:
                if default is not None:
                    raise ConfigError(f"--target-rate {DEFAULT_TOPIC}=... is given twice")
                default = rate
            else:
                per_topic.append((topic, rate))
        return cls(tuple(per_topic), default)


def _format_rate(rate: float) -> str:
    return f"{rate:g}/s"
