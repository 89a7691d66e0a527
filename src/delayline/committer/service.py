"""The committer's thread: its sessions, each started afresh after a failure, and what
it tells of itself (:mod:`delayline.committer` says what a committer does)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from delayline.committer.arrivals import Arrivals
from delayline.committer.broker_clock import BrokerTime
from delayline.committer.config import CommitterConfig, CommitterStatus
from delayline.committer.pacing import Pacer
from delayline.committer.session import Kept, Session, Stopping
from delayline.committer.tally import Tally
from delayline.core.clock import Clock, SystemClock
from delayline.errors import CommitterNameTakenError, DelaylineError, FormatVersionError
from delayline.fire.report import Delivered

log = logging.getLogger(__name__)

RETRY_MS = 1_000
"""How long the committer waits before starting afresh after a failure."""
CAUGHT_UP_POLL_S = 0.02
"""How often :meth:`Committer.wait_caught_up` looks."""
FENCES_WINDOW_MS = 60_000
"""A committer fenced under its name twice within this stops: another committer runs
under the same name (the two would fence each other at every start). Once is taken for
its own consumer joining again after a broker pause, and it starts afresh."""


class Committer:
    """Delivers what the in-flight topic holds at its due time (a thread).

    Args:
        config: The committer's settings.
        on_delivered: Called (on the committer's thread) after each committed group.
        clock: The host's time.
        arrivals: Told what its watch reads that the pipeline must read
            (:mod:`delayline.committer.arrivals`): the pipeline's own committer only.
    """

    def __init__(
        self,
        config: CommitterConfig,
        on_delivered: Callable[[Delivered], None] = lambda _d: None,
        clock: Clock | None = None,
        arrivals: Arrivals | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self._kept = Kept(
            time=BrokerTime(config.bootstrap_servers, config.inflight_topic, self.clock),
            pacer=Pacer(config.target_rates),
            tally=Tally(on_delivered, config.write_ahead_ms, config.max_write_ahead_ms),
            stopping=Stopping(),
            ready=threading.Event(),
            # Every lane of four partitions opened at once (a take-over's fence).
            fences=ThreadPoolExecutor(4 * config.lanes, thread_name_prefix="delayline-fence"),
            lookups=ThreadPoolExecutor(1, thread_name_prefix="delayline-lookups"),
            notices=ThreadPoolExecutor(1, thread_name_prefix="delayline-notice"),
            arrivals=arrivals,
        )
        self._thread = threading.Thread(target=self._run, name="delayline-committer", daemon=True)
        self._session: Session | None = None
        """The current session (the last one, between two)."""
        self._sessions = 0
        self._fenced_at: float | None = None
        """When the group last fenced this committer's name (monotonic seconds)."""
        self._last_failure: str | None = None
        """What ended the last session, if a failure did (until one is ready again)."""
        self.failure: DelaylineError | None = None
        """Why the committer stopped by itself, if it did (it starts afresh after any
        other failure)."""

    def start(self) -> None:
        """Measure the broker's clock, then start delivering.

        Raises:
            ClockSkewError: the host's and the broker's clocks disagree too much.
        """
        self._kept.time.measure()
        self._thread.start()

    def status(self) -> CommitterStatus:
        """How it is doing (safe from any thread)."""
        session = self._session
        pacer = self._kept.pacer
        pacing = tuple(sorted((t, replace(p)) for t, p in list(pacer.stats.items())))
        reviews = self._kept.reviews
        if session is None:
            return CommitterStatus(
                self.config.name, (), 0, self._kept.tally.delivered, pacing,
                reviews_written=reviews.written, reviews_dropped=reviews.dropped,
            )  # fmt: skip
        return CommitterStatus(
            self.config.name,
            session.slots.owned,
            len(session.plan) + session.slots.in_lanes,
            self._kept.tally.delivered,
            pacing,
            session.withholding.remembered(),
            reviews.written,
            reviews.dropped,
        )

    def not_ready(self) -> str | None:
        """Why the committer is not delivering, or ``None`` when it is (for ``/readyz``;
        safe from any thread): it stopped (see :attr:`failure`), it starts afresh after a
        failure, or it is reading its in-flight partitions to their ends."""
        if self.failure is not None:
            return f"the committer stopped: {self.failure}"
        if not self._thread.is_alive():
            return "the committer is not running"
        if self._kept.ready.is_set():
            return None
        if self._last_failure is not None:
            return f"the committer starts afresh after a failure ({self._last_failure})"
        return "the committer is reading its in-flight partitions to their ends"

    def not_alive(self) -> str | None:
        """Why the committer is dead, or ``None`` while it lives (for ``/healthz``; safe
        from any thread): it stopped by itself (see :attr:`failure`) or its thread ended.
        Not yet started, starting afresh after a failure, or waiting for Kafka, it lives:
        only ``/readyz`` tells those."""
        if self.failure is not None:
            return f"the committer stopped: {self.failure}"
        if self._thread.ident is not None and not self._thread.is_alive():
            return "the committer's thread has ended"
        return None

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait, at most ``timeout_s``, until the committer has read its partitions to
        their ends; whether it has (safe from any thread)."""
        return self._kept.ready.wait(timeout_s)

    def wait_caught_up(self, timeout_s: float) -> int:
        """Wait, at most ``timeout_s``, until the committer is ready and has delivered
        everything it read (what was handed over before it started is due within the
        lead); returns how many schedules remain (safe from any thread)."""
        deadline = time.monotonic() + timeout_s
        self._kept.ready.wait(timeout_s)
        while (left := self.status().pending) and time.monotonic() < deadline:
            time.sleep(CAUGHT_UP_POLL_S)
        return left

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the committer to stop by itself (see
        :attr:`failure`); whether it did."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def stop(self, drain_timeout_s: float = 0.0) -> None:
        """Deliver what is pending for up to ``drain_timeout_s``, then stop. What is left
        is delivered by the next start."""
        stopping = self._kept.stopping
        stopping.drain_until = time.monotonic() + drain_timeout_s
        stopping.asked.set()
        if self._thread.is_alive():
            self._thread.join(drain_timeout_s + 30)
        self._kept.lookups.shutdown(wait=False)
        self._kept.notices.shutdown(wait=False)
        self._kept.fences.shutdown(wait=False)

    def _run(self) -> None:
        while True:
            try:
                if self._sessions:  # measured again: the host's clock may have been stepped
                    self._kept.time.measure()
                self._sessions += 1
                self._kept.ready.clear()
                self._session = None  # its figures are no longer true
                self._session = Session(self.config, self._kept)
                self._session.run()
                return
            except Exception as exc:
                self._kept.ready.clear()
                self._last_failure = f"{type(exc).__name__}: {exc}"
                if not self._starts_afresh(exc):
                    return
            if self._kept.stopping.asked.wait(RETRY_MS / 1000):
                return

    def _starts_afresh(self, exc: Exception) -> bool:
        """Log what ended a session; whether the committer starts afresh (not when its
        name is fenced a second time: another committer runs under it, nor when it met a
        format of a newer delayline: starting afresh would meet it again)."""
        if isinstance(exc, FormatVersionError):
            self.failure = exc
            log.error("committer %s stopped: %s", self.config.name, exc)
            return False
        if not isinstance(exc, CommitterNameTakenError):  # start afresh, nothing is lost
            log.warning(
                "committer failed (%s: %s); starting afresh in %d ms",
                type(exc).__name__,
                exc,
                RETRY_MS,
            )
            return True
        if self._fenced_again():  # starting afresh would fence the other one
            self.failure = CommitterNameTakenError(
                f"{exc} twice within {FENCES_WINDOW_MS // 1000} s: another committer of the "
                f"group runs under this one's name ({self.config.name}); this one stops: "
                "give each committer its own --name"
            )
            log.error("committer %s stopped: %s", self.config.name, self.failure)
            return False
        log.warning(
            "committer %s: %s (its own consumer joining again after a broker pause, or a "
            "namesake: fenced again within %d s, it stops); starting afresh in %d ms",
            self.config.name,
            exc,
            FENCES_WINDOW_MS // 1000,
            RETRY_MS,
        )
        return True

    def _fenced_again(self) -> bool:
        """Note a fence of this committer's name; whether one came within
        :data:`FENCES_WINDOW_MS` before it (a namesake: two committers under one name
        fence each other at every start, its own consumer's new join does not)."""
        now = time.monotonic()
        again = self._fenced_at is not None and now - self._fenced_at < FENCES_WINDOW_MS / 1000
        self._fenced_at = now
        return again
