"""``delayline bench --master``: the scenario in local mode, then on a Spark cluster,
against the same broker in the same run, reported side by side."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from delayline.bench.report import fmt, lookup
from delayline.bench.run import BenchEnv, close_env, open_env, progress, start_pipeline
from delayline.bench.sampler import GroupSampler

Scenario = Callable[[BenchEnv, Any], dict[str, Any]]


def on_cluster(
    local: BenchEnv, master: str, scenario: Scenario, size: Any, extra: list[str]
) -> dict[str, Any]:
    """Run ``scenario`` once more, its pipeline on ``master``, on fresh topics of the
    broker ``local`` used (the local pipeline must be stopped by then: two cores).

    Returns:
        ``master``, ``pipeline_ready_s`` and the scenario's ``figures``.
    """
    env = open_env(local.bootstrap, local.work_dir / "cluster", local.hold, local.hold_options)
    env.master = master
    if local.broker is not None and local.broker.status().pid:
        env.broker_sampler = GroupSampler(local.broker.status().pid or 0).start()
    try:
        progress(f"starting the pipeline on {master} (log {env.work_dir / 'pipeline.log'})")
        ready_s = start_pipeline(env, *extra)
        progress(f"pipeline ready on the cluster in {ready_s:.1f} s; running the scenario")
        figures = scenario(env, size)
    finally:
        close_env(env)  # its broker is the local run's: left running
    return {"master": master, "pipeline_ready_s": round(ready_s, 1), "figures": figures}


ROWS = (
    ("ingest (schedules/s)", "ingest_per_s"),
    ("delivery (schedules/s)", "fire_per_s"),
    ("lateness p50 (ms)", "lateness_ms.p50"),
    ("lateness p99 (ms)", "lateness_ms.p99"),
    ("lateness max (ms)", "lateness_ms.max"),
    ("early", "early"),
    ("duplicates", "duplicates"),
    ("lost", "lost"),
    ("peak RSS, all processes (MiB)", "peak_rss_mb"),
    ("CPU under load (% core)", "cpu_load_pct"),
)


def side_by_side(result: dict[str, Any]) -> str:
    """The local and the cluster figures of one run, row by row, and where the
    cluster's work was done."""
    local, cluster = result["figures"], result["cluster"]["figures"]
    lines = [
        f"{result['scenario']} in local mode and on {result['cluster']['master']}, same broker, "
        "same run",
        "",
        f"{'figure':<32} {'local':>12} {'cluster':>12}",
        f"{'pipeline ready (s)':<32} {result['pipeline_ready_s']:>12} "
        f"{result['cluster']['pipeline_ready_s']:>12}",
    ]
    for label, path in ROWS:
        lines.append(f"{label:<32} {fmt(lookup(local, path)):>12} {fmt(lookup(cluster, path)):>12}")
    lines += ["", "work by executor on the cluster (committed batches):"]
    lines.append(f"  {'executor':<30} {'tasks':>8} {'delivered':>10} {'handed':>10}")
    for name, done in cluster.get("executors", {}).items():
        tasks, fired, handed = (fmt(done.get(k, 0)) for k in ("tasks", "fire", "handed"))
        lines.append(f"  {name:<30} {tasks:>8} {fired:>10} {handed:>10}")
    return "\n".join(lines)
