"""The ladder's arithmetic (per schedule, what each rung adds) and its CPU reading."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from delayline.bench import committers, ladder
from delayline.bench import sampler as s
from delayline.bench.due_rung import delivered
from delayline.bench.ladder import RungRun, costliest, size_total, table
from delayline.bench.report import write_json
from delayline.cli.bench_flags import _rungs
from delayline.pipeline.metrics import PipelineMetrics


def run(rung: str, total_us: float, *, warm: bool = True, jit: str = "c1") -> dict[str, Any]:
    """A run's result as the ladder writes it, all its CPU in the JVM."""
    return {"rung": rung, "jit": jit, "warm": warm, "rows": 1000, "seconds": 1.0,
            "per_s": 1000, "us_per_schedule": {"jvm": total_us, "total": total_us}}  # fmt: skip


def test_per_schedule_figures_divide_by_the_rows() -> None:
    r = RungRun("hold", True, 200_000, 4.0, {"jvm": 6.0, "python workers": 2.0, "broker": 0.5})
    assert r.per_s == 50_000
    assert r.us_per_schedule() == {"jvm": 30.0, "python workers": 10.0, "broker": 2.5,
                                   "total": 42.5}  # fmt: skip
    assert RungRun("hold", True, 0, 0.0, {}).per_s == 0.0


def test_the_costliest_rung_is_the_largest_step_between_warm_runs() -> None:
    runs = [run("source", 10), run("source", 30, warm=False), run("validate", 15),
            run("shuffle", 25), run("hold", 70), run("fire", 90),
            run("hold", 500, jit="full")]  # fmt: skip
    assert costliest(runs) == ("hold", 45.0)
    assert costliest(runs, "full") == ("hold", 500.0)
    assert costliest([run("source", 5, warm=False)]) is None
    text = table(runs)
    assert "the rung adds" in text
    assert "45.0 us" in text  # hold over shuffle


