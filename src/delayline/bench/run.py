"""One benchmark run: broker, pipeline, load, measurements. Scenarios drive it."""

from __future__ import annotations

import json
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from delayline.bench.sampler import GroupSampler
from delayline.bench.shares import committer_shares
from delayline.client import ClientConfig, Scheduler
from delayline.contract.topology import Topology
from delayline.core.clock import ms_to_datetime
from delayline.core.recurrence import Recurrence
from delayline.core.stats import summary
from delayline.dev.harness import Delivery, DeliveryCollector, PipelineProcess
from delayline.errors import BenchError, WaitTimeoutError
from delayline.holds.kinds import BenchPlace, HoldBench
from delayline.holds.registry import hold_kind
from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.infra.ports import free_port
from delayline.infra.spark_cluster import executors_here
from delayline.kafka.topics import TopicsConfig, create_topic, ensure_topics
from delayline.pipeline.config import DEFAULT_INFLIGHT_PARTITIONS, spark_progress_file

# Input events: schedules and cancels the pipeline accepted from the schedules topic.
INPUT_KINDS = ("planned", "updated", "cancelled", "unknown_cancel", "missed", "short", "invalid",
               "stale")  # fmt: skip
HOLD_ROW_KINDS = (*INPUT_KINDS, "own_tombstone")
"""The counts of a batch report one of which each input row the hold folds gives."""


@dataclass
class BenchEnv:
    """Where a run happens: a broker (own or given), fresh topics, a pipeline."""

    bootstrap: str
    work_dir: Path
    broker: LocalBroker | None = None
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    pipeline: PipelineProcess | None = None
    sampler: GroupSampler | None = None
    broker_sampler: GroupSampler | None = None
    hold: str = "jvm"
    hold_options: Mapping[str, Any] = field(default_factory=dict)
    """The values of the hold's bench flags, by key."""
    hold_bench: HoldBench | None = None
    """The hold's own side of the run (its server, its figures), if it has one."""
    master: str | None = None
    """A Spark cluster's master URL for the pipeline (``None``: local mode)."""
    inflight_partitions: int = DEFAULT_INFLIGHT_PARTITIONS
    """The pipeline's ``--inflight-partitions`` (what the committers split)."""
    committers: list[tuple[PipelineProcess, GroupSampler]] = field(default_factory=list)
    """Committers started beside the pipeline (:mod:`delayline.bench.committers`)."""
    accepted_after_ms: int = 0
    """Batches that finished before this are not the scenario's (a warm-up's):
    :func:`accepted_timeline` leaves them out."""
    idle_by_jvm_thread: dict[str, float] | None = None
    """The JVM's share of the scenario's idle window by thread kind
    (:data:`~delayline.bench.sampler.JVM_THREAD_KINDS`), % of one core."""

    @property
    def schedules_topic(self) -> str:
        return f"bench-{self.run}-schedules"

    @property
    def target_topic(self) -> str:
        return f"bench-{self.run}-target"

    @property
    def warm_up_topic(self) -> str:
        """The target of ``--warm-up``'s schedules (:func:`delayline.bench.scenarios.warm_up`)."""
        return f"bench-{self.run}-warm-up"

    @property
    def progress_file(self) -> Path:
        return self.work_dir / "progress.jsonl"

    def client(self) -> Scheduler:
        return Scheduler(
            ClientConfig(bootstrap_servers=self.bootstrap, schedules_topic=self.schedules_topic)
        )


