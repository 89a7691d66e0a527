"""``delayline bench``: measure delayline on this machine against the raw broker."""

from __future__ import annotations

import argparse
import dataclasses
import re
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from delayline.bench import catalog, ladder, report
from delayline.bench.baseline import measure_baseline
from delayline.bench.cluster import on_cluster, side_by_side
from delayline.bench.committers import ceiling, ceiling_table, start_committers
from delayline.bench.run import (
    close_env,
    open_env,
    progress,
    start_pipeline,
    stop_pipeline,
    write_schedules,
)
from delayline.bench.scenarios import (
    SCENARIOS,
    Size,
    warm_up,
)
from delayline.bench.takeover import takeover, takeover_table
from delayline.cli._common import (
    say,
)
from delayline.cli._holds import hold_bench_options
from delayline.cli.bench_flags import add_flags, check_jit_and_warm_up, jit_name, scenario_size
from delayline.cli.extras import require_extras
from delayline.errors import ConfigError
from delayline.kafka.properties import KAFKA_CONFIG_ENV
from delayline.pipeline.config import (
    JIT_OPTIONS,
)
from delayline.pipeline.placement import check_master


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench``."""
    p = sub.add_parser(
        "bench",
        help="benchmark a scenario: throughput, lateness, exactly-once, memory, CPU",
        description="Start a private broker and pipeline (or use --bootstrap-servers), drive "
        "a scenario with the client, read deliveries with read_committed and report figures "
        "next to the raw broker's limits measured in the same run. See benchmarks/README.md.",
    )
    add_flags(p)
    p.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    if args.kafka_config and not args.bootstrap_servers:
        raise ConfigError(
            f"--kafka-config ({KAFKA_CONFIG_ENV}) is for --bootstrap-servers: the private "
            "broker is plaintext"
        )
    require_extras("bench", "bench")  # the catalog scenario too: report.machine() needs pyspark

    size = scenario_size(args)
    check_jit_and_warm_up(args)
    if args.scenario == "catalog":
        return _catalog(args)
    if args.scenario == "ladder":
        return _ladder(args)
    if args.scenario in ("committer", "takeover"):
        return _committers_alone(args)
    if args.master is not None:
        check_master(args.master)
    started = time.time()
    result = {
        "scenario": args.scenario,
        "hold": args.hold,
        "quick": args.quick,
        "size": dataclasses.asdict(size),
        "started_at": datetime.fromtimestamp(started, UTC).isoformat(),
        **_measure(args, size),
        "wall_s": round(time.time() - started, 1),
        "machine": report.machine(),
        "trigger_interval": args.trigger_interval,
        "lead": args.lead,
        "driver_memory_mb": args.driver_memory_mb,
        "inflight_partitions": args.inflight_partitions,
        "committers": args.committers,
        "target_rate_per_s": args.target_rate,
        "jit": jit_name(args),
        "warm_up_s": None if args.warm_up_ms is None else args.warm_up_ms / 1000,
    }
    say(report.table(result))
    if args.master is not None:
        say("")
        say(side_by_side(result))
    if args.json_path:
        report.write_json(result, args.json_path)
        say(f"wrote {args.json_path}")
    if args.plot_path:
        report.plot(result, args.plot_path)
        say(f"wrote {args.plot_path}")
    return 0


def _measure(args: argparse.Namespace, size: Size) -> dict[str, Any]:
    """The raw broker's figures, then the scenario's (and on ``--master`` too): the
    ``baseline``, ``pipeline_ready_s``, ``figures`` (and ``cluster``) of the result."""
    env = open_env(args.bootstrap_servers, args.work_dir, args.hold, hold_bench_options(args))
    env.inflight_partitions = args.inflight_partitions
    try:
        progress("measuring the raw broker (produce, consume, latency)")
        writes = 20_000 if args.quick else 200_000
        measured: dict[str, Any] = {"baseline": measure_baseline(env.bootstrap, writes)}
        hold_baseline = None if env.hold_bench is None else env.hold_bench.baseline(writes)
        if hold_baseline is not None:
            measured["baseline"][args.hold] = hold_baseline
        extra = [
            "--trigger-interval", args.trigger_interval,
            "--driver-memory-mb", str(args.driver_memory_mb),
        ]  # fmt: skip
        if args.lead is not None:
            extra += ["--lead", args.lead]
        if args.write_ahead:
            topics = (env.target_topic, env.warm_up_topic)
            extra += ["--write-ahead", "|".join(re.escape(topic) for topic in topics)]
        if args.target_rate is not None:
            extra += ["--target-rate", f"{env.target_topic}={args.target_rate:g}/s"]
        if args.jit is not None:
            extra.append(f"--java-options={JIT_OPTIONS[args.jit[0]]}")
        progress(f"starting the pipeline (log {env.work_dir / 'pipeline.log'})")
        ready_s = start_pipeline(env, *extra)
        measured["pipeline_ready_s"] = round(ready_s, 1)
        if args.committers > 1:
            progress(f"starting {args.committers - 1} more committer(s)")
            start_committers(env, args.committers - 1)
        progress(f"pipeline ready in {ready_s:.1f} s; running {args.scenario}")
        if args.warm_up_ms:
            measured["warm_up"] = warm_up(env, args.warm_up_ms / 1000)
        figures = measured["figures"] = SCENARIOS[args.scenario](env, size)
        hold_figures = None if env.hold_bench is None else env.hold_bench.figures(size.pending)
        if hold_figures is not None:
            figures[args.hold] = hold_figures
        if args.master is not None:
            stop_pipeline(env)  # two cores: one pipeline at a time
            scenario = SCENARIOS[args.scenario]
            measured["cluster"] = on_cluster(env, args.master, scenario, size, extra)
    finally:
        close_env(env)
    return measured


def _committers_alone(args: argparse.Namespace) -> int:
    """``committer`` (one committer's ceiling) or ``takeover`` (two, one SIGKILLed)."""
    started = time.time()
    env = open_env(args.bootstrap_servers, args.work_dir)
    env.inflight_partitions = args.inflight_partitions
    try:
        if args.scenario == "committer":
            figures = ceiling(env, args.quick)
        else:
            figures = takeover(env, args.quick)
    finally:
        close_env(env)
    result = {
        "scenario": args.scenario,
        "quick": args.quick,
        "inflight_partitions": env.inflight_partitions,
        "started_at": datetime.fromtimestamp(started, UTC).isoformat(),
        "wall_s": round(time.time() - started, 1),
        "machine": report.machine(),
        "figures": figures,
    }
    say(ceiling_table(figures) if args.scenario == "committer" else takeover_table(figures))
    if args.json_path:
        report.write_json(result, args.json_path)
        say(f"wrote {args.json_path}")
    return 0


def _catalog(args: argparse.Namespace) -> int:
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="delayline-bench-") as tmp:
        work_dir = args.work_dir or Path(tmp)
        work_dir.mkdir(parents=True, exist_ok=True)
        figures = catalog.catalog_bench(100_000 if args.quick else 1_000_000, work_dir)
    result = {
        "scenario": "catalog",
        "quick": args.quick,
        "started_at": datetime.fromtimestamp(started, UTC).isoformat(),
        "wall_s": round(time.time() - started, 1),
        "machine": report.machine(),
        "figures": figures,
    }
    say(catalog.table(figures))
    if args.json_path:
        report.write_json(result, args.json_path)
        say(f"wrote {args.json_path}")
    return 0 if figures["met"] else 1


