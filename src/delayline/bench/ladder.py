"""``delayline bench --scenario ladder``: where a schedule's CPU goes, stage by stage.

The same schedules, already in the schedules topic and due an hour ahead, run through a
growing pipeline; each rung adds one stage to the one before:

1. ``source``: the Kafka source with headers, to a no-op sink;
2. ``validate``: + the SQL validation and the contract columns;
3. ``shuffle``: + the shuffle by (topic, schedule id) the hold's grouping makes;
4. ``hold``: + the hold (no fire stage);
5. ``fire``: + the fire stage, ``--lead 0`` (the whole pipeline without the committer);
6. ``full``: the whole pipeline with its default lead (committer, watch, waker);
7. ``due``: the same, every schedule falling due in the run: + raising, handing over and
   delivering each (:mod:`delayline.bench.due_rung`).

Each rung runs in a process of its own (:func:`main`, a fresh JVM): once cold, then
again and again on fresh checkpoints until the warm-up time is over, then once more,
warm. CPU is read from /proc over each run by role: Spark's JVM, the Python workers,
the Python driver, and the broker. Rungs 1-4 read with Spark's ``availableNow`` trigger
and rungs 5-7 with the pipeline's own, both capped at the pipeline's records per batch.

What differs between two rungs is what the added stage costs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from delayline.bench.due_rung import delivered, due_run
from delayline.bench.run import INPUT_KINDS
from delayline.bench.sampler import cpu_by_role
from delayline.contract.topology import Topology
from delayline.errors import BenchError
from delayline.holds.hold import hold_for
from delayline.kafka.topics import TopicsConfig, ensure_topics
from delayline.pipeline.config import DEFAULT_LEAD_MS, JIT_OPTIONS, PipelineConfig

RUNGS = ("source", "validate", "shuffle", "hold", "fire", "full", "due")
"""The rungs, bottom up: each adds one stage to the one before."""
PIPELINE_RUNGS = ("fire", "full", "due")
"""The rungs that run the pipeline itself (its trigger, its wake topic)."""
WARM_UP_S = 180.0
"""How long each rung runs again before its warm run, unless ``--warm-up`` says."""
BOUNDARIES = ("shuffle", "arrow")
"""The boundaries whose bytes the ladder reports: what the stages wrote to the shuffle
(Spark's stage data), and what was handed to the Python workers in Arrow (the SQL
metric :data:`ARROW_METRIC`; stage data has no such figure)."""
ARROW_METRIC = "data sent to Python workers"
_SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
TIMEOUT_S = 1_800
"""The longest one rung's process may take (its warm-up included)."""


