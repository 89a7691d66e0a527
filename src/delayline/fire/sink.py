"""The fire stage as a ``foreachBatch`` sink: the hold's events fired where they are.

The driver starts one Spark job per micro-batch: every partition of the events is
fired by its own task (:mod:`delayline.fire.tasks`), in its own transaction, and only
the partitions' reports come back. The driver merges them into one
:class:`BatchReport`, tells the waker about new timers and logs what went to the
dead-letter topic.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from delayline.core.clock import Clock, SystemClock, wake_slot
from delayline.core.identifiers import run_id
from delayline.fire.partition import PartitionReport, merge
from delayline.fire.report import BatchReport
from delayline.fire.tasks import FireJob, fire_on_executors
from delayline.holds.hold import Hold, RunSettings

log = logging.getLogger(__name__)

FirePartitions = Callable[[Any, FireJob], Sequence[PartitionReport]]
"""Fires a batch's events (as the hold returns them, or as ``FireJob.events`` makes them
from the frame's records in each task); the reports of its partitions."""


class FireSink:
    """Callable handed to ``foreachBatch``. Runs on the driver.

    Args:
        config: The pipeline settings.
        query_id: Returns the checkpoint's query id, which names the current run;
            markers of an earlier run (before ``--rebuild``) do not apply.
        on_batch: Called with each batch's report.
        on_timers: Called with the wake slots of the timers each batch set (their
            raise times), to how many each holds (after the batch is fired; a replay
            reports them again).
        on_wakes: Called with the hold's own wake times (:meth:`Hold.wake_times`: a
            lease's end is not a timer's raise time); ``None``: given to ``on_timers``.
        hold: Where the batch's events come from, told when the batch is done.
        clock: The time source of the report.
        fire_partitions: How events are fired; Spark tasks by default (tests pass a
            local function).
    """

    def __init__(
        self,
        config: RunSettings,
        query_id: Callable[[], str],
        on_batch: Callable[[BatchReport], None] = lambda _report: None,
        on_timers: Callable[[Mapping[int, int]], None] | None = None,
        *,
        on_wakes: Callable[[list[int]], None] | None = None,
        hold: Hold,
        clock: Clock | None = None,
        fire_partitions: FirePartitions = fire_on_executors,
    ) -> None:
        self.config = config
        self.hold = hold
        self.clock = clock or SystemClock()
        self.query_id = query_id
        self.on_batch = on_batch
        self.on_timers = on_timers
        self.on_wakes = on_wakes
        self.fire_partitions = fire_partitions
        self._tried: int | None = None
        """The highest batch id this sink was called with (a failed one included)."""

    def __call__(self, frame: Any, batch_id: int) -> None:
        made = self.hold.python_events(frame, batch_id)
        if made is None:
            events, make_events = self.hold.batch_events(frame, batch_id), None
        else:
            events, make_events = made
        run = run_id(self.config.query_name, self.query_id())
        # The first batch after a start can be the replay of one committed before; so
        # can one tried before: the query failed in it and was started again, and a
        # partition may have committed it (Kafka took the commit as it went away).
        replay = self._tried is None or batch_id <= self._tried
        self._tried = batch_id if self._tried is None else max(self._tried, batch_id)
        job = FireJob(
            self.config,
            run,
            batch_id,
            refresh=replay,
            shared=self.hold.finished_by_others,
            events=make_events,
            plan=self.hold.tombstone_mark,
        )
        parts = self.fire_partitions(events, job)
        report = merge(batch_id, parts)
        timers: Counter[int] = Counter()
        if not self.hold.wakes_itself:
            for part in parts:
                timers.update(part.timers)
        wakes = [wake_slot(at) for at in self.hold.wake_times()]
        if self.on_wakes is None:
            timers.update(wakes)
            wakes = []
        if timers and self.on_timers is not None:
            self.on_timers(timers)
        if wakes and self.on_wakes is not None:
            self.on_wakes(wakes)
        if report.committed:
            self.hold.after_commit(batch_id)
        for part in sorted(parts, key=lambda p: p.partition):
            for note in part.notes:
                log.info("batch %d: %s", batch_id, note)
        report.finished_ms = self.clock.now_ms()
        self.on_batch(report)
