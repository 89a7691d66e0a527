"""Wake the pipeline only when a timer is due: no empty micro-batches while idle.

Spark runs a micro-batch for every trigger interval when a processing-time
``transformWithState`` has timers, data or not; each empty batch costs about
300-500 ms of CPU on two cores, so an idle pipeline used 55-119% of a core. With
``spark.sql.streaming.noDataMicroBatches.enabled`` off, Spark runs a batch only
when a source has new records. The :class:`Waker` appends one small record to the
pipeline's wake topic when a held timer falls due (and every heartbeat interval, a
backstop); the batch that reads it fires every timer due by its start time, exactly as
an empty batch did.

Where the due times come from:
    * While running: every ``planned`` and ``updated`` event of the hold carries
      its timer's due time, and an ``early`` one moves it to its burst's
      (:func:`delayline.fire.tasks.split_events`, :meth:`Waker.add`).
    * After a restart: what the hold says is pending
      (:meth:`delayline.holds.hold.Hold.pending_due_times`; for the Spark hold, the
      timers stored in the checkpoint, read once with Spark's state data source).
      Until they are loaded the waker wakes the pipeline every trigger interval, as
      Spark itself would, so nothing is late while they load.

Guarantee: every timer reported to the waker gets a wake record at or after its
due time, at most :data:`delayline.core.clock.GRANULARITY_MS` after it while Kafka
takes the writes; a failed write is retried every :data:`RETRY_MS` until one succeeds.
Extra wake records (for cancelled schedules, or from another pipeline) only cost
a batch; they never change what fires.

With a gated source (:mod:`delayline.pipeline.need`), wake records are how every batch
starts: the waker writes one, then opens the gate, when a timer needs raising, when
what the committer's watch read needs reading (:class:`delayline.committer.arrivals.Arrivals`),
and every heartbeat. While the watch does not report (its committer between sessions)
the waker wakes every trigger interval, as Spark would run batches without the gate.

Health follows the need, not a clock: an idle pipeline may run no batch for a heartbeat
(5 minutes by default), and it is ready as long as every batch it was woken for ran
within a minute (:attr:`WakerStats.waiting_since_ms`,
:func:`delayline.pipeline.metrics_server.batch_age`).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Producer

from delayline.committer.arrivals import STALE_MS, Arrivals
from delayline.core.clock import GRANULARITY_MS, Clock, SystemClock, earliest_ms
from delayline.kafka.config import kafka_client_config
from delayline.pipeline.need import (
    Margin,
    Need,
    arrivals_wake_ms,
    timer_wake_ms,
    timers_wake_ms,
)
from delayline.pipeline.wake_plan import WakePlan, next_wake_ms

log = logging.getLogger(__name__)

RETRY_MS = 1_000
"""How soon a wake record Kafka did not take is written again."""
MAX_UNSERVED = 10_000
"""Wakes no batch read yet, remembered (a pipeline this far behind is long not ready)."""


@dataclass(frozen=True, slots=True)
class WakerStats:
    """What the waker did and waits for (``/progress`` and the metrics).

    Attributes:
        wakes: Wake records written since the start.
        margin_ms: How long before a due time it wakes for it now.
        unread: Input records the committer's watch read that no micro-batch was woken
            for yet (``None`` without batching on need).
        waiting_since_ms: Since when a micro-batch is owed: the first wake record no
            finished batch read yet (one planned before it did not), or the first of
            failing writes; ``None`` when none is. Readiness judges the pipeline by it.
        heartbeat_ms: The longest gap between wake records, owed or not.
    """

    wakes: int
    margin_ms: int
    unread: int | None
    waiting_since_ms: int | None = None
    heartbeat_ms: int | None = None


class Waker:
    """Writes wake records to the pipeline's wake topic from a daemon thread.

    Args:
        bootstrap_servers: Kafka bootstrap list.
        topic: The wake topic (the pipeline subscribes to it and drops its records).
        heartbeat_ms: The longest gap between wake records.
        poll_ms: The wake interval until the plan is complete (the trigger
            interval, so the pipeline runs as often as without a waker).
        clock: The time source.
        write: Writes one wake record stamped with the given time and says whether it
            was written; default: to ``topic`` through a Kafka producer. Tests pass
            their own and drive :meth:`tick` with a manual clock, without sleeping.
        need: With a gated source: when batches are needed (timers are woken for a
            margin before their due times, and ``arrivals`` are followed); ``None``:
            each timer at its raise time, as for a source Spark reads whenever it moves.
        arrivals: What the committer's watch read that the pipeline must read (with
            ``need``).
        open_gate: Called after each wake record written: lets the next trigger read.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        heartbeat_ms: int,
        poll_ms: int,
        clock: Clock | None = None,
        write: Callable[[int], bool] | None = None,
        need: Need | None = None,
        arrivals: Arrivals | None = None,
        open_gate: Callable[[], None] | None = None,
    ) -> None:
        self.topic = topic
        self.heartbeat_ms = heartbeat_ms
        self.clock = clock or SystemClock()
        self.wakes_written = 0
        self._poll_ms: int | None = max(poll_ms, GRANULARITY_MS)
        self._plan = WakePlan()
        self._exact = WakePlan()  # the hold's own wake times (wake_at)
        self._cond = threading.Condition()
        self._stopped = False
        self._last_wake_ms = self.clock.now_ms() - heartbeat_ms  # wake at once
        self._retry_at_ms: int | None = None  # after a failed write: the next attempt
        self._need = need
        self._arrivals = arrivals if need is not None else None
        self._open_gate = open_gate
        self._margin = Margin()
        self._timers_memo: tuple[tuple[int, int, int, float], int | None] | None = None
        # When each wake no finished batch read yet was written, oldest first.
        self._unserved: deque[int] = deque()
        self._failing_since_ms: int | None = None  # the first of failing writes
        self._trigger_ms = max(poll_ms, GRANULARITY_MS)
        if self._arrivals is not None:
            self._arrivals.listen(self._replan)
        self._producer: Producer | None = None
        if write is None:
            self._producer = Producer(
                kafka_client_config(bootstrap_servers, **{"linger.ms": 0, "acks": "all"})
            )
        self._write = write or self._produce
        self._thread = threading.Thread(target=self._run, name="delayline-waker", daemon=True)

    def start(self) -> None:
        """Start the thread; it writes a first wake record at once, then one every
        poll interval until :meth:`add` is told the plan is complete."""
        self._thread.start()

    def add(self, due_ms: Mapping[int, int] | Iterable[int], *, complete: bool = False) -> None:
        """Plan wakes for timers due at these times (thread-safe).

        Args:
            due_ms: Due times (raise times) of timers, each once per timer, or to how
                many timers are due then.
            complete: The plan now holds every timer (the checkpoint's were added):
                from now on wake only when planned, not every poll interval.
        """
        counts = due_ms if isinstance(due_ms, Mapping) else Counter(due_ms)
        with self._cond:
            self._plan.add_all(counts)
            if complete:
                self._poll_ms = None
                log.info("waker: %d wake times planned from the checkpoint", len(self._plan))
            self._cond.notify()

    def wake_at(self, at_ms: Iterable[int]) -> None:
        """Plan wakes at these times exactly, not a margin before a due time: the
        hold's own (:meth:`delayline.holds.hold.Hold.wake_times`; thread-safe)."""
        with self._cond:
            for at in at_ms:
                self._exact.add(at)
            self._cond.notify()

    def batch_done(
        self, finished_ms: int, raised: int = 0, planned_ms: int | None = None, read: int = 0
    ) -> None:
        """A micro-batch finished at ``finished_ms`` having raised ``raised`` schedules and
        read ``read`` input records.

        It read every wake written by the time it was planned (``planned_ms``, Spark's
        batch timestamp, taken right after the batch's ends were chosen; ``None``:
        unknown, taken as every wake so far): no batch is owed for those any more, and
        how long it took from the first of them sets the margin and what a raise and a
        read cost.
        A wake is stamped once Kafka took it, so a batch that chose its ends before then
        is not taken to have read it (thread-safe)."""
        with self._cond:
            unserved = self._unserved
            first = unserved[0] if unserved else None
            if first is None or (planned_ms is not None and planned_ms < first):
                return
            while unserved and (planned_ms is None or unserved[0] <= planned_ms):
                unserved.popleft()
            self._margin.observe(finished_ms - first, raised, read)

    def margin_ms(self) -> int:
        """How long before a due time the waker wakes for it now."""
        with self._cond:
            return self._margin.ms()

    def stats(self) -> WakerStats:
        """What it did and waits for (thread-safe)."""
        with self._cond:
            unread = None
            if self._arrivals is not None:
                arrived = self._arrivals.peek()
                unread = 0 if arrived is None else arrived.count
            return WakerStats(
                self.wakes_written,
                self._margin.ms(),
                unread,
                waiting_since_ms=earliest_ms(
                    self._unserved[0] if self._unserved else None, self._failing_since_ms
                ),
                heartbeat_ms=self.heartbeat_ms,
            )

    def _replan(self) -> None:
        with self._cond:
            self._cond.notify()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopped

    def stop(self) -> None:
        """Stop the thread and close the producer."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self._producer is not None:
            self._producer.flush(5)

    def tick(self) -> int:
        """Write a wake record if one is due now; return when the next one is due.

        The thread calls it in a loop; a test calls it directly with a manual clock.
        A failed write is retried :data:`RETRY_MS` later.
        """
        with self._cond:
            now = self.clock.now_ms()
            at = self._next_ms(now)  # once a tick
            if at > now:
                return at
            self._plan.take_due(now)
            self._exact.take_due(now)
        try:
            written = self._write(now)
        except Exception:  # any failure to write means: retry, never end the thread
            log.exception("waker: writing a wake record failed; retrying")
            written = False
        with self._cond:
            if written:
                self._last_wake_ms, self._retry_at_ms = now, None
                self._failing_since_ms = None
                self.wakes_written += 1
                if self._arrivals is not None:
                    arrived = self._arrivals.take()  # the batch woken now reads them
                    log.debug(
                        "waker: woke the pipeline (%d arrived, margin %d ms)",
                        0 if arrived is None else arrived.count,
                        self._margin.ms(),
                    )
                if len(self._unserved) < MAX_UNSERVED:  # beyond: long found not ready
                    self._unserved.append(max(now, self.clock.now_ms()))
            else:
                # Whatever was due stays due: the next record that gets through wakes it.
                self._retry_at_ms = now + RETRY_MS
                if self._failing_since_ms is None:
                    self._failing_since_ms = now
            next_ms = self._next_ms(now)
        if written and self._open_gate is not None:
            try:
                self._open_gate()
            except Exception:  # the gate is in Spark's JVM: a stopping session, say
                log.warning("waker: could not open the pipeline's gate", exc_info=True)
        return next_ms

    def _next_ms(self, now_ms: int) -> int:
        if self._retry_at_ms is not None:
            return self._retry_at_ms
        last, beat, poll = self._last_wake_ms, self.heartbeat_ms, self._poll_ms
        arrivals, need = self._arrivals, self._need
        exact = self._exact.next_ms()
        if arrivals is None or need is None:
            return next_wake_ms(earliest_ms(self._plan.next_ms(), exact), now_ms, last, beat, poll)
        if not arrivals.live(now_ms):
            # Nobody tells what arrived: wake every trigger interval, as Spark would.
            poll = self._trigger_ms
        margin = self._margin.ms()
        # Timers are planned at their raise times; each wake raises every timer due by
        # then, so the earliest one decides when, and how many ride along with it.
        planned = self._timers_wake_ms(need.lead_ms, margin)
        at = next_wake_ms(earliest_ms(planned, exact), now_ms, last, beat, poll)
        if poll is None and (fed := arrivals.fed_ms()) is not None:
            at = min(at, max(now_ms, fed + STALE_MS + 1))  # notice the feed going quiet
        arrived = arrivals.peek()
        if arrived is not None:
            wake = arrivals_wake_ms(arrived, need, margin, read_us=self._margin.read_us())
            at = min(at, max(now_ms, wake))
        return at

    def _timers_wake_ms(self, lead_ms: int, margin_ms: int) -> int | None:
        """:func:`timers_wake_ms` of the plan's timers: the plan's window is walked again
        only once the plan, the margin or a raise's cost changed (each arrival the watch
        tells of plans the next wake again, many times a second)."""
        raise_us = self._margin.raise_us()
        key = (self._plan.version, lead_ms, margin_ms, raise_us)
        if self._timers_memo is not None and self._timers_memo[0] == key:
            return self._timers_memo[1]
        raise_at = self._plan.next_ms()
        planned = None
        if raise_at is not None:
            window = self._plan.window(timer_wake_ms(raise_at, lead_ms, margin_ms))
            planned = timers_wake_ms(window, lead_ms, margin_ms, raise_us)
        self._timers_memo = (key, planned)
        return planned

    def _run(self) -> None:
        while True:
            self.tick()
            with self._cond:
                if self._stopped:
                    return
                # Planned under the lock: an add() or stop() meanwhile wakes the wait.
                now = self.clock.now_ms()
                at = self._next_ms(now)
                if at > now:
                    self._cond.wait((at - now) / 1000)

    def _produce(self, now_ms: int) -> bool:
        errors: list[Any] = []

        def on_delivery(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        assert self._producer is not None  # set whenever _produce is the writer
        try:
            self._producer.produce(
                self.topic, key=b"wake", value=str(now_ms).encode(), on_delivery=on_delivery
            )
        except Exception as exc:  # any failure to queue means: retry
            log.warning("waker: could not queue a wake record: %s", exc)
            return False
        remaining = self._producer.flush(5)
        if errors or remaining:
            log.warning("waker: wake record not written (%s); retrying", errors or "timeout")
            return False
        return True