def open_env(
    bootstrap: str | None,
    work_dir: Path | None,
    hold: str = "jvm",
    hold_options: Mapping[str, Any] | None = None,
) -> BenchEnv:
    """Start a private broker unless ``bootstrap`` is given, and the hold's side of the
    run (:class:`~delayline.holds.kinds.BenchSide`, with ``hold_options`` from its bench
    flags); create fresh topics."""
    root = work_dir or Path(tempfile.mkdtemp(prefix="delayline-bench-"))
    broker = None
    if bootstrap is None:
        config = BrokerConfig(
            data_dir=root / "broker", port=free_port(), controller_port=free_port(), heap_mb=1024
        )
        broker = LocalBroker(config)
        progress(f"starting a private broker in {config.data_dir}")
        broker.start()
        bootstrap = config.bootstrap_servers
    env = BenchEnv(bootstrap, root, broker, hold=hold, hold_options=hold_options or {})
    side = hold_kind(hold).bench
    if side is not None:
        log_dirs = None if broker is None else broker.log_dirs
        place = BenchPlace(root, env.run, log_dirs, env.hold_options, progress)
        env.hold_bench = side.open(place)
    ensure_topics(
        TopicsConfig(
            Topology(
                bootstrap,
                (env.schedules_topic,),
                dead_letter_topic=f"bench-{env.run}-dlq",
                history_topic=None,
                commits_topic=f"bench-{env.run}-commits",
            ),
            partitions=4,
        )
    )
    create_topic(bootstrap, env.target_topic, partitions=4)
    if broker is not None and broker.status().pid:
        env.broker_sampler = GroupSampler(broker.status().pid or 0).start()
    return env


def start_pipeline(env: BenchEnv, *extra: str) -> float:
    """Start (or restart) the pipeline; return seconds until its first batch."""
    if env.pipeline is None:
        args = [
            "--schedules-topic", env.schedules_topic,
            "--dead-letter-topic", f"bench-{env.run}-dlq",
            "--history-topic", "",
            "--commits-topic", f"bench-{env.run}-commits",
            "--checkpoint-dir", str(env.work_dir / "checkpoint"),
            "--query-name", f"bench-{env.run}",
            "--progress-file", str(env.progress_file),
            "--hold", env.hold,
            *extra,
        ]  # fmt: skip
        if env.hold_bench is not None:
            args += env.hold_bench.run_flags
        if env.master is not None:
            args += ["--master", env.master]
        env.pipeline = PipelineProcess(env.bootstrap, args, env.work_dir / "pipeline.log")
    env.pipeline.start()
    assert env.pipeline.proc is not None
    if env.sampler is None:
        # On a cluster of this machine the executors are the workers' children, not the
        # pipeline's: measured with it.
        also = executors_here if env.master is not None else None
        env.sampler = GroupSampler(env.pipeline.proc.pid, also=also).start()
    else:  # a restart runs in a new process group
        env.sampler.retarget(env.pipeline.proc.pid)
    return env.pipeline.wait_ready()


def stop_pipeline(env: BenchEnv) -> None:
    """Stop the pipeline, the committers beside it and their samplers, leaving the broker
    (and the hold's server) up."""
    for committer, beside in env.committers:
        beside.stop()
        if committer.proc is not None:
            committer.terminate()
    env.committers.clear()
    if env.pipeline is not None and env.pipeline.proc is not None:
        env.pipeline.terminate()
    for sampler in (env.sampler, env.broker_sampler):
        if sampler is not None:
            sampler.stop()
    env.sampler = env.broker_sampler = None


def close_env(env: BenchEnv) -> None:
    """Stop everything the run started."""
    stop_pipeline(env)
    if env.broker is not None:
        env.broker.stop()
    if env.hold_bench is not None:
        env.hold_bench.close()


