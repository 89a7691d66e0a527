"""Turn a benchmark result into a table, a JSON file and a PNG plot."""

from __future__ import annotations

import json
import os
import platform
from itertools import pairwise
from pathlib import Path
from typing import Any

from delayline.bench.sampler import JVM_THREAD_KINDS
from delayline.holds.registry import hold_kind

TARGETS: dict[str, list[tuple[str, str, float, str]]] = {
    # scenario -> (label, figure key path, bound, "<=" or ">=")
    "steady": [("sustained ingest (schedules/s)", "ingest_per_s", 20_000, ">="),
               ("write to accepted, worst (ms)", "accept_lag_ms.max", 2000, "<="),
               ("CPU per schedule, every delayline process (us)", "cpu_us_per_schedule", 60,
                "<=")],
    "burst": [("delivery throughput (schedules/s)", "fire_per_s", 20_000, ">="),
              ("ingest throughput (schedules/s)", "ingest_per_s", 20_000, ">=")],
    "burst-ahead": [("lateness p99 (ms), due over 1 s, written 60 s ahead", "lateness_ms.p99",
                     1000, "<=")],
    # The engine bounds: 2.5 GiB, 15 s with 1M pending, 10% of a core.
    "backlog": [("pipeline peak RSS (MiB) with the backlog held", "peak_rss_mb", 2560, "<="),
                ("batch of 100 rows with the backlog held, p50 (ms)", "small_batch_ms.p50",
                 300, "<=")],
    # 15 s with 1M pending; 10 s with 1k (see restart_bound).
    "restart": [("first delivery after restart (s)", "first_delivery_after_restart_s", 15, "<="),
                ("first batch after restart (ms)", "first_batch_after_restart_ms", 3000, "<=")],
    "idle": [("idle CPU (% of one core)", "cpu_idle_pct", 10, "<=")],
    # The precision bounds, by offered rate: see lateness_targets.
    "trickle": [],
    "catalog": [("catalog page at 1M pending, worst median (ms)", "worst_median_ms", 200, "<=")],
}  # fmt: skip
ZERO = [("early (record timestamp before due)", "early"),
        ("early (seen by a read_committed reader before due)", "early_seen"),
        ("early (seen by a read_uncommitted reader before due; bursts)",
         "early_seen_uncommitted"),
        ("duplicates", "duplicates"), ("lost", "lost")]  # fmt: skip
PRECISION = [  # (highest offered rate per second, lateness p50 bound, p99 bound) in ms
    (10, 10, 20),
    (1_000, 10, 50),
    (5_000, None, 250),
]
"""The precision issue's bounds: the first row whose rate covers the offered one."""


def lateness_targets(scenario: str, rate_per_s: int) -> list[tuple[str, str, float, str]]:
    """The lateness bounds of a run offering ``rate_per_s`` (none above 5,000/s)."""
    if scenario not in {"steady", "trickle"}:
        return []
    for highest, p50, p99 in PRECISION:
        if rate_per_s <= highest:
            rows = (
                []
                if p50 is None
                else [(f"lateness p50 (ms) at {rate_per_s:,}/s", "lateness_ms.p50", p50, "<=")]
            )
            return [*rows, (f"lateness p99 (ms) at {rate_per_s:,}/s", "lateness_ms.p99", p99, "<=")]
    return [(f"lateness p99 (ms) at {rate_per_s:,}/s", "lateness_ms.p99", 1000, "<=")]


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    mem_kb = 0
    model = platform.processor()
    try:
        mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration, ValueError):
        pass
    import pyspark  # noqa: PLC0415 - only for its version

    return {
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 2**20, 1),
        "cpu": model,
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "os": platform.platform(),
    }