@dataclass(frozen=True, slots=True)
class RungRun:
    """One run of one rung.

    Attributes:
        rung: Which (:data:`RUNGS`).
        warm: After the warm-up (else the first run of a fresh JVM).
        rows: Schedules read.
        seconds: From the query's start to its last batch.
        cpu_s: CPU seconds by role (``jvm``, ``python workers``, ``driver``, ``broker``).
        bytes_: Bytes that crossed each boundary (:data:`BOUNDARIES`) in the run
            (:func:`crossed_bytes`).
    """

    rung: str
    warm: bool
    rows: int
    seconds: float
    cpu_s: dict[str, float]
    bytes_: dict[str, int] = field(default_factory=dict)

    @property
    def per_s(self) -> float:
        """Schedules per second."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def bytes_per_schedule(self) -> dict[str, float]:
        """Bytes per schedule across each boundary (:data:`BOUNDARIES`)."""
        return {k: n / self.rows for k, n in self.bytes_.items()} if self.rows else {}

    def us_per_schedule(self) -> dict[str, float]:
        """CPU microseconds per schedule, by role and in total."""
        out = {role: 1e6 * s / self.rows for role, s in self.cpu_s.items()} if self.rows else {}
        out["total"] = sum(out.values())
        return out


def rung_frame(rung: str, spark: Any, config: Any, hold: Any) -> Any:
    """The streaming frame of rungs 1-4 (``source`` to ``hold``)."""
    from delayline.contract.columns import parsed  # noqa: PLC0415 - pyspark
    from delayline.pipeline.source import kafka_records, read_schedules  # noqa: PLC0415 - pyspark

    if rung == "source":
        return kafka_records(spark, config)
    if rung == "validate":
        return parsed(read_schedules(spark, config))
    if rung == "shuffle":
        return parsed(read_schedules(spark, config)).repartition(
            config.shuffle_partitions, "topic", "gkey"
        )
    if rung == "hold":
        return hold.stage(read_schedules(spark, config))
    raise BenchError(f"rung {rung!r} is not a frame of its own")


def _noop_run(rung: str, config: Any, broker_pid: int | None) -> RungRun:
    """Rungs 1-4: the frame to a no-op sink, every record there now (``availableNow``)."""
    from delayline.pipeline.session import build_session  # noqa: PLC0415 - pyspark

    spark = build_session(config, log_level="warning")
    # A hold with timers would otherwise run empty batches for ever: availableNow ends
    # when the input is read and no batch asks for another.
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    hold = hold_for(config, None)
    frame = rung_frame(rung, spark, config, hold)
    marks = spark_marks(spark)
    before = _cpu(broker_pid)
    began = time.monotonic()
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(config.checkpoint_dir))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.monotonic() - began
    cpu = _minus(_cpu(broker_pid), before)
    rows = sum(int(p["numInputRows"]) for p in query.recentProgress)
    hold.close()
    return RungRun(rung, False, rows, seconds, cpu, crossed_bytes(spark, marks))


def _pipeline_run(rung: str, config: Any, count: int, broker_pid: int | None) -> RungRun:
    """Rungs 5-7: the pipeline itself until it has read ``count`` records (``due``: until
    it has delivered them)."""
    from delayline.pipeline.job import Pipeline  # noqa: PLC0415 - pyspark
    from delayline.pipeline.session import build_session  # noqa: PLC0415 - pyspark

    spark = build_session(config, log_level="warning")  # the JVM's start is not the rung's
    marks = spark_marks(spark)
    read = 0
    last = time.monotonic()
    done = threading.Event()

    def on_batch(report: Any) -> None:
        nonlocal read, last
        read += sum(report.counts.get(kind, 0) for kind in INPUT_KINDS)
        last = time.monotonic()
        if read >= count:
            done.set()

    job = Pipeline(config, on_batch, log_level="warning")
    before = _cpu(broker_pid)
    began = time.monotonic()
    job.start()
    stop = threading.Event()
    runner = threading.Thread(target=job.run_until, args=(stop,), daemon=True)
    runner.start()
    if not done.wait(TIMEOUT_S):
        stop.set()
        raise BenchError(f"rung {rung}: {read} of {count} records read in {TIMEOUT_S} s")
    if rung == "due":
        deadline = began + TIMEOUT_S
        while (sent := delivered(job)) < count:
            if time.monotonic() > deadline:
                stop.set()
                raise BenchError(f"rung due: {sent} of {count} delivered in {TIMEOUT_S} s")
            time.sleep(0.1)
        last = time.monotonic()
    seconds = last - began
    cpu = _minus(_cpu(broker_pid), before)
    crossed = crossed_bytes(spark, marks)  # before the stop, which ends the session
    stop.set()
    runner.join(120)
    return RungRun(rung, False, read, seconds, cpu, crossed)


def spark_marks(spark: Any) -> tuple[int, int]:
    """(the newest SQL execution id, the newest stage id) of the session so far."""
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    stages = _stages(spark)
    return (
        max((executions.apply(i).executionId() for i in range(executions.size())), default=-1),
        max((stages.apply(i).stageId() for i in range(stages.size())), default=-1),
    )


def _stages(spark: Any) -> Any:
    store = spark.sparkContext._jsc.sc().statusStore()
    defaults = [getattr(store, f"stageList$default${n}")() for n in range(2, 6)]
    return store.stageList(None, *defaults)


def crossed_bytes(spark: Any, after: tuple[int, int]) -> dict[str, int]:
    """Bytes across each boundary of :data:`BOUNDARIES` since ``after``
    (:func:`spark_marks`). The shuffle's come from the stages: inside ``foreachBatch``
    the SQL metrics of an exchange are lost (its stages run under the inner execution,
    whose plan does not name it).

    Spark keeps the newest 1,000 executions and stages (``spark.sql.ui.retainedExecutions``,
    ``spark.ui.retainedStages``): a longer run reports those only.
    """
    after_execution, after_stage = after
    stages = _stages(spark)
    shuffle = sum(
        int(stage.shuffleWriteBytes())
        for stage in (stages.apply(i) for i in range(stages.size()))
        if stage.stageId() > after_stage
    )
    store = spark._jsparkSession.sharedState().statusStore()
    converters = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters
    executions = store.executionsList()
    arrow = 0
    for i in range(executions.size()):
        execution = executions.apply(i)
        if execution.executionId() <= after_execution:
            continue
        # As a dict: py4j hands a small long back to Java as an Integer, no map key.
        values = dict(converters.asJava(store.executionMetrics(execution.executionId())))
        metrics = execution.metrics()
        for metric in (metrics.apply(j) for j in range(metrics.size())):
            if metric.name() == ARROW_METRIC and metric.accumulatorId() in values:
                arrow += size_total(str(values[metric.accumulatorId()]))
    return {"shuffle": shuffle, "arrow": arrow}


def size_total(text: str) -> int:
    """The total of a size metric as Spark formats it (``"total (min, med, max ...)\n
    12.3 MiB (...)"``, or a lone ``"12.3 MiB"``), in bytes; 0 when it has none."""
    found = re.search(r"([\d.,]+) (B|KiB|MiB|GiB|TiB)", text.rsplit("\n", 1)[-1])
    if found is None:
        return 0
    return round(float(found.group(1).replace(",", "")) * _SIZE_UNITS[found.group(2)])


def _cpu(broker_pid: int | None) -> dict[str, float]:
    """CPU seconds so far of this process's tree by role, and of the broker's."""
    cpu = cpu_by_role(os.getpid())
    cpu.pop("other", None)
    if broker_pid is not None:
        cpu["broker"] = sum(cpu_by_role(broker_pid).values())
    return cpu


def _minus(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {role: round(after[role] - before.get(role, 0.0), 3) for role in after}


def run_rung(
    rung: str,
    config: Any,
    count: int,
    warm_up_s: float,
    broker_pid: int | None,
    say: Callable[[str], None],
) -> list[RungRun]:
    """The cold run of ``rung`` in this process, the warm-up runs, then the warm run;
    each on a fresh checkpoint and query name."""

    def once(n: int) -> RungRun:
        fresh = replace(
            config,
            checkpoint_dir=config.checkpoint_dir.parent / f"{rung}-{n}",
            query_name=f"{config.query_name}-{rung}-{n}",
        )
        if rung == "due":
            fresh = due_run(fresh, count, n)  # its own schedules, written before the run
        if rung in PIPELINE_RUNGS:
            return _pipeline_run(rung, fresh, count, broker_pid)
        return _noop_run(rung, fresh, broker_pid)

    cold = once(0)
    say(f"{rung}: cold {cold.rows} in {cold.seconds:.1f} s")
    warm_until = time.monotonic() + warm_up_s
    n = 1
    while time.monotonic() < warm_until:
        run = once(n)
        say(f"{rung}: warm-up {n}: {run.rows} in {run.seconds:.1f} s")
        n += 1
    warm = replace(once(n), warm=True)
    say(f"{rung}: warm {warm.rows} in {warm.seconds:.1f} s")
    return [cold, warm]


def ladder(
    bootstrap: str,
    topic: str,
    count: int,
    work_dir: Path,
    *,
    jit: Sequence[str],
    warm_up_s: float,
    broker_pid: int | None,
    rungs: Sequence[str] = RUNGS,
    say: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run each rung under each JIT setting, each (rung, JIT) in a fresh process.

    Returns:
        One result per run: ``rung``, ``jit``, ``warm``, ``rows``, ``seconds``,
        ``per_s``, ``cpu_s`` and ``us_per_schedule`` by role.
    """
    results: list[dict[str, Any]] = []
    for setting in jit:
        for rung in rungs:
            say(f"ladder: rung {rung}, JIT {setting}")
            spec = {
                "bootstrap": bootstrap,
                "topic": topic,
                "count": count,
                "rung": rung,
                "java_options": JIT_OPTIONS[setting],
                "work_dir": str(work_dir / f"{setting}-{rung}"),
                "warm_up_s": warm_up_s,
                "broker_pid": broker_pid,
            }
            done = subprocess.run(
                [sys.executable, "-m", "delayline.bench.ladder", json.dumps(spec)],
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S + 120,
                check=False,
            )
            runs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or len(runs) != 2:
                tail = "\n".join(done.stderr.splitlines()[-15:])
                raise BenchError(f"ladder rung {rung} (JIT {setting}) failed:\n{tail}")
            for run in runs:
                run["jit"] = setting
                results.append(run)
                say(
                    f"  {'warm' if run['warm'] else 'cold'}: {run['per_s']:,.0f}/s, "
                    f"{run['us_per_schedule']['total']:.0f} us per schedule"
                )
    return results


def table(results: Sequence[dict[str, Any]]) -> str:
    """The ladder as a text table: per run, rate, CPU us per schedule by role and bytes
    per schedule across each boundary (:data:`BOUNDARIES`), and what each rung adds to
    the one below (warm runs, same JIT)."""
    roles = ("jvm", "python workers", "driver", "broker")
    head = (
        f"{'rung':<9}{'JIT':<5}{'run':<5}{'per s':>9}"
        + "".join(f"{role:>16}" for role in (*roles, "total"))
        + "".join(f"{key + ' B':>11}" for key in BOUNDARIES)
    )
    lines = [head, "CPU us per schedule by process, bytes per schedule".rjust(len(head))]
    below: dict[str, float] = {}
    for run in results:
        us = run["us_per_schedule"]
        lines.append(
            f"{run['rung']:<9}{run['jit']:<5}{'warm' if run['warm'] else 'cold':<5}"
            f"{run['per_s']:>9,.0f}"
            + "".join(f"{us.get(role, 0):>16.1f}" for role in roles)
            + f"{us['total']:>16.1f}"
            + "".join(
                f"{run.get('bytes_per_schedule', {}).get(key, 0):>11.1f}" for key in BOUNDARIES
            )
        )
        if run["warm"]:
            added = us["total"] - below.get(run["jit"], 0.0)
            lines.append(f"{'':<19}{'the rung adds':>16}{added:>16.1f} us")
            below[run["jit"]] = us["total"]
    return "\n".join(lines)


def costliest(results: Sequence[dict[str, Any]], jit: str = "c1") -> tuple[str, float] | None:
    """The rung whose stage adds the most CPU per schedule (warm runs of ``jit``)."""
    warm = [r for r in results if r["warm"] and r["jit"] == jit]
    best: tuple[str, float] | None = None
    previous = 0.0
    for run in warm:
        added = run["us_per_schedule"]["total"] - previous
        previous = run["us_per_schedule"]["total"]
        if best is None or added > best[1]:
            best = (run["rung"], round(added, 1))
    return best


def main(argv: Sequence[str] | None = None) -> int:
    """One rung in this process (the ladder runs it as ``python -m``): prints the cold
    and the warm run as JSON lines."""
    parser = argparse.ArgumentParser(prog="python -m delayline.bench.ladder")
    parser.add_argument("spec", help="the rung's settings, as JSON (see ladder())")
    spec = json.loads(parser.parse_args(argv).spec)
    work_dir = Path(spec["work_dir"])
    work_dir.mkdir(parents=True, exist_ok=True)
    name = f"ladder-{uuid.uuid4().hex[:6]}"
    config = PipelineConfig(
        topology=Topology(
            spec["bootstrap"],
            (spec["topic"],),
            dead_letter_topic=f"{name}-dlq",
            history_topic=None,
            commits_topic=f"{name}-commits",
        ),
        checkpoint_dir=work_dir / "checkpoint",
        query_name=name,
        java_options=spec["java_options"],
        trigger_interval_ms=100,
        wake=spec["rung"] in PIPELINE_RUNGS,  # the pipeline makes its wake topic
        lead_ms=0 if spec["rung"] == "fire" else DEFAULT_LEAD_MS,
        driver_memory_mb=2048,
    )

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if spec["rung"] in PIPELINE_RUNGS:
        ensure_topics(TopicsConfig(config.topology, partitions=4))
    for run in run_rung(
        spec["rung"], config, spec["count"], spec["warm_up_s"], spec["broker_pid"], say
    ):
        figures = {
            "rung": run.rung,
            "warm": run.warm,
            "rows": run.rows,
            "seconds": round(run.seconds, 2),
            "per_s": round(run.per_s),
            "cpu_s": run.cpu_s,
            "us_per_schedule": {k: round(v, 1) for k, v in run.us_per_schedule().items()},
            "bytes_per_schedule": {k: round(v, 1) for k, v in run.bytes_per_schedule().items()},
        }
        print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