def write_schedules(
    env: BenchEnv,
    count: int,
    due_ms: Any,
    rate_per_s: float | None = None,
    prefix: str = "s",
    on_progress: Any = None,
    sent_ms: list[int] | None = None,
    recurrence: Recurrence | None = None,
    target_topic: str | None = None,
) -> dict[str, int]:
    """Write ``count`` schedules to ``target_topic`` (default the run's); ``due_ms(i,
    now_ms)`` gives each due time (with a ``recurrence``, each one's start). Paced when
    ``rate_per_s`` is set. Returns id -> due ms; each write's time (ms) is appended to
    ``sent_ms`` when given."""
    written: dict[str, int] = {}
    began = time.monotonic()
    with env.client() as client:
        for i in range(count):
            if rate_per_s:
                wait = began + i / rate_per_s - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            sid = f"{prefix}-{i}"
            now_ms = time.time_ns() // 1_000_000
            due = due_ms(i, now_ms)  # once: it may be random
            if sent_ms is not None:
                sent_ms.append(now_ms)
            client.schedule(sid, b"x" * 100, target_topic or env.target_topic,
                            at=ms_to_datetime(due), recurrence=recurrence)  # fmt: skip
            written[sid] = due
            if on_progress is not None and i % 1000 == 0:
                on_progress(i)
    return written


def executor_work(env: BenchEnv) -> dict[str, dict[str, int]]:
    """What each executor did over the scenario, from the progress file: fire
    ``tasks``, deliveries written (``fire``), schedules handed to the committer
    (``handed``); committed batches from :attr:`BenchEnv.accepted_after_ms` on, by
    ``<host>/<executor id>``."""
    work: dict[str, Counter[str]] = {}
    if not env.progress_file.exists():
        return {}
    for line in env.progress_file.read_text().splitlines():
        report = json.loads(line)
        if report["committed"] and report["finished_ms"] >= env.accepted_after_ms:
            for name, done in report.get("executors", {}).items():
                work.setdefault(name, Counter()).update(done)
    return {name: dict(done) for name, done in sorted(work.items())}


def hold_rows(env: BenchEnv) -> int:
    """Input rows the hold folded (:data:`HOLD_ROW_KINDS`) in the batches that finished
    from :attr:`BenchEnv.accepted_after_ms` on, by the pipeline's progress file: a
    schedule's own, plus its own tombstone where the hold reads that back. Exact when an
    id has one record a batch, as in the bench's scenarios (the fold reports a version
    replaced within its batch by no count of its own)."""
    if not env.progress_file.exists():
        return 0
    total = 0
    for line in env.progress_file.read_text().splitlines():
        report = json.loads(line)
        if report["finished_ms"] >= env.accepted_after_ms:
            total += sum(report["counts"].get(k, 0) for k in HOLD_ROW_KINDS)
    return total


def accepted_timeline(env: BenchEnv) -> list[tuple[int, int]]:
    """(batch finish ms, cumulative input events) from the pipeline's progress file,
    from :attr:`BenchEnv.accepted_after_ms` on."""
    out: list[tuple[int, int]] = []
    total = 0
    if not env.progress_file.exists():
        return out
    for line in env.progress_file.read_text().splitlines():
        report = json.loads(line)
        if report["finished_ms"] < env.accepted_after_ms:
            continue
        total += sum(report["counts"].get(k, 0) for k in INPUT_KINDS)
        out.append((report["finished_ms"], total))
    return out


def handed_over(env: BenchEnv) -> tuple[int, int | None]:
    """From the pipeline's progress file, from :attr:`BenchEnv.accepted_after_ms` on:
    how many schedules the hold raised early (a burst's), and when the last committed
    batch that handed schedules to the committer finished (ms, ``None``: none did)."""
    early, last = 0, None
    if not env.progress_file.exists():
        return early, last
    for line in env.progress_file.read_text().splitlines():
        report = json.loads(line)
        if not report["committed"] or report["finished_ms"] < env.accepted_after_ms:
            continue
        early += report["counts"].get("early", 0)
        if report["counts"].get("handed", 0):
            last = max(last or 0, report["finished_ms"])
    return early, last


