"""The fire stage on Spark's executors: each task fires its partition of the events.

Each partition has its own transactional producer (``<transactional id>-p<partition>``,
so a restarted pipeline fences the stalled one of the same partition) and its own
marker. A Python worker keeps its producers between batches: initialising
transactions costs a round trip to the transaction coordinator per batch otherwise.
Only :class:`~delayline.fire.partition.PartitionReport` rows travel back to the driver.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import socket
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from delayline.contract import events as r
from delayline.core.arrow_workers import refuse_pandas
from delayline.core.clock import SystemClock, wake_slot
from delayline.core.faults import FIRE_BEFORE_COMMIT, FIRE_COMMITTED, pause_at
from delayline.core.identifiers import partition_transactional_id
from delayline.core.logs import log_to_stderr
from delayline.core.timing import warn_if_slow
from delayline.fire.handover import POSITION, Handover, handed_mask, render_handover
from delayline.fire.partition import PartitionReport, fire_rows
from delayline.fire.rewrite import fill_rewrites
from delayline.fire.transactional import FireConfig, TransactionalFirer
from delayline.holds.fold import burst_raise_ms, raise_ms
from delayline.holds.hold import RunSettings

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from delayline.holds.hold import MakeEvents

log = logging.getLogger(__name__)

REPORT_DDL = (
    "partition INT, counts STRING, lateness_ms ARRAY<BIGINT>, "
    "missed_lateness_ms ARRAY<BIGINT>, timers ARRAY<BIGINT>, timer_counts ARRAY<BIGINT>, "
    "notes ARRAY<STRING>, "
    "replay BOOLEAN, executor STRING"
)


@dataclass(frozen=True, slots=True)
class FireJob:
    """What every task of one batch needs (shipped to the executors with the task).

    Attributes:
        config: The pipeline settings.
        run: The run id (query name and checkpoint id).
        batch_id: Spark's batch id.
        refresh: Read the markers afresh: the batch may have been committed already
            (the first batch after a start can be a replay).
        shared: Another process may commit this run's batches (the hold's
            ``finished_by_others``): a producer new to a partition reads the markers.
        events: Makes a task's events from the records it maps, in the same task
            (:meth:`delayline.holds.hold.Hold.python_events`); ``None``: the frame
            fired holds the events.
        plan: The mark of the tombstones it hands over
            (:attr:`delayline.holds.hold.Hold.tombstone_mark`); ``None``: unmarked.
    """

    config: RunSettings
    run: str
    batch_id: int
    refresh: bool
    shared: bool = False
    events: MakeEvents | None = None
    plan: str | None = None


def fire_on_executors(events: DataFrame, job: FireJob) -> list[PartitionReport]:
    """Fire every partition of ``events`` in a Spark task (events, or the records
    ``job.events`` makes them from in the task); the partitions' reports.

    Raises:
        Exception: whatever failed a task (a :class:`FireError` inside a Spark error):
            the batch is not committed where it failed, and its replay retries it.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        refuse_pandas()
        yield _fire_task(job, batches if job.events is None else job.events(batches))

    rows = events.mapInArrow(run, REPORT_DDL).collect()
    return [
        PartitionReport(
            partition=int(row["partition"]),
            counts=Counter(json.loads(row["counts"])),
            lateness_ms=list(row["lateness_ms"]),
            missed_lateness_ms=list(row["missed_lateness_ms"]),
            timers=dict(zip(row["timers"], row["timer_counts"], strict=True)),
            notes=list(row["notes"]),
            replay=bool(row["replay"]),
            executor=str(row["executor"]),
        )
        for row in rows
    ]


_FIRERS: dict[str, TransactionalFirer] = {}
"""This worker process's producers, by transactional id."""


