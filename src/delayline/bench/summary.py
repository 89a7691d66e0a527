"""The README's results table, generated from ``benchmarks/results/*.json``.

python -m delayline.bench.summary benchmarks/results

prints the targets table, then the holds side by side (``<hold>-<scenario>.json``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from delayline.bench.report import fmt
from delayline.holds.registry import HOLD_KINDS

ORDER = ("trickle", "steady-1000", "steady", "burst", "burst-rate-5000", "burst-ahead",
         "backlog", "backlog-2", "backlog-3", "restart", "restart-1k", "idle", "soak",
         "recurring", "retry-storm", "catalog")  # fmt: skip
"""Result files (``<name>.json``) in table order; ``backlog-2``/``-3`` repeat the backlog,
``restart-1k`` is the restart scenario with ``--pending 1000``, ``steady-1000`` the steady
one with ``--rate 1000``, ``burst-rate-5000`` the burst with ``--target-rate 5000/s``
(``benchmarks/run_all.sh``)."""
BACKLOG_RUNS = ("backlog", "backlog-2", "backlog-3")
RSS_SPREAD_PCT = 10
"""The bound: the backlog's peak RSS the same within 10% over three runs."""


def markdown(results_dir: Path) -> str:
    """One row per target of every scenario found, measured next to target."""
    rows = ["| scenario | target | measured | bound | met |", "|---|---|---|---|---|"]
    machine: dict[str, Any] = {}
    for name in ORDER:
        path = results_dir / f"{name}.json"
        if not path.exists():
            continue
        result = json.loads(path.read_text())
        machine = result["machine"]
        for t in result["targets"]:
            met = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
            rows.append(f"| {name} | {t['target']} | {fmt(t['measured'])} | {t['bound']} | {met} |")
    rows.extend(_rss_spread(results_dir))
    head = (
        f"Measured on {machine.get('cores')} cores ({machine.get('cpu')}), "
        f"{machine.get('memory_gib')} GiB, Python {machine.get('python')}, "
        f"PySpark {machine.get('pyspark')}, Kafka 4.1.1 (local KRaft)."
        if machine
        else ""
    )
    return head + "\n\n" + "\n".join(rows)


HOLD_FIGURES = (
    ("ingest (schedules/s)", "ingest_per_s"),
    ("delivery (schedules/s)", "fire_per_s"),
    ("lateness p50 (ms)", "lateness_ms.p50"),
    ("lateness p99 (ms)", "lateness_ms.p99"),
    ("pipeline peak RSS (MiB)", "peak_rss_mb"),
    ("pending schedules held", "pending_held"),
    ("first delivery after a restart (s)", "first_delivery_after_restart_s"),
    ("early / duplicates / lost", None),
    *(row for kind in HOLD_KINDS.values() if kind.bench for row in kind.bench.compared),
)
"""The figures the holds table compares (each hold's own among them)."""

HOLDS = tuple(kind.name for kind in HOLD_KINDS.values() if kind.bench is not None)
"""The holds benched beside the default one, each as ``<hold>-<scenario>.json``: those
with a bench side of their own."""


def holds_markdown(results_dir: Path, holds: tuple[str, ...] = HOLDS) -> str:
    """The default hold and ``holds`` side by side: every scenario that one of ``holds``
    has a ``<hold>-<name>.json`` for, beside its ``<name>.json``; then each hold's own
    targets. A figure no run of the scenario has is left out; one that some lack is ``-``."""
    rows = ["| scenario | figure | jvm | " + " | ".join(holds) + " |",
            "|---|---|" + "---|" * (len(holds) + 1)]  # fmt: skip
    targets = ["| scenario | target | measured | bound | met |", "|---|---|---|---|---|"]
    for name in ORDER:
        runs = [_load(results_dir / f"{hold}-{name}.json") for hold in holds]
        if all(r is None for r in runs):
            continue
        base = _load(results_dir / f"{name}.json")
        for label, key in HOLD_FIGURES:
            values = [None if r is None else _figure(r["figures"], key) for r in (base, *runs)]
            if all(v is None for v in values[1:]):
                continue
            rows.append(f"| {name} | {label} | " + " | ".join(fmt(v) for v in values) + " |")
        for hold, run in zip(holds, runs, strict=True):
            for t in [] if run is None else run["targets"]:
                met = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
                targets.append(f"| {hold}-{name} | {t['target']} | {fmt(t['measured'])} "
                               f"| {t['bound']} | {met} |")  # fmt: skip
    return "\n".join(rows) + "\n\n" + "\n".join(targets)