def accept_lags_ms(timeline: list[tuple[int, int]], sent_ms: list[int], before: int) -> list[int]:
    """How long each written schedule waited to be accepted, estimated from batch ends.

    The k-th schedule written (after ``before`` accepted events) counts as accepted at
    the end of the first batch by which ``before + k + 1`` events were: exact when the
    pipeline accepts in write order, which one source partition does and several
    interleave only within a batch.
    """
    lags: list[int] = []
    points = iter(timeline)
    ms, total = next(points, (0, 0))
    for k, sent in enumerate(sent_ms):
        while total < before + k + 1:
            nxt = next(points, None)
            if nxt is None:
                return lags
            ms, total = nxt
        lags.append(max(0, ms - sent))
    return lags


def spark_batches(env: BenchEnv) -> list[dict[str, Any]]:
    """Spark's own progress of each batch so far (``<progress file>.spark``)."""
    path = spark_progress_file(env.progress_file)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_accepted(env: BenchEnv, count: int, timeout_s: float, label: str) -> int:
    """Wait until the pipeline accepted ``count`` input events; return the time (ms)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _require_pipeline(env)
        timeline = accepted_timeline(env)
        done = timeline[-1][1] if timeline else 0
        progress(f"{label}: pipeline accepted {done:,}/{count:,}", end="\r")
        if done >= count:
            progress("")
            return next(ms for ms, total in timeline if total >= count)
        time.sleep(1)
    raise WaitTimeoutError(f"{label}: pipeline accepted fewer than {count} in {timeout_s} s")


def _require_pipeline(env: BenchEnv) -> None:
    """Fail at once when the pipeline died, instead of waiting out a timeout."""
    proc = None if env.pipeline is None else env.pipeline.proc
    if proc is not None and proc.poll() is not None:
        raise BenchError(
            f"the pipeline exited with code {proc.returncode}; see {env.work_dir / 'pipeline.log'}"
        )


def wait_delivered(
    seen: DeliveryCollector,
    expected: set[str],
    timeout_s: float,
    label: str,
    name: Callable[[Delivery], str | None] = lambda d: d.schedule_id,
) -> list[Delivery]:
    """Wait for every expected id (``name`` of a delivery: its schedule id) or the
    timeout, with a progress line."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = {name(d) for d in seen.snapshot()} & expected
        progress(f"{label}: delivered {len(got):,}/{len(expected):,}", end="\r")
        if len(got) >= len(expected):
            break
        time.sleep(0.5)
    progress("")
    time.sleep(2)  # late duplicates would show up now
    return seen.snapshot()


