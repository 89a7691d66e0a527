"""The cluster bench's reports: local mode and the cluster side by side, and the work of
each executor (from results, no cluster needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from delayline.bench.cluster import side_by_side
from delayline.bench.summary import cluster_markdown


def result(local_ingest: int, cluster_ingest: int, executors: dict[str, Any]) -> dict[str, Any]:
    zeros = {"early": 0, "duplicates": 0, "lost": 0}
    return {
        "scenario": "burst",
        "pipeline_ready_s": 13.5,
        "figures": {"ingest_per_s": local_ingest, "lateness_ms": {"p99": 412}, **zeros},
        "cluster": {
            "master": "spark://127.0.0.1:7077",
            "pipeline_ready_s": 24.6,
            "figures": {
                "ingest_per_s": cluster_ingest,
                "lateness_ms": {"p99": 565},
                "executors": executors,
                **zeros,
            },
        },
    }


def test_side_by_side_puts_each_figure_of_both_modes_on_one_row() -> None:
    text = side_by_side(
        result(1634, 963, {"vm/0": {"tasks": 7, "fire": 0, "handed": 2524}, "vm/1": {"tasks": 7}})
    )
    lines = text.splitlines()
    assert lines[0].startswith("burst in local mode and on spark://127.0.0.1:7077")
    assert any(line.split() == ["pipeline", "ready", "(s)", "13.5", "24.6"] for line in lines)
    assert any(line.split() == ["ingest", "(schedules/s)", "1,634", "963"] for line in lines)
    assert any(line.split() == ["lateness", "p99", "(ms)", "412", "565"] for line in lines)
    assert any(line.split() == ["delivery", "(schedules/s)", "-", "-"] for line in lines)
    assert any(line.split() == ["vm/0", "7", "0", "2,524"] for line in lines)
    assert any(line.split() == ["vm/1", "7", "0", "0"] for line in lines)


def test_the_summary_table_has_a_column_pair_per_cluster_run(tmp_path: Path) -> None:
    assert cluster_markdown(tmp_path) == ""  # no runs: no table
    (tmp_path / "cluster-burst-lead-default.json").write_text(
        json.dumps(result(1634, 963, {"vm/0": {"tasks": 7, "handed": 2524}}))
    )
    (tmp_path / "cluster-burst-lead-0.json").write_text(
        json.dumps(result(1500, 900, {"vm/1": {"tasks": 9, "fire": 2476}}))
    )
    table = cluster_markdown(tmp_path)
    head = "| figure | lead 5 s, local | lead 5 s, cluster | lead 0, local | lead 0, cluster |"
    assert head in table
    assert "| pipeline ready (s) | 13.5 | 24.6 | 13.5 | 24.6 |" in table
    assert "| ingest (schedules/s) | 1,634 | 963 | 1,500 | 900 |" in table
    assert "| early | 0 | 0 | 0 | 0 |" in table
    assert "| lead 5 s | vm/0 | 7 | 0 | 2,524 |" in table
    assert "| lead 0 | vm/1 | 9 | 2,476 | 0 |" in table