CLUSTER_RUNS = (("cluster-burst-lead-default", "lead 5 s"), ("cluster-burst-lead-0", "lead 0"))
"""``delayline bench --master`` runs (``benchmarks/run_all.sh``), and their lead."""


def cluster_markdown(results_dir: Path) -> str:
    """Each cluster run's local and cluster figures side by side, then what each
    executor of the cluster wrote (committed batches)."""
    from delayline.bench.cluster import ROWS  # noqa: PLC0415 - imports the bench

    runs = [(label, r) for name, label in CLUSTER_RUNS
            if (r := _load(results_dir / f"{name}.json")) is not None]  # fmt: skip
    if not runs:
        return ""
    head = "| figure | " + " | ".join(f"{label}, local | {label}, cluster" for label, _ in runs)
    rows = [head + " |", "|---|" + "---|---|" * len(runs)]
    ready = [(r["pipeline_ready_s"], r["cluster"]["pipeline_ready_s"]) for _, r in runs]
    rows.append("| pipeline ready (s) | " + " | ".join(f"{a} | {b}" for a, b in ready) + " |")
    for label, key in ROWS:
        cells = [
            f"{fmt(_figure(r['figures'], key))} | {fmt(_figure(r['cluster']['figures'], key))}"
            for _, r in runs
        ]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    work = ["| run | executor | tasks | delivered | handed to the committer |",
            "|---|---|---|---|---|"]  # fmt: skip
    for label, r in runs:
        for executor, done in r["cluster"]["figures"].get("executors", {}).items():
            counts = " | ".join(fmt(done.get(k, 0)) for k in ("tasks", "fire", "handed"))
            work.append(f"| {label} | {executor} | {counts} |")
    return "\n".join(rows) + "\n\n" + "\n".join(work)


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def _figure(figures: dict[str, Any], key: str | None) -> Any:
    if key is None:
        zeros = [figures.get(k) for k in ("early", "duplicates", "lost")]
        return None if None in zeros else " / ".join(str(z) for z in zeros)
    value: Any = figures
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _rss_spread(results_dir: Path) -> list[str]:
    """A row for the spread of the backlog's peak RSS over its runs (when all exist)."""
    paths = [results_dir / f"{name}.json" for name in BACKLOG_RUNS]
    if not all(p.exists() for p in paths):
        return []
    peaks = [json.loads(p.read_text())["figures"]["peak_rss_mb"] for p in paths]
    spread = rss_spread_pct(peaks)
    met = "yes" if spread <= RSS_SPREAD_PCT else "**no**"
    runs = ", ".join(f"{p:,}" for p in peaks)
    return [f"| backlog x3 | peak RSS spread over three runs (%) ({runs} MiB) | {spread} "
            f"| <= {RSS_SPREAD_PCT} | {met} |"]  # fmt: skip


def rss_spread_pct(peaks: list[int]) -> float:
    """(highest - lowest) / lowest, in percent, one decimal."""
    return round(100 * (max(peaks) - min(peaks)) / min(peaks), 1)


if __name__ == "__main__":  # pragma: no cover
    results = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results")
    print(markdown(results))
    print()
    print(holds_markdown(results))
    print()
    print(cluster_markdown(results))