def delivery_figures(deliveries: list[Delivery], due: dict[str, int]) -> dict[str, Any]:
    """Lateness, early, duplicates, losses and fire throughput of ``deliveries``."""
    mine = [d for d in deliveries if d.schedule_id in due]
    counts = Counter(d.schedule_id for d in mine)
    lateness = [d.arrival_ms - due[d.schedule_id or ""] for d in mine]
    # Fire throughput counts from the earliest due time: a batch commits all its
    # deliveries in one transaction, so they become visible together, and the span of
    # arrivals alone would hide the time spent firing them.
    last = max((d.arrival_ms for d in mine), default=0)
    fire_span_s = (last - min(due.values())) / 1000 if mine else 0
    visible_span_s = (last - min(d.arrival_ms for d in mine)) / 1000 if mine else 0
    first = min((d.arrival_ms for d in mine), default=0)
    per_second = Counter((d.arrival_ms - first) // 1000 for d in mine)
    return {
        "expected": len(due),
        "delivered": len(counts),
        "lost": len(set(due) - set(counts)),
        "duplicates": sum(n - 1 for n in counts.values()),
        "early": sum(1 for d in mine if d.timestamp_ms < due[d.schedule_id or ""]),
        "early_seen": sum(1 for d in mine if d.arrival_ms < due[d.schedule_id or ""]),
        "lateness_ms": summary(lateness),
        "fire_per_s": round(len(mine) / fire_span_s) if fire_span_s > 0 else None,
        "visible_per_s": round(len(mine) / visible_span_s) if visible_span_s > 0 else None,
        "busiest_second": max(per_second.values(), default=0),
        "_lateness": lateness,
        "_arrivals": sorted(d.arrival_ms for d in mine),
    }


def progress(message: str, end: str = "\n") -> None:
    """A progress line on stderr (``\\r`` lines overwrite each other)."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\r\033[K{message}{end}")
    elif end == "\n" and message:
        sys.stderr.write(message + "\n")
    sys.stderr.flush()


def scenario_figures(
    env: BenchEnv,
    deliveries: list[Delivery],
    due: dict[str, int],
    load_from: float,
    load_to: float,
    accepted_ms: int | None,
    idle_pct: float | None,
    written: int | None = None,
) -> dict[str, Any]:
    """The figures every scenario reports: deliveries against ``due``, ingest, CPU and
    memory over the load, the accepted timeline and each executor's work. Ingest, CPU
    and hold rows are per schedule written: ``written`` when the scenario wrote more
    than it expects delivered (cancelled ones), else ``len(due)``."""
    assert env.sampler is not None
    figures = delivery_figures(deliveries, due)
    count = len(due) if written is None else written
    if accepted_ms is not None:
        figures["ingest_per_s"] = ingest_per_s(count, load_from, accepted_ms)
    figures["cpu_idle_pct"] = idle_pct
    if env.idle_by_jvm_thread is not None:
        figures["cpu_idle_pct_by_jvm_thread"] = env.idle_by_jvm_thread
    figures["cpu_load_pct"] = _round1(env.sampler.cpu_percent(load_from, load_to))
    figures.update(cpu_per_schedule(env, count, load_from, load_to))
    figures["peak_rss_mb"] = round(env.sampler.peak_rss_bytes() / 2**20)
    figures["rss_at_peak_mb"] = env.sampler.rss_at_peak_mb()
    if env.broker_sampler is not None:
        figures["broker_peak_rss_mb"] = round(env.broker_sampler.peak_rss_bytes() / 2**20)
    figures["_accepted"] = accepted_timeline(env)
    if count:
        figures["hold_rows_per_schedule"] = round(hold_rows(env) / count, 2)
    figures["executors"] = executor_work(env)
    if env.committers:
        figures["committers"] = committer_shares(env, deliveries, due, (load_from, load_to))
    return figures


def ingest_per_s(count: int, load_from: float, accepted_ms: int) -> int:
    """Schedules accepted a second: ``count`` written from ``load_from`` (epoch
    seconds), all accepted by ``accepted_ms``."""
    return round(count / max(0.001, accepted_ms / 1000 - load_from))


def cpu_per_schedule(env: BenchEnv, count: int, start_s: float, end_s: float) -> dict[str, Any]:
    """CPU microseconds per schedule from ``start_s`` to ``end_s`` (the first write to the
    last delivery, so a batch's fixed cost counts too): ``cpu_us_per_schedule``, every
    delayline process (the pipeline's tree and the committers started apart from it);
    ``broker_cpu_us_per_schedule``, the broker's; ``cpu_us_by_role``, the pipeline's tree
    by role (:data:`delayline.bench.sampler.ROLES`). ``None`` when not sampled."""
    samplers = [env.sampler, *(sampler for _, sampler in env.committers)]
    spent = [sampler.cpu_seconds(start_s, end_s) for sampler in samplers if sampler is not None]
    broker = None if env.broker_sampler is None else env.broker_sampler.cpu_seconds(start_s, end_s)

    def per(cpu_s: float | None) -> float | None:
        return None if cpu_s is None or count <= 0 else round(cpu_s / count * 1e6, 1)

    ours = None if not spent or None in spent else sum(s for s in spent if s is not None)
    by_role = {} if env.sampler is None else env.sampler.cpu_seconds_by_role(start_s, end_s)
    return {
        "cpu_us_per_schedule": per(ours),
        "broker_cpu_us_per_schedule": per(broker),
        "cpu_us_by_role": {role: per(cpu_s) for role, cpu_s in by_role.items()},
    }


def _round1(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
