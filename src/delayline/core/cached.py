"""An answer that stands for a while: what a scrape or a probe asks of Kafka is asked at
most once per period, however often it is read."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from delayline.core.clock import Clock, SystemClock

T = TypeVar("T")


class Cached(Generic[T]):
    """``ask()``, at most once every ``every_ms``; the answer in between.

    Thread-safe: one call at a time, the others wait for its answer.

    Args:
        ask: What to call.
        every_ms: How long an answer stands.
        clock: "Now".
        keep: Whether an answer is kept (one that is not is asked again on the next
            read): by default every answer is.
    """

    def __init__(
        self,
        ask: Callable[[], T],
        every_ms: int,
        clock: Clock | None = None,
        keep: Callable[[T], bool] = lambda _answer: True,
    ) -> None:
        self.ask = ask
        self.every_ms = every_ms
        self.clock = clock or SystemClock()
        self.keep = keep
        self._lock = threading.Lock()
        self._answer: tuple[int, T] | None = None

    def __call__(self) -> T:
        now_ms = self.clock.now_ms()
        with self._lock:
            if self._answer is not None and now_ms - self._answer[0] < self.every_ms:
                return self._answer[1]
            answer = self.ask()
            self._answer = (now_ms, answer) if self.keep(answer) else None
            return answer
