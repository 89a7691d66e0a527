"""`delayline bench --quick` runs against a secured cluster and its figures hold together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from delayline.infra.broker import LocalBroker


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_quick_steady_bench_reports_exactly_once(
    secured_broker: LocalBroker, tmp_path: Path
) -> None:
    """On an external cluster, secured (SASL_SSL, SCRAM, ACLs): as its administrator; with
    the pipeline's default JIT (not the suite's first tier) and a warm-up, whose
    schedules the figures leave out."""
    out = tmp_path / "steady.json"
    external = ["--bootstrap-servers", secured_broker.config.bootstrap_servers,
                "--kafka-config", str(secured_broker.secure_files.admin_properties)]  # fmt: skip
    png = tmp_path / "steady.png"
    result = subprocess.run(
        [sys.executable, "-m", "delayline", "bench", "--scenario", "steady", "--quick",
         *external, "--json", str(out), "--plot", str(png),
         "--work-dir", str(tmp_path / "work"), "--warm-up", "4s"],
        capture_output=True, text=True, timeout=600, check=False,
        env={k: v for k, v in os.environ.items() if k != "DELAYLINE_JAVA_OPTIONS"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "lateness p99 (ms)" in result.stdout
    report = json.loads(out.read_text())
    figures = report["figures"]
    assert report["warm_up"]["schedules"] == 500 * 4
    assert figures["expected"] == 300 * 15
    # Accepted counts only the scenario's: not ahead of what was written.
    assert figures["ingest_per_s"] <= 300 * 1.2
    assert (figures["delivered"], figures["early"], figures["duplicates"], figures["lost"]) == (
        figures["expected"], 0, 0, 0,
    )  # fmt: skip
    assert figures["lateness_ms"]["min"] >= 0
    assert report["baseline"]["produce_per_s"] > 0
    assert {t["target"] for t in report["targets"]} >= {
        "early (record timestamp before due)",
        "early (seen by a read_committed reader before due)",
        "duplicates",
        "lost",
    }
    assert figures["early_seen"] == 0
    assert png.stat().st_size > 10_000
