"""The README's results table, generated from ``benchmarks/results/*.json``.

python -m delayline.bench.summary benchmarks/results
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ORDER = ("steady", "burst", "backlog", "restart", "restart-1k", "idle", "catalog")
"""Result files (``<name>.json``) in table order; ``restart-1k`` is the restart scenario
with ``--pending 1000`` (see ``benchmarks/run_all.sh``)."""


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
    head = (
        f"Measured on {machine.get('cores')} cores ({machine.get('cpu')}), "
        f"{machine.get('memory_gib')} GiB, Python {machine.get('python')}, "
        f"PySpark {machine.get('pyspark')}, Kafka 4.1.1 (local KRaft)."
        if machine
        else ""
    )
    return head + "\n\n" + "\n".join(rows)


def _fmt(value: Any) -> str:
    if isinstance(value, int):
        return f"{value:,}"
    return "-" if value is None else str(value)


if __name__ == "__main__":  # pragma: no cover
    print(markdown(Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results")))
