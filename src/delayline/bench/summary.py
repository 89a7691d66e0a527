"""The README's results table, generated from ``benchmarks/results/*.json``.

python -m delayline.bench.summary benchmarks/results
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ORDER = ("trickle", "steady-1000", "steady", "burst", "backlog", "backlog-2", "backlog-3",
         "restart", "restart-1k", "idle", "catalog")  # fmt: skip
"""Result files (``<name>.json``) in table order; ``backlog-2``/``-3`` repeat the backlog,
``restart-1k`` is the restart scenario with ``--pending 1000``, ``steady-1000`` the steady
one with ``--rate 1000`` (``benchmarks/run_all.sh``)."""
BACKLOG_RUNS = ("backlog", "backlog-2", "backlog-3")
RSS_SPREAD_PCT = 10
"""The engine issue's bound: the backlog's peak RSS the same within 10% over three runs."""


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
            rows.append(
                f"| {name} | {t['target']} | {_fmt(t['measured'])} | {t['bound']} | {met} |"
            )
    rows.extend(_rss_spread(results_dir))
    head = (
        f"Measured on {machine.get('cores')} cores ({machine.get('cpu')}), "
        f"{machine.get('memory_gib')} GiB, Python {machine.get('python')}, "
        f"PySpark {machine.get('pyspark')}, Kafka 4.1.1 (local KRaft)."
        if machine
        else ""
    )
    return head + "\n\n" + "\n".join(rows)


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


def _fmt(value: Any) -> str:
    if isinstance(value, int):
        return f"{value:,}"
    return "-" if value is None else str(value)


if __name__ == "__main__":  # pragma: no cover
    print(markdown(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results")))