class _LastUser:
    """Which process of this machine made the newest producer of each transactional id.

    Spark runs a partition's task in whichever Python worker is free, so the workers of
    one executor take turns with a partition's transactional id, and each new producer
    fences the one before. A worker asks here before it reuses its own: a file per id
    under the temporary directory names the last maker. Another machine's worker (a
    cluster) is not seen; its fencing is then found by the attempt, as before.
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.gettempdir()) / "delayline-producers"

    def _path(self, tx_id: str) -> Path:
        return self.root / hashlib.sha256(tx_id.encode()).hexdigest()[:32]

    @staticmethod
    def _token(firer: TransactionalFirer) -> str:
        return f"{os.getpid()}:{id(firer)}"

    def claim(self, tx_id: str, firer: TransactionalFirer) -> None:
        try:
            self.root.mkdir(exist_ok=True)
            staged = self._path(tx_id).with_suffix(f".{os.getpid()}")
            staged.write_text(self._token(firer))
            os.replace(staged, self._path(tx_id))
        except OSError as exc:  # only an optimisation: the attempt finds fencing too
            log.debug("cannot record the producer of %s: %s", tx_id, exc)

    def holds(self, tx_id: str, firer: TransactionalFirer) -> bool:
        try:
            return self._path(tx_id).read_text() == self._token(firer)
        except OSError:
            return True  # not known: use it, and let the attempt judge


_LAST_USER = _LastUser()


def _fire_task(job: FireJob, batches: Iterator[pa.RecordBatch]) -> pa.RecordBatch:
    import pyarrow as pa  # noqa: PLC0415 - executor side only
    from pyspark import TaskContext  # noqa: PLC0415

    log_to_stderr()
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    retried = context is not None and context.attemptNumber() > 0
    report = PartitionReport(partition)
    received = list(batches)
    events = pa.Table.from_batches(received) if received else None
    if events is not None and events.num_rows:
        split = split_events(events, job.config, job.batch_id, job.plan)
        split.rows = fill_rewrites(split.rows, job.config.topology.bootstrap_servers)
        if split.rows or split.handover:
            pause_at(FIRE_BEFORE_COMMIT)  # crash tests only (delayline.core.faults)
            report = _fire(job, split, partition, refresh=job.refresh or retried)
            pause_at(FIRE_COMMITTED)  # crash tests only (delayline.core.faults)
        report.counts.update(split.counts)
        report.timers = split.timers
    return pa.RecordBatch.from_pylist(
        [
            {
                "partition": partition,
                "counts": json.dumps(dict(report.counts)),
                "lateness_ms": report.lateness_ms,
                "missed_lateness_ms": report.missed_lateness_ms,
                "timers": list(report.timers),
                "timer_counts": list(report.timers.values()),
                "notes": report.notes,
                "replay": report.replay,
                "executor": executor_label(),
            }
        ],
        schema=_report_schema(),
    )


@dataclass(slots=True)
class Split:
    """One partition's events of a batch as the fire stage takes them.

    Attributes:
        rows: The events fired row by row (dead letters, rewrites, retirements,
            schedules past due, deliveries without a lead...), as dicts with their
            :data:`~delayline.fire.handover.POSITION`.
        handover: The raised schedules handed to the committer, rendered column-wise.
        counts: Counts of the kinds that are only counted (planned, updated...).
        timers: The wake slots of new timers (set the lead before their due times, or a
            burst's earlier: :func:`_timers`), to how many timers each holds.
    """

    rows: list[dict[str, Any]]
    handover: Handover
    counts: Counter[str]
    timers: dict[int, int]


def split_events(
    events: pa.Table, settings: RunSettings, batch_id: int, plan: str | None = None
) -> Split:
    """Split ``events`` (one partition's, of batch ``batch_id``; tombstones marked with
    ``plan``, if any) by Arrow compute: most
    events of a busy batch are bookkeeping (planned, updated...) or schedules handed
    over, and neither becomes a row dict."""
    import numpy as np  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    events = events.append_column(POSITION, pa.array(np.arange(events.num_rows)))
    kinds = events.column("kind")
    handed = handed_mask(events, settings.lead_ms)
    handover = render_handover(
        events.filter(handed),
        settings.inflight_topic_name,
        batch_id,
        settings.inflight_partitions,
        plan,
    )
    writes = pc.is_in(kinds, value_set=pa.array(_ROW_KINDS))
    rows = events.filter(pc.and_(writes, pc.invert(handed))).to_pylist()
    counts: Counter[str] = Counter()
    for item in pc.value_counts(events.filter(pc.invert(writes)).column("kind")).to_pylist():
        counts[str(item["values"])] += int(item["counts"])
    return Split(rows, handover, counts, _timers(events, settings.lead_ms))


def _timers(events: pa.Table, lead_ms: int) -> dict[int, int]:
    """The wake slots of the timers ``events`` set, to how many each holds: each PLANNED
    or UPDATED version's at its raise time, unless an EARLY event moves it to its burst's
    (or, that time come, raised it in the batch: no timer)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    def due_times(frame: pa.Table) -> list[tuple[int, int]]:
        found = pc.value_counts(pc.drop_null(frame.column("due_ms"))).to_pylist()
        return [(int(item["values"]), int(item["counts"])) for item in found]

    kinds = events.column("kind")
    timers: Counter[int] = Counter()
    for due, n in due_times(events.filter(pc.is_in(kinds, value_set=pa.array(r.TIMER_KINDS)))):
        timers[wake_slot(raise_ms(due, lead_ms))] += n
    early = events.filter(pc.equal(kinds, str(r.Kind.EARLY)))
    if early.num_rows:
        at_ms = pc.max(early.column("at_ms")).as_py()  # the batch time: one per batch
        for due, n in due_times(early):
            timers[wake_slot(raise_ms(due, lead_ms))] -= n
            if (burst_ms := burst_raise_ms(due, lead_ms)) > at_ms:  # else raised in the batch
                timers[wake_slot(burst_ms)] += n
    return {slot: n for slot, n in sorted(timers.items()) if n > 0}


_ROW_KINDS = [r.Kind.RAISE, r.Kind.DEAD, r.Kind.REWRITE, r.Kind.RETIRE, r.Kind.MISSED, r.Kind.ROUTE]
"""Kinds the fire stage writes or needs (the rest are only counted)."""


def _fire(job: FireJob, split: Split, partition: int, *, refresh: bool) -> PartitionReport:
    config = job.config
    tx_id = partition_transactional_id(config.transactional_id, partition)
    firer = _FIRERS.get(tx_id)
    if firer is not None and not _LAST_USER.holds(tx_id, firer):
        # Another worker process of this machine fired this partition since: its
        # producer fenced ours, and writing with ours would fail (a flush of a fenced
        # producer hung for 30 s here) before a new one is made anyway.
        _FIRERS.pop(tx_id, None)
        firer.close()
        firer = None
    fresh = firer is None
    if firer is None:
        with warn_if_slow(log, f"partition {partition}: a new producer"):
            firer = _FIRERS[tx_id] = new_firer(config, tx_id)
        _LAST_USER.claim(tx_id, firer)
    # A producer new here fenced nothing that committed before it: another process
    # (a pipeline finishing this one's batch) may have, so the markers are read.
    refresh = refresh or (fresh and job.shared)

    def fire(firer: TransactionalFirer, refresh: bool) -> PartitionReport:
        return fire_rows(split.rows, partition, job.batch_id, job.run, config, firer,
                         SystemClock(), refresh=refresh, handover=split.handover,
                         plan=job.plan)  # fmt: skip

    try:
        rows = len(split.rows) + len(split.handover)
        with warn_if_slow(log, f"partition {partition}: firing {rows} rows"):
            return fire(firer, refresh)
    except Exception as exc:  # any failure: one more attempt with a new producer
        # A kept producer can have been fenced by another worker that fired this
        # partition since, or be left unusable: confluent-kafka's flush returned NULL
        # without an exception (SystemError) in Python workers here, now and then. A new
        # producer with the same transactional id aborts whatever the old one left
        # open, and the markers are read afresh, so an attempt that did commit is not
        # written twice. A second failure fails the task (and the batch).
        log.warning(
            "partition %d: %s producer failed (%s: %s); retrying with a new one",
            partition,
            "new" if fresh else "kept",
            type(exc).__name__,
            exc,
        )
    _FIRERS.pop(tx_id, None)
    firer = _FIRERS[tx_id] = new_firer(config, tx_id)
    _LAST_USER.claim(tx_id, firer)
    return fire(firer, refresh=True)


def deliver_as(
    events: pa.Table,
    settings: RunSettings,
    partition: int,
    batch_id: int,
    run: str,
    transactional_id: str,
) -> str:
    """Deliver another run's batch of one partition as that run (see
    :class:`delayline.holds.hold.Deliver`); what was written, for the log."""
    split = split_events(events, settings, batch_id)
    if not (split.rows or split.handover):
        return "nothing to write"
    firer = new_firer(settings, transactional_id)
    try:
        report = fire_rows(
            split.rows,
            partition,
            batch_id,
            run,
            settings,
            firer,
            SystemClock(),
            refresh=True,
            handover=split.handover,
        )
    finally:
        firer.close()
    return "already committed by it" if report.replay else f"wrote {dict(report.counts)}"


def new_firer(config: RunSettings, tx_id: str) -> TransactionalFirer:
    topology = config.topology
    return TransactionalFirer(
        FireConfig(
            topology.bootstrap_servers,
            topology.commits_topic,
            tx_id,
            allowed_targets=topology.allowed_target_topics,
            last_topics=frozenset(topology.input_topics),
        )
    )


def _report_schema() -> pa.Schema:
    import pyarrow as pa  # noqa: PLC0415

    longs = pa.list_(pa.int64())
    return pa.schema(
        [
            ("partition", pa.int32()),
            ("counts", pa.string()),
            ("lateness_ms", longs),
            ("missed_lateness_ms", longs),
            ("timers", longs),
            ("timer_counts", longs),
            ("notes", pa.list_(pa.string())),
            ("replay", pa.bool_()),
            ("executor", pa.string()),
        ]
    )


@functools.cache
def executor_label() -> str:
    """Which executor runs this task: ``<host>/<executor id>``.

    A standalone worker names the executor in the log URLs it gives it
    (``SPARK_LOG_URL_STDERR``, ``...&executorId=3&...``); elsewhere (local mode, other
    cluster managers) the PID of the Python worker daemon stands for it, one per
    executor JVM. Read once per worker process: a worker serves one executor for life.
    """
    found = re.search(r"[?&]executorId=([^&]+)", os.environ.get("SPARK_LOG_URL_STDERR", ""))
    executor = found.group(1) if found else f"pid-{os.getppid()}"
    return f"{socket.gethostname()}/{executor}"