def lookup(figures: dict[str, Any], path: str) -> Any:
    """``a.b`` -> figures["a"]["b"] (None when missing)."""
    value: Any = figures
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def restart_bound(path: str, pending: int, bound: float) -> float:
    """The bound on the first delivery after a restart is 10 s with 1k
    pending and 15 s with 1M: runs with at most 1k pending are held to the first."""
    if path == "first_delivery_after_restart_s" and pending <= 1_000:
        return 10
    return bound


IDLE_WARM_PCT = 3
"""An idle pipeline's bound once its JIT is warm (``--warm-up``), 1,000 pending."""

RATE_TOLERANCE = 0.10
"""With ``--target-rate``: how far the busiest second and the mean rate may be from it."""


def evaluate(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the scenario: measured value, bound, met (None: not comparable)."""
    scenario, figures, quick = result["scenario"], result["figures"], result["quick"]
    rows = []
    pending = int(result.get("size", {}).get("pending") or 0)
    rate = int(result.get("size", {}).get("rate_per_s") or 0)
    side = hold_kind(result.get("hold", "jvm")).bench
    scenario_targets = TARGETS.get(scenario, [])
    if side is not None and scenario in side.targets:
        scenario_targets = list(side.targets[scenario])  # the hold's own replace them
    lateness = lateness_targets(scenario, rate)
    if side is not None and side.lateness_p99_ms is not None and scenario == "steady":
        lateness = [(f"lateness p99 (ms) at {rate:,}/s", "lateness_ms.p99",
                     side.lateness_p99_ms, "<=")]  # fmt: skip
    targets = [*lateness, *scenario_targets]
    if scenario == "idle" and result.get("warm_up_s"):  # the engine's bound, once warm
        targets.append(("idle CPU (% of one core), warm", "cpu_idle_pct", IDLE_WARM_PCT, "<="))
    limit = result.get("target_rate_per_s")
    if limit:  # the deliveries' rate is the limit's, not the engine's
        targets = [t for t in targets if t[1] != "fire_per_s"]
        targets += [
            ("busiest second (deliveries), at most the rate +10%", "busiest_second",
             limit * (1 + RATE_TOLERANCE), "<="),
            ("first-to-last arrival (schedules/s), the rate -10%", "visible_per_s",
             limit * (1 - RATE_TOLERANCE), ">="),
        ]  # fmt: skip
    for label, path, default_bound, op in targets:
        bound = restart_bound(path, pending, default_bound)
        value = lookup(figures, path)
        met = None if value is None else (value <= bound if op == "<=" else value >= bound)
        if quick and scenario in {"backlog", "restart", "catalog"}:
            met = None  # the target is defined at 1M pending; quick runs hold far fewer
        rows.append({"target": label, "measured": value, "bound": f"{op} {bound:g}", "met": met})
    for label, key in ZERO:
        if key in figures:
            rows.append(
                {
                    "target": label,
                    "measured": figures[key],
                    "bound": "= 0",
                    "met": figures[key] == 0,
                }
            )
    return rows


def table(result: dict[str, Any]) -> str:
    """A plain-text report."""
    f, b = result["figures"], result["baseline"]
    m = result["machine"]
    quick = " (quick)" if result["quick"] else ""
    hold = result.get("hold", "jvm")
    jit = f", JIT {result['jit']}" if result.get("jit") else ""
    warm = f", after a {result['warm_up_s']:g} s warm-up" if result.get("warm_up_s") else ""
    lines = [
        f"scenario {result['scenario']}{quick}, hold {hold}{jit}{warm}: {m['cores']} cores, "
        f"{m['memory_gib']} GiB",
        "",
    ]
    limit = result.get("target_rate_per_s")
    rows = [
        ("ingest (schedules/s)", f.get("ingest_per_s"), b["produce_per_s"], "raw produce/s"),
        ("delivery (schedules/s)", f.get("fire_per_s"), b["consume_per_s"], "raw consume/s"),
        ("  first-to-last arrival (schedules/s)", f.get("visible_per_s"), b["consume_per_s"], ""),
        ("  busiest second (deliveries)", f.get("busiest_second"), limit,
         "target rate/s" if limit else ""),
        ("CPU per schedule, delayline / broker (us)",
         _pair(f, "cpu_us_per_schedule", "broker_cpu_us_per_schedule"), None, ""),
        ("  pipeline's: JVM/driver/workers", _roles(f.get("cpu_us_by_role")), None, ""),
        ("rows through the hold per schedule", f.get("hold_rows_per_schedule"), None, ""),
        ("lateness p50 (ms)", lookup(f, "lateness_ms.p50"), lookup(b, "latency_ms.p50"), "raw p50"),
        ("lateness p99 (ms)", lookup(f, "lateness_ms.p99"), lookup(b, "latency_ms.p99"), "raw p99"),
        ("lateness min/p90/max (ms)", _triple(f.get("lateness_ms")), None, ""),
        ("early / duplicates / lost", _zeros(f), None, ""),
        ("pipeline peak RSS (MiB)", f.get("peak_rss_mb"), None, ""),
        ("  at the peak: JVM/driver/workers", _roles(f.get("rss_at_peak_mb")), None, ""),
        ("broker peak RSS (MiB)", f.get("broker_peak_rss_mb"), None, ""),
        ("pipeline CPU idle / load (% core)", _pair(f, "cpu_idle_pct", "cpu_load_pct"), None, ""),
        ("  idle: JVM/driver/workers (% core)", _roles(f.get("cpu_idle_pct_by_role")), None, ""),
        ("  idle, JVM: rocksdb/jit/gc/other", _jvm_kinds(f.get("cpu_idle_pct_by_jvm_thread")),
         None, ""),
    ]  # fmt: skip
    for key in (
        "broker_cpu_idle_pct",
        "pending_held",
        "restart_ready_s",
        "first_delivery_after_restart_s",
        "first_batch_after_restart_ms",
        "ingest_finished_before_due_ms",
        "raised_early",
        "handed_over_before_due_ms",
    ):
        if key in f:
            rows.append((key.replace("_", " "), f[key], None, ""))
    side = hold_kind(hold).bench
    if side is not None:
        rows += [
            (label, _p50_p99_max(value) if isinstance(value, dict) else value, None, "")
            for label, value in side.rows(f.get(hold), b.get(hold))
        ]
    for key, label in (("accept_lag_ms", "write to accepted"), ("small_batch_ms", "batch of 100")):
        if key in f:
            rows.append((f"{label} p50/p99/max (ms)", _p50_p99_max(f[key]), None, ""))
    rows += _committer_rows(f.get("committers") or {})
    lines.append(f"{'figure':<36} {'measured':>14} {'limit':>10}  {'ratio':>7}  limit is")
    for name, value, limit, what in rows:
        ratio = (
            f"{value / limit:.3f}"
            if isinstance(value, int | float) and isinstance(limit, int | float) and limit
            else ""
        )
        lines.append(f"{name:<36} {fmt(value):>14} {fmt(limit):>10}  {ratio:>7}  {what}")
    lines += ["", f"{'target':<46} {'measured':>12} {'bound':>10}  met"]
    for row in evaluate(result):
        met = {True: "yes", False: "NO", None: "n/a"}[row["met"]]
        lines.append(f"{row['target']:<46} {fmt(row['measured']):>12} {row['bound']:>10}  {met}")
    return "\n".join(lines)


def _roles(by_role: dict[str, Any] | None) -> str | None:
    """A figure per role (RSS or CPU) as ``JVM/driver/workers``."""
    if not by_role:
        return None
    return "/".join(fmt(by_role.get(role)) for role in ("jvm", "driver", "python workers"))


def _jvm_kinds(by_kind: dict[str, Any] | None) -> str | None:
    """The JVM's CPU by thread kind as ``rocksdb/jit/gc/other``."""
    if not by_kind:
        return None
    return "/".join(fmt(by_kind.get(kind)) for kind in JVM_THREAD_KINDS)


def _p50_p99_max(values: dict[str, Any] | None) -> str | None:
    if not values:
        return None
    return "/".join(fmt(values.get(k)) for k in ("p50", "p99", "max"))


def write_json(result: dict[str, Any], path: Path) -> None:
    """The result without raw samples, plus the target evaluation."""
    clean = {
        **result,
        "figures": {k: v for k, v in result["figures"].items() if not k.startswith("_")},
    }
    clean["targets"] = evaluate(result)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean, indent=2) + "\n")


