"""The fire stage's report of a batch: lateness of on-time and past-due deliveries kept
apart, refused deliveries not counted as fired, one log line per dead letter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from delayline.contract import ConsumedRecord, OutgoingRecord
from delayline.contract import events as r
from delayline.contract.topology import Topology
from delayline.core.clock import ManualClock
from delayline.fire.firing import Firing
from delayline.fire.partition import PartitionReport, fire_rows
from delayline.fire.report import REFUSED, BatchReport
from delayline.fire.sink import FireSink
from delayline.fire.tasks import FireJob
from delayline.fire.transactional import Committed, FireConfig, TransactionalFirer
from delayline.holds.memory import MemoryHold
from delayline.pipeline.config import PipelineConfig

NOW_MS = 1_800_000_000_000
DAY_MS = 86_400_000


class ListHold(MemoryHold):
    """The memory hold fed a list of records as the batch instead of a DataFrame."""

    def batch_events(self, frame: Any, batch_id: int) -> Any:
        return [r.event_row(e) for e in self.offer(frame, self.clock.now_ms())]


class FakeFirer(TransactionalFirer):
    """Refuses every delivery to topic ``denied``; a batch id seen before is a replay."""

    def __init__(self) -> None:  # no producer, no cluster
        self.config = FireConfig("kafka:9092", "commits", "tx")
        self.batches: list[list[OutgoingRecord | Firing]] = []
        self.done: set[int] = set()

    def commit_batch(
        self,
        run: str,
        batch_id: int,
        records: Sequence[OutgoingRecord | Firing],
        *,
        refresh: bool = False,
        also: str | None = None,
    ) -> Committed:
        if batch_id in self.done:
            return Committed(replay=True)
        self.done.add(batch_id)
        self.batches.append(list(records))
        refused = {
            i: "delivery to topic 'denied' refused: TOPIC_AUTHORIZATION_FAILED"
            for i, item in enumerate(records)
            if isinstance(item, Firing) and item.schedule.target_topic == "denied"
        }
        return Committed(replay=False, refused=refused)


def schedule(offset: int, sid: str, due_ms: int, target: str = "out") -> ConsumedRecord:
    epoch = f"{due_ms // 1000}.{due_ms % 1000:03d}".encode()
    headers = (("scheduler-epoch", epoch), ("scheduler-target-topic", target.encode()))
    return ConsumedRecord("sched", 0, offset, NOW_MS, sid.encode(), b"secret payload", headers)


def sink_with(
    max_lateness_ms: int | None = None,
) -> tuple[FireSink, ListHold, ManualClock, list[BatchReport]]:
    clock = ManualClock(NOW_MS)
    # Lead 0: the batch delivers what it raises (the committer's share is tested apart).
    config = PipelineConfig(
        Topology(history_topic=None), max_lateness_ms=max_lateness_ms, lead_ms=0
    )
    hold = ListHold(config, clock=clock)
    reports: list[BatchReport] = []
    firer = FakeFirer()

    def fire_here(rows: Any, job: FireJob) -> list[PartitionReport]:
        """One partition, fired in this process (what a Spark task does)."""
        return [fire_rows(rows, 0, job.batch_id, job.run, job.config, firer, clock)]

    sink = FireSink(
        config, lambda: "run", reports.append, hold=hold, clock=clock, fire_partitions=fire_here
    )
    return sink, hold, clock, reports


def test_past_due_and_refused_deliveries_stay_out_of_the_lateness_of_on_time_ones(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="delayline.fire.sink")
    sink, _hold, clock, reports = sink_with()
    sink(
        [schedule(0, "on-time", NOW_MS + 5_000), schedule(1, "refused", NOW_MS + 5_000, "denied")],
        0,
    )
    clock.advance(6_000)
    invalid = ConsumedRecord("sched", 0, 3, NOW_MS, b"junk", b"secret payload", ())
    sink([schedule(2, "years-late", NOW_MS - 2_517 * DAY_MS), invalid], 1)
    first, second = reports
    assert first.counts == {r.Kind.PLANNED: 2}
    assert second.counts[r.Kind.RAISE] == 2  # on-time and years-late; the refused one is not
    assert second.counts[REFUSED] == 1
    assert second.counts[r.Kind.MISSED] == 1
    assert second.counts[r.INVALID] == 1
    assert second.lateness_ms == [1_000]  # on-time: due 5 s after planning, fired at 6 s
    assert second.missed_lateness_ms == [2_517 * DAY_MS + 6_000]
    summary = second.summary()
    assert (summary["deliveries"], summary["lateness_max_ms"]) == (2, 1_000)
    assert summary["missed_deliveries"] == 1
    dead = [m for m in caplog.messages if "dead-lettered" in m]
    assert dead == [
        "batch 1: schedule 'refused' (from sched/0/1) dead-lettered: "
        "delivery to topic 'denied' refused: TOPIC_AUTHORIZATION_FAILED",
        "batch 1: schedule 'junk' (from sched/0/3) dead-lettered: missing header scheduler-epoch",
    ]
    assert not any("secret" in m for m in caplog.messages)  # never a payload


def test_an_expired_schedule_is_one_log_line_and_no_delivery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="delayline.fire.sink")
    sink, _hold, _clock, reports = sink_with(max_lateness_ms=3_600_000)
    keyless = ConsumedRecord("sched", 0, 1, NOW_MS, None, b"secret payload", ())
    sink([schedule(0, "two-hours-late", NOW_MS - 7_200_000), keyless], 0)
    (report,) = reports
    assert report.counts == {r.Kind.MISSED: 1, r.EXPIRED: 1, r.INVALID: 1}
    assert (report.lateness_ms, report.missed_lateness_ms) == ([], [])
    assert [m for m in caplog.messages if "dead-lettered" in m] == [
        "batch 0: record sched/0/1 dead-lettered: missing schedule id (record key is empty)",
        "batch 0: schedule 'two-hours-late' (from sched/0/0) dead-lettered: expired",
    ]


def test_a_replayed_batch_reports_no_lateness_and_logs_no_dead_letter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="delayline.fire.sink")
    sink, _hold, _clock, reports = sink_with()
    batch = [schedule(0, "now", NOW_MS), ConsumedRecord("sched", 0, 1, NOW_MS, b"x", b"v", ())]
    sink(batch, 0)
    sink(batch, 0)  # Spark replays batch 0 after a crash
    first, replay = reports
    assert first.committed
    assert first.missed_lateness_ms == [0]
    assert not replay.committed
    assert (replay.lateness_ms, replay.missed_lateness_ms) == ([], [])
    assert REFUSED not in replay.counts
    assert len([m for m in caplog.messages if "dead-lettered" in m]) == 1


def test_a_batch_tried_before_reads_the_markers_again() -> None:
    """The first batch, and one whose earlier try failed (the query was started again in
    the same process), may have been committed by a partition already: its tasks read the
    markers; a batch seen for the first time does not."""
    config = PipelineConfig(Topology(history_topic=None), lead_ms=0)
    hold = ListHold(config, clock=ManualClock(NOW_MS))
    asked: list[tuple[int, bool]] = []
    failing = {3}

    def fire_here(rows: Any, job: FireJob) -> list[PartitionReport]:
        asked.append((job.batch_id, job.refresh))
        if job.batch_id in failing:
            failing.discard(job.batch_id)
            raise RuntimeError("Kafka went away as the batch committed")
        return [PartitionReport(0)]

    sink = FireSink(config, lambda: "run", hold=hold, fire_partitions=fire_here)
    sink([], 1)
    sink([], 2)
    with pytest.raises(RuntimeError):
        sink([], 3)
    sink([], 3)  # the query started again: batch 3 replayed
    sink([], 4)
    assert asked == [(1, True), (2, False), (3, False), (3, True), (4, False)]


class PythonListHold(ListHold):
    """Makes its events in the fire stage's task (:meth:`Hold.python_events`)."""

    made_in: list[str]

    def python_events(self, frame: Any, batch_id: int) -> Any:
        def make(records: Any) -> Any:
            self.made_in.append("the fire task")
            return iter(ListHold.batch_events(self, records, batch_id))

        return frame, make

    def batch_events(self, frame: Any, batch_id: int) -> Any:
        raise AssertionError("the sink fired batch_events of a hold that makes its own")


def test_a_hold_that_makes_its_events_in_python_has_them_made_in_the_fire_task() -> None:
    clock = ManualClock(NOW_MS)
    config = PipelineConfig(Topology(history_topic=None), lead_ms=0)
    hold = PythonListHold(config, clock=clock)
    hold.made_in = []
    reports: list[BatchReport] = []
    firer = FakeFirer()

    def fire_here(records: Any, job: FireJob) -> list[PartitionReport]:
        assert job.events is not None
        rows = list(job.events(records))
        return [fire_rows(rows, 0, job.batch_id, job.run, job.config, firer, clock)]

    sink = FireSink(
        config, lambda: "run", reports.append, hold=hold, clock=clock, fire_partitions=fire_here
    )
    sink([schedule(0, "soon", NOW_MS + 1_000)], 0)
    clock.advance(2_000)
    sink([], 1)
    assert hold.made_in == ["the fire task", "the fire task"]
    assert [report.counts[r.Kind.RAISE] for report in reports] == [0, 1]
    fired = [
        item.schedule.id for batch in firer.batches for item in batch if isinstance(item, Firing)
    ]
    assert fired == ["soon"]