def _ladder(args: argparse.Namespace) -> int:
    count = 20_000 if args.quick else 200_000
    jit = args.jit or list(JIT_OPTIONS)
    warm_up_s = ladder.WARM_UP_S if args.warm_up_ms is None else args.warm_up_ms / 1000
    started = time.time()
    env = open_env(args.bootstrap_servers, args.work_dir)
    try:
        due_ms = int(started * 1000) + 3_600_000
        progress(f"writing {count:,} schedules due in an hour to {env.schedules_topic}")
        write_schedules(env, count, lambda i, now: due_ms)
        broker_pid = None if env.broker is None else env.broker.status().pid
        runs = ladder.ladder(
            env.bootstrap,
            env.schedules_topic,
            count,
            env.work_dir / "ladder",
            jit=jit,
            warm_up_s=warm_up_s,
            broker_pid=broker_pid,
            rungs=args.rungs,
            say=progress,
        )
    finally:
        close_env(env)
    result = {
        "scenario": "ladder",
        "quick": args.quick,
        "count": count,
        "warm_up_s": warm_up_s,
        "started_at": datetime.fromtimestamp(started, UTC).isoformat(),
        "wall_s": round(time.time() - started, 1),
        "machine": report.machine(),
        "figures": {"runs": runs, "costliest": ladder.costliest(runs, jit[0])},
    }
    say(ladder.table(runs))
    if result["figures"]["costliest"] is not None:
        rung, added = result["figures"]["costliest"]
        say(f"the costliest stage (warm, JIT {jit[0]}): {rung}, {added} us per schedule")
    if args.json_path:
        report.write_json(result, args.json_path)
        say(f"wrote {args.json_path}")
    return 0