def plot(result: dict[str, Any], path: Path) -> None:
    """Lateness histogram and throughput (accepted, delivered per second) over time."""
    import matplotlib  # noqa: PLC0415 - heavy; only when plotting

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    f = result["figures"]
    if "_rss" in f:
        from delayline.bench.soak import plot_over_time  # noqa: PLC0415 - a scenario's own module loads only for it

        fig, ((left, right), (below_left, below_right)) = plt.subplots(2, 2, figsize=(12, 9))
        plot_over_time(f, below_left, below_right)
    else:
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    lateness = f.get("_lateness") or []
    left.hist(lateness, bins=50, color="#3b7dd8")
    left.set(
        title=f"lateness ({len(lateness):,} deliveries)", xlabel="ms after due", ylabel="deliveries"
    )
    arrivals = f.get("_arrivals") or []
    accepted = f.get("_accepted") or []
    t0 = min([a for a in arrivals[:1]] + [ms for ms, _ in accepted[:1]], default=0)
    if arrivals:
        per_s: dict[int, int] = {}
        for ms in arrivals:
            per_s[(ms - t0) // 1000] = per_s.get((ms - t0) // 1000, 0) + 1
        xs = sorted(per_s)
        right.plot(xs, [per_s[x] for x in xs], label="delivered / s")
    if len(accepted) > 1:
        xs2 = [(ms - t0) / 1000 for ms, _ in accepted[1:]]
        rates = [(b[1] - a[1]) / max(0.001, (b[0] - a[0]) / 1000) for a, b in pairwise(accepted)]
        right.plot(xs2, rates, label="accepted / s", alpha=0.7)
    right.set(title="throughput", xlabel="s", ylabel="schedules per second")
    if arrivals or len(accepted) > 1:  # nothing to label in an idle run
        right.legend()
    fig.suptitle(f"delayline bench: {result['scenario']}{' (quick)' if result['quick'] else ''}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def fmt(value: Any) -> str:
    """A figure for a table: ``-`` for none, thousands separated for whole numbers."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _triple(summary: dict[str, Any] | None) -> str:
    if not summary or summary.get("min") is None:
        return "-"
    return f"{summary['min']}/{summary['p90']}/{summary['max']}"


def _pair(f: dict[str, Any], a: str, b: str) -> str:
    return f"{f.get(a)} / {f.get(b)}"


def _zeros(f: dict[str, Any]) -> str:
    return " / ".join(str(f.get(k, "-")) for k in ("early", "duplicates", "lost"))


def _committer_rows(shares: dict[str, Any]) -> list[tuple[str, Any, Any, str]]:
    """Each committer's share (``bench --committers``): deliveries, lateness, CPU."""
    rows: list[tuple[str, Any, Any, str]] = []
    for name, share in sorted(shares.items()):
        parts = ",".join(map(str, share.get("partitions", []))) or "none"
        rows.append((f"committer {name} (partitions {parts})", share.get("delivered"), None, ""))
        late = share.get("lateness_ms")
        if late:
            rows.append(("  lateness p50/p99/max (ms)", _p50_p99_max(late), None, ""))
        if isinstance(share.get("cpu_load_pct"), int | float):
            rows.append(("  CPU load (% core)", share["cpu_load_pct"], None, ""))
    return rows
