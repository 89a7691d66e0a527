"""The soak: a steady rate for many minutes while the pipeline is SIGKILLed at random
moments and restarted, then counted: lost, duplicated and early (all must be 0), with
the pipeline's RSS and each delivery's lateness over the whole run (``--plot``)."""

from __future__ import annotations

import random
import threading
import time
from itertools import pairwise
from typing import Any

from delayline.bench.run import (
    BenchEnv,
    progress,
    scenario_figures,
    start_pipeline,
    wait_delivered,
    write_schedules,
)
from delayline.bench.scenarios import DRAIN_AFTER_KILL_S, Size, _sent
from delayline.dev.harness import DeliveryCollector

KILLS = 3
"""SIGKILLs of the pipeline during a soak."""
KILL_GAP = 0.15
"""Kills fall in the middle of the run, this fraction of its duration apart at least."""


def kill_times_s(duration_s: int, rng: random.Random, kills: int = KILLS) -> list[float]:
    """Seconds into the run at which to kill: random in its middle 80 %, apart by
    :data:`KILL_GAP` of the duration (so each restart is caught up before the next)."""
    low, high, gap = 0.1 * duration_s, 0.9 * duration_s, KILL_GAP * duration_s
    while True:
        times = sorted(rng.uniform(low, high) for _ in range(kills))
        if all(b - a >= gap for a, b in pairwise(times)):
            return times


def soak(env: BenchEnv, size: Size) -> dict[str, Any]:
    """``rate_per_s`` for ``duration_s``, each due 10-30 s after it is written, with
    :data:`KILLS` SIGKILLs of the pipeline (its Spark JVM and Python workers too)."""
    assert env.pipeline is not None
    rng = random.Random(5)
    total = size.rate_per_s * size.duration_s
    plan = kill_times_s(size.duration_s, rng)
    kills: list[dict[str, float]] = []
    failed: list[BaseException] = []

    def killer(began: float) -> None:
        try:
            for at in plan:
                time.sleep(max(0.0, began + at - time.monotonic()))
                assert env.pipeline is not None
                progress(f"soak: SIGKILL {len(kills) + 1}/{len(plan)} at {at:.0f} s")
                env.pipeline.kill()
                time.sleep(DRAIN_AFTER_KILL_S)
                ready_s = start_pipeline(env)
                kills.append({"at_s": round(at, 1), "restart_ready_s": round(ready_s, 1)})
        except BaseException as exc:  # reported by the main thread
            failed.append(exc)

    with DeliveryCollector(env.bootstrap, [env.target_topic]) as seen:
        load_from = time.time()
        thread = threading.Thread(target=killer, args=(time.monotonic(),), daemon=True)
        thread.start()
        due = write_schedules(env, total, lambda i, now: now + rng.randint(10_000, 30_000),
                              rate_per_s=size.rate_per_s, on_progress=_sent(total))  # fmt: skip
        thread.join()
        if failed:
            raise failed[0]
        deliveries = wait_delivered(seen, set(due), 600 + total / 500, "soak")
        load_to = time.time()
    figures = scenario_figures(env, deliveries, due, load_from, load_to, None, None)
    assert env.sampler is not None
    samples = env.sampler.samples
    figures["kills"] = kills
    figures["rss_mb_per_minute"] = rss_per_minute(
        [(s.at_s, s.rss_bytes) for s in samples], load_from
    )
    figures["_rss"] = [(s.at_s, s.rss_bytes) for s in samples]
    figures["_kills_at"] = [load_from + k["at_s"] for k in kills]
    mine = [d for d in deliveries if d.schedule_id in due]
    figures["_lateness_at"] = [
        (d.arrival_ms, d.arrival_ms - due[d.schedule_id or ""]) for d in mine
    ]
    return figures


def rss_per_minute(samples: list[tuple[float, int]], began_s: float) -> list[int]:
    """The highest summed RSS (MiB) of each minute from ``began_s``."""
    per: dict[int, int] = {}
    for at_s, rss in samples:
        if at_s >= began_s:
            minute = int((at_s - began_s) // 60)
            per[minute] = max(per.get(minute, 0), rss)
    return [round(per.get(m, 0) / 2**20) for m in range(max(per, default=-1) + 1)]


def plot_over_time(figures: dict[str, Any], lateness_ax: Any, rss_ax: Any) -> None:
    """Each delivery's lateness, and the pipeline's RSS, over the run; kills marked."""
    at = figures.get("_lateness_at") or []
    rss = figures.get("_rss") or []
    t0 = min([a / 1000 for a, _ in at[:1]] + [s for s, _ in rss[:1]], default=0.0)
    if at:
        lateness_ax.scatter([a / 1000 - t0 for a, _ in at], [late for _, late in at], s=1)
    lateness_ax.set(title="lateness over time", xlabel="s since the pipeline started",
                    ylabel="ms after due")  # fmt: skip
    rss_ax.plot([s - t0 for s, _ in rss], [b / 2**20 for _, b in rss])
    rss_ax.set(title="pipeline RSS over time", xlabel="s since the pipeline started",
               ylabel="MiB")  # fmt: skip
    for kill in figures.get("_kills_at") or []:
        for ax in (lateness_ax, rss_ax):
            ax.axvline(kill - t0, color="#d83b3b", linestyle="--", linewidth=1)