def test_cpu_by_role_sees_a_child_burn_cpu_and_keeps_it_once_reaped() -> None:
    """Under a parent of its own (the test process's other children come and go: one
    that exited between two looks once took "python workers" down): a Python child is a
    worker while it runs; reaped, its time is its parent's, the root's."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    code = f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {burn!r}])\n"
    parent = subprocess.Popen([sys.executable, "-c", code + "time.sleep(30)"])
    try:
        alive = _cpu_when(parent.pid, lambda r: r["python workers"] > 0.2)
        assert set(alive) == set(s.ROLES)
        # Reaped, the child's half second is the parent's: nothing is lost.
        _cpu_when(parent.pid, lambda r: r["python workers"] == 0 and r["driver"] >= 0.5)
    finally:
        parent.kill()
        parent.wait()


def _cpu_when(root: int, wanted: Any, timeout_s: float = 20.0) -> dict[str, float]:
    """:func:`cpu_by_role` of ``root`` once ``wanted`` says so (the host may be busy)."""
    deadline = time.monotonic() + timeout_s
    while True:
        roles = s.cpu_by_role(root)
        if wanted(roles):
            return roles
        assert time.monotonic() < deadline, f"not seen in {timeout_s} s: {roles}"
        time.sleep(0.05)


def test_a_ladder_result_is_written_as_json(tmp_path: Path) -> None:
    runs = [run("source", 10), run("hold", 70)]
    result = {"scenario": "ladder", "quick": True, "machine": {},
              "figures": {"runs": runs, "costliest": costliest(runs)}}  # fmt: skip
    write_json(result, tmp_path / "ladder.json")
    written = json.loads((tmp_path / "ladder.json").read_text())
    assert written["figures"]["costliest"] == ["hold", 60.0]
    assert written["targets"] == []  # the ladder finds, it has no bounds


def test_rungs_flag_keeps_the_ladder_order_and_refuses_unknown_rungs() -> None:
    assert _rungs("full, source") == ["source", "full"]
    with pytest.raises(ValueError, match="--rungs takes source"):
        _rungs("fire,sink")
    with pytest.raises(ValueError, match="--rungs takes"):
        _rungs(" , ")


def test_size_total_reads_spark_s_formats_of_a_size_metric() -> None:
    many = "total (min, med, max (stageId: taskId))\n12.5 MiB (1.0 KiB, 6.2 MiB, 6.3 MiB (stage 3.0: task 7))"
    assert size_total(many) == round(12.5 * 2**20)
    assert size_total("1,023.0 B") == 1023
    assert size_total("total (min, med, max)\n0.0 B (0.0 B, 0.0 B, 0.0 B)") == 0
    assert size_total("") == 0


def test_the_due_rung_counts_what_the_pipelines_metrics_say_was_delivered() -> None:
    pipeline = SimpleNamespace(metrics=PipelineMetrics())
    assert delivered(pipeline) == 0
    pipeline.metrics.fired.inc(7)
    pipeline.metrics.fired.inc(5)
    assert delivered(pipeline) == 12
    assert "due" in ladder.RUNGS
    assert ladder.RUNGS.index("due") == ladder.RUNGS.index("full") + 1, "it adds to full"


def test_cpu_by_thread_kind_tells_librdkafka_s_threads_from_the_interpreter_s() -> None:
    """A child burns half a second in its main thread, a quarter in a thread it names as
    librdkafka names its own (``rdk:...``) and a fifth in one that then ends: each lands
    in its kind."""
    code = (
        "import threading, time\n"
        "def burn(s):\n"
        "    t = time.thread_time()\n"
        "    while time.thread_time() - t < s: pass\n"
        "def rdk():\n"
        "    open(f'/proc/self/task/{threading.get_native_id()}/comm', 'w').write('rdk:test')\n"
        "    burn(0.25)\n"
        "    time.sleep(30)\n"
        "threading.Thread(target=rdk, daemon=True).start()\n"
        "ended = threading.Thread(target=burn, args=(0.2,))\n"
        "ended.start()\n"
        "ended.join()\n"
        "burn(0.5)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while True:
            kinds = s.cpu_by_thread_kind(child.pid)
            if kinds["python"] >= 0.45 and kinds["librdkafka"] >= 0.2 and kinds["exited"] >= 0.15:
                break
            assert time.monotonic() < deadline, f"not seen in 20 s: {kinds}"
            time.sleep(0.05)
        assert set(kinds) == set(s.THREAD_KINDS)
        # ticks round; the main thread's burn is neither librdkafka's nor an ended one's
        assert kinds["librdkafka"] < 0.45
        assert kinds["exited"] < 0.4
    finally:
        child.kill()
        child.wait()
    assert s.cpu_by_thread_kind(child.pid) == {}


def test_the_committer_s_steady_cpu_is_per_kind_and_per_delivery() -> None:
    before = {"python": 10.0, "librdkafka": 4.0, "exited": 0.5}
    after = {"python": 12.4, "librdkafka": 4.8, "exited": 0.5}
    steady = committers._steady(before, after, 8.0, 4_000)
    assert steady == {
        "seconds": 8.0,
        "cpu_pct": 40.0,
        "cpu_pct_by_thread": {"python": 30.0, "librdkafka": 10.0, "exited": 0.0},
        "cpu_us_per_delivery": 100.0,  # 3.2 CPU-s over 32,000 deliveries
    }
    assert committers._steady({}, after, 8.0, 4_000) is None
    step = {"offered_per_s": 4_000, "written_per_s": 3_990, "delivered": 40_000,
            "lateness_ms": {"p50": 5, "p99": 30, "max": 40}, "cpu_pct": 38.5}  # fmt: skip
    figures = {"steps": [{**step, "steady": steady}, step], "on_time_ms": 50,
               "on_time_per_s": 4_000, "broker_transactional_per_s": 60_000}  # fmt: skip
    rows = committers.ceiling_table(figures).splitlines()
    assert "40.0 (30.0 / 10.0)  100.0" in rows[1]
    assert rows[2].endswith("None (None / None)  None")  # a result from before the split


def test_the_committer_s_idle_cpu_is_read_by_kind_and_shown_after_the_steps() -> None:
    before = {"python": 10.0, "librdkafka": 4.0, "exited": 0.5}
    after = {"python": 10.1, "librdkafka": 4.04, "exited": 0.5}
    split = committers._cpu_split(before, after, 20.0, digits=2)
    assert split is not None
    assert split["cpu_pct"] == 0.7  # 0.14 CPU-s over 20 s
    assert split["cpu_pct_by_thread"] == {"python": 0.5, "librdkafka": 0.2, "exited": 0.0}
    step = {"offered_per_s": 1_000, "written_per_s": 1_000, "delivered": 10_000,
            "lateness_ms": {"p50": 5, "p99": 30, "max": 40}, "cpu_pct": 10.0}  # fmt: skip
    figures = {"steps": [step], "on_time_ms": 50, "on_time_per_s": 1_000,
               "broker_transactional_per_s": 60_000,
               "idle": {"pending": 1_000, **split}}  # fmt: skip
    last = committers.ceiling_table(figures).splitlines()[-1]
    assert last == (
        "idle, 1,000 pending and none due: 0.7% of a core over 20.0 s (python 0.5, librdkafka 0.2)"
    )
    assert "idle" not in committers.ceiling_table({**figures, "idle": None})
