"""The arithmetic behind `delayline bench` figures."""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import time
from argparse import Namespace
from typing import Any

import pytest

from delayline.bench import sampler as s
from delayline.bench.report import evaluate, lookup, table
from delayline.bench.run import (
    BenchEnv,
    accept_lags_ms,
    accepted_timeline,
    cpu_per_schedule,
    delivery_figures,
    hold_rows,
    scenario_figures,
)
from delayline.bench.soak import KILL_GAP, kill_times_s, rss_per_minute
from delayline.bench.summary import rss_spread_pct
from delayline.cli.bench_flags import check_jit_and_warm_up
from delayline.core.stats import percentile, summary
from delayline.dev.harness import Delivery
from delayline.errors import BenchError, ConfigError


def test_percentile_is_nearest_rank() -> None:
    values = list(range(1, 101))
    assert [percentile(values, f) for f in (0.0, 0.5, 0.9, 0.99, 1.0)] == [1, 50, 90, 99, 100]
    assert percentile([7], 0.99) == 7
    with pytest.raises(BenchError, match="no values"):
        percentile([], 0.5)


def test_summary_of_nothing_is_all_none() -> None:
    assert summary([]) == {"min": None, "p50": None, "p90": None, "p99": None, "max": None}
    assert summary([3, 1, 2]) == {"min": 1, "p50": 2, "p90": 3, "p99": 3, "max": 3}


def delivery(sid: str, arrival_ms: int, timestamp_ms: int) -> Delivery:
    return Delivery(
        "t", 0, 0, timestamp_ms, arrival_ms, None, b"x", (("scheduler-key", sid.encode()),)
    )


def test_delivery_figures_count_early_duplicates_and_losses() -> None:
    due = {"a": 1000, "b": 2000, "c": 3000}
    seen = [
        delivery("a", 1500, 1400),
        delivery("a", 1600, 1400),  # duplicate
        delivery("b", 2100, 1999),  # written 1 ms early
        delivery("other", 0, 0),  # not part of this run
    ]
    f = delivery_figures(seen, due)
    assert (f["expected"], f["delivered"], f["lost"], f["duplicates"], f["early"]) == (
        3,
        2,
        1,
        1,
        1,
    )
    assert f["lateness_ms"]["min"] == 100
    assert f["lateness_ms"]["max"] == 600
    assert f["fire_per_s"] == round(3 / 1.1)  # from the earliest due (1000) to the last arrival
    assert f["visible_per_s"] == round(3 / 0.6)


def result(scenario: str, quick: bool, **figures: object) -> dict[str, Any]:
    base = {"early": 0, "duplicates": 0, "lost": 0}
    return {
        "scenario": scenario,
        "quick": quick,
        "figures": {**base, **figures},
        "baseline": {
            "produce_per_s": 1000,
            "consume_per_s": 2000,
            "latency_ms": {"p50": 5, "p99": 9},
        },
        "machine": {"cores": 2, "memory_gib": 24},
    }


def test_targets_are_judged_per_scenario() -> None:
    run = result("steady", False, lateness_ms={"p50": 8, "p99": 200}, ingest_per_s=500)
    run["size"] = {"rate_per_s": 5000}
    rows = {r["target"]: r["met"] for r in evaluate(run)}
    assert rows["lateness p99 (ms) at 5,000/s"] is True
    assert "lateness p50 (ms) at 5,000/s" not in rows
    assert rows["sustained ingest (schedules/s)"] is False
    assert rows["duplicates"] is True
    idle = {r["target"]: r["met"] for r in evaluate(result("idle", False, cpu_idle_pct=40.0))}
    assert idle["idle CPU (% of one core)"] is False
    assert "idle CPU (% of one core), warm" not in idle  # a cold JVM: the JIT compiles


def test_a_warm_idle_pipeline_is_held_to_three_percent_of_a_core() -> None:
    def warm(pct: float) -> dict[str, bool | None]:
        run = result("idle", False, cpu_idle_pct=pct)
        run["warm_up_s"] = 120
        return {r["target"]: r["met"] for r in evaluate(run)}

    assert warm(2.9)["idle CPU (% of one core), warm"] is True
    assert warm(3.1)["idle CPU (% of one core), warm"] is False
    assert warm(3.1)["idle CPU (% of one core)"] is True


@pytest.mark.parametrize(
    ("scenario", "rate", "p50_bound", "p99_bound"),
    [("trickle", 10, 10, 20), ("steady", 1_000, 10, 50), ("steady", 300, 10, 50)],
)
def test_lateness_bounds_follow_the_offered_rate(
    scenario: str, rate: int, p50_bound: int, p99_bound: int
) -> None:
    run = result(scenario, False, lateness_ms={"p50": p50_bound, "p99": p99_bound + 1})
    run["size"] = {"rate_per_s": rate}
    rows = {r["target"]: (r["met"], r["bound"]) for r in evaluate(run)}
    assert rows[f"lateness p50 (ms) at {rate:,}/s"] == (True, f"<= {p50_bound}")
    assert rows[f"lateness p99 (ms) at {rate:,}/s"] == (False, f"<= {p99_bound}")


def test_scale_targets_are_not_judged_on_quick_runs() -> None:
    rows = evaluate(result("backlog", True, peak_rss_mb=100))
    assert rows[0]["met"] is None
    assert "n/a" in table(result("backlog", True, peak_rss_mb=100))


def test_restart_bound_depends_on_what_is_pending() -> None:
    def first_delivery(pending: int) -> dict[str, Any]:
        run = result("restart", False, first_delivery_after_restart_s=12.0)
        run["size"] = {"pending": pending}
        return next(r for r in evaluate(run) if r["target"].startswith("first delivery"))

    assert first_delivery(1_000)["bound"] == "<= 10"
    assert first_delivery(1_000)["met"] is False
    assert first_delivery(1_000_000)["bound"] == "<= 15"
    assert first_delivery(1_000_000)["met"] is True


def test_accept_lag_is_the_end_of_the_batch_that_took_each_schedule() -> None:
    # Batches ended at 1,000 ms (2 accepted so far, 1 before the run) and 3,000 ms (4).
    timeline = [(500, 1), (1_000, 2), (3_000, 4)]
    sent = [900, 950, 1_100]
    assert accept_lags_ms(timeline, sent, before=1) == [100, 2_050, 1_900]
    # Not all accepted yet: only those that were are counted.
    assert accept_lags_ms(timeline, [*sent, 1_200, 1_300], before=1) == [100, 2_050, 1_900]
    assert accept_lags_ms([], sent, before=0) == []


def test_the_accepted_timeline_leaves_out_the_batches_of_a_warm_up(tmp_path: Any) -> None:
    env = BenchEnv("b:9092", tmp_path)
    lines = [  # (finished ms, accepted input events, own tombstones: never counted)
        (1_000, 500, 0),
        (2_000, 500, 400),
        (3_000, 7, 100),
        (4_000, 3, 0),
    ]
    env.progress_file.write_text(
        "".join(
            f'{{"finished_ms": {ms}, "counts": {{"planned": {n}, "own_tombstone": {own}}}}}\n'
            for ms, n, own in lines
        )
    )
    assert accepted_timeline(env) == [(1_000, 500), (2_000, 1_000), (3_000, 1_007), (4_000, 1_010)]
    env.accepted_after_ms = 2_500  # the warm-up's deliveries were all in by then
    assert accepted_timeline(env) == [(3_000, 7), (4_000, 10)]
    assert hold_rows(env) == 7 + 100 + 3, "own tombstones read back are rows of the hold"
    env.accepted_after_ms = 0
    assert hold_rows(env) == 1_010 + 500


def test_per_schedule_figures_divide_by_what_was_written_not_what_is_delivered(
    tmp_path: Any,
) -> None:
    """A scenario that cancels most of what it writes (the cancels one) expects few
    deliveries: ingest, CPU and hold rows are still per schedule written."""
    env = BenchEnv("b:9092", tmp_path)
    env.sampler = s.GroupSampler(1)
    env.sampler.samples = [s.Sample(0, 0, 0.0), s.Sample(1, 0, 0.7)]
    env.progress_file.write_text(
        '{"finished_ms": 500, "committed": true, "counts": {"planned": 70, "cancelled": 60}}\n'
    )
    due = {f"c-{i}": 1_000 for i in range(10)}
    deliveries = [
        Delivery("t", 0, i, 1_000, 1_000, None, b"x", (("scheduler-key", f"c-{i}".encode()),))
        for i in range(10)
    ]
    written = scenario_figures(env, deliveries, due, 0.0, 1.0, 1_000, None, written=70)
    assert written["hold_rows_per_schedule"] == round(130 / 70, 2)
    assert written["cpu_us_per_schedule"] == 10_000.0  # 0.7 s over 70
    assert written["ingest_per_s"] == 70
    delivered = scenario_figures(env, deliveries, due, 0.0, 1.0, 1_000, None)
    assert delivered["hold_rows_per_schedule"] == 13.0
    assert delivered["cpu_us_per_schedule"] == 70_000.0


def test_the_report_names_the_jit_and_the_warm_up() -> None:
    run = result("trickle", False)
    assert "hold jvm: 2 cores" in table(run)
    run.update(jit="full", warm_up_s=300.0)
    assert "scenario trickle, hold jvm, JIT full, after a 300 s warm-up: 2 cores" in table(run)


def test_lookup_walks_nested_keys() -> None:
    assert lookup({"a": {"b": 3}}, "a.b") == 3
    assert lookup({"a": None}, "a.b") is None


def test_sampler_cpu_never_goes_backwards(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([s.Sample(0, 10, 5.0), s.Sample(1, 10, 0.5), s.Sample(2, 10, 1.5)])

    def fake_read(_root: int, _also: object = ()) -> s.Sample:
        try:
            return next(readings)
        except StopIteration:
            g._stop.set()
            return s.Sample(3, 10, 1.5)

    monkeypatch.setattr(s, "read_group", fake_read)
    g = s.GroupSampler(1, interval_s=0)
    g._run()
    assert [x.cpu_s for x in g.samples][:3] == [5.0, 5.0, 6.0]  # killed tree, then a new one


def test_cpu_per_schedule_sums_every_delayline_process_over_the_window(tmp_path: Any) -> None:
    """The pipeline's tree and each committer apart count; the broker is its own figure;
    samples outside the window do not count."""

    def sampler(*cpu_s: float) -> s.GroupSampler:
        g = s.GroupSampler(1)
        g.samples = [s.Sample(t, 0, c) for t, c in enumerate(cpu_s)]
        return g

    env = BenchEnv("b:9092", tmp_path)
    env.sampler = sampler(1.0, 2.0, 3.0, 50.0)  # 2 s from t=0 to t=2; t=3 is outside
    # By role (jvm, driver, workers, other): the JVM 1.5 s, the driver 0.5 s, a worker
    # that exited (its share gone with it: 0, not negative).
    roles = [(1.0, 0.0, 0.5, 0.0), (1.5, 0.2, 0.0, 0.0), (2.5, 0.5, 0.1, 0.0), (9, 9, 9, 9)]
    env.sampler.samples = [
        s.Sample(x.at_s, 0, x.cpu_s, (), role)
        for x, role in zip(env.sampler.samples, roles, strict=True)
    ]
    env.broker_sampler = sampler(0.0, 0.5, 1.0, 9.0)
    env.committers = [(None, sampler(0.0, 0.25, 0.5, 9.0))]  # type: ignore[list-item]
    assert cpu_per_schedule(env, 10_000, 0, 2) == {
        "cpu_us_per_schedule": 250.0,  # (2 + 0.5) s over 10,000
        "broker_cpu_us_per_schedule": 100.0,
        "cpu_us_by_role": {"jvm": 150.0, "driver": 50.0, "python workers": 0.0, "other": 0.0},
    }
    assert "150.0/50.0/0.0" in table(
        result(
            "steady", False, cpu_us_by_role=cpu_per_schedule(env, 10_000, 0, 2)["cpu_us_by_role"]
        )
    )
    env.broker_sampler = None
    assert cpu_per_schedule(env, 0, 0, 2)["cpu_us_per_schedule"] is None
    assert cpu_per_schedule(env, 0, 0, 2)["broker_cpu_us_per_schedule"] is None
    env.sampler = sampler(1.0)  # one sample: no window
    assert cpu_per_schedule(env, 10, 0, 2)["cpu_us_per_schedule"] is None
    rows = {r["target"]: r for r in evaluate(result("steady", False, cpu_us_per_schedule=250.0))}
    assert rows["CPU per schedule, every delayline process (us)"]["met"] is False
    assert "250.0 / None" in table(result("steady", False, cpu_us_per_schedule=250.0))


def test_rss_at_peak_is_split_by_role() -> None:
    mib = 2**20
    g = s.GroupSampler(1)
    g.samples = [
        s.Sample(0, 6 * mib, 0.0, (3 * mib, mib, 2 * mib, 0)),
        s.Sample(1, 9 * mib, 1.0, (7 * mib, mib, mib, 0)),  # the peak
        s.Sample(2, 8 * mib, 2.0, (2 * mib, mib, 5 * mib, 0)),
    ]
    assert g.rss_at_peak_mb() == {"jvm": 7, "driver": 1, "python workers": 1, "other": 0}
    assert "7/1/1" in table(
        result("backlog", False, peak_rss_mb=9, rss_at_peak_mb=g.rss_at_peak_mb())
    )
    assert s.GroupSampler(1).rss_at_peak_mb() == {}


def test_idle_cpu_is_split_by_role_over_the_span_of_its_samples() -> None:
    g = s.GroupSampler(1)
    g.samples = [  # CPU by role: JVM, driver, workers, other (seconds)
        s.Sample(10.0, 0, 1.0, (0, 0, 0, 0), (0.5, 0.4, 0.1, 0.0)),
        s.Sample(12.0, 0, 1.1, (0, 0, 0, 0), (0.56, 0.42, 0.12, 0.0)),
        s.Sample(14.0, 0, 1.2, (0, 0, 0, 0), (0.62, 0.44, 0.14, 0.0)),
    ]
    by_role = g.cpu_percent_by_role(9.0, 15.0)  # the window's samples span 4 s, not 6
    assert by_role == pytest.approx(
        {"jvm": 3.0, "driver": 1.0, "python workers": 1.0, "other": 0.0}
    )
    assert sum(by_role.values()) == pytest.approx(g.cpu_percent(9.0, 15.0))
    assert g.cpu_percent_by_role(20.0, 30.0) == {}
    rounded = {role: round(pct, 2) for role, pct in by_role.items()}  # as the scenario keeps it
    assert "3.0/1.0/1.0" in table(
        result("idle", False, cpu_idle_pct=5.0, cpu_idle_pct_by_role=rounded)
    )


def test_read_group_counts_every_process_in_one_role() -> None:
    sample = s.read_group(os.getpid())
    assert sum(sample.rss_by_role) == sample.rss_bytes
    assert sample.rss_by_role[s.ROLES.index("driver")] > 0  # the root is the driver


def test_a_command_the_jvm_spawns_counts_its_cpu_not_the_jvms_memory_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child of the JVM that is neither Java nor Python (a command it spawns, sharing
    its memory until it runs) adds CPU, not RSS; anything else's RSS counts."""

    def stat(ppid: int, ticks: int, pages: int) -> list[str]:
        return ["S", str(ppid), *["0"] * 9, str(ticks), "0", *["0"] * 6, "1", "0", str(pages)]

    stats = {1: stat(0, 1, 10), 2: stat(1, 5, 1_000), 3: stat(2, 2, 1_000), 4: stat(1, 3, 7)}
    roles = {1: "driver", 2: "jvm", 3: "other", 4: "other"}
    monkeypatch.setattr(s, "proc_stats", lambda: stats)
    monkeypatch.setattr(s, "tree", lambda root, _stats: [1, 2, 3, 4])
    monkeypatch.setattr(s, "_role", lambda pid, _root, _started: roles[pid])
    sample = s.read_group(1)
    page = os.sysconf("SC_PAGE_SIZE")
    assert sample.rss_bytes == (10 + 1_000 + 7) * page, "the spawned command's RSS left out"
    assert sample.rss_by_role[s.ROLES.index("other")] == 7 * page
    assert sample.cpu_s * os.sysconf("SC_CLK_TCK") == 11, "its CPU counted"


def test_rss_spread_is_relative_to_the_lowest_run() -> None:
    assert rss_spread_pct([2000, 2100, 2200]) == 10.0
    assert rss_spread_pct([1800, 3100, 2500]) == 72.2


def test_a_child_python_counts_as_a_worker_every_time() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)  # past exec: its name is python's, not ours forked
        for _ in range(2):  # the second reading uses the role remembered
            sample = s.read_group(os.getpid())
            assert sample.rss_by_role[s.ROLES.index("python workers")] > 0
            assert sum(sample.rss_by_role) == sample.rss_bytes
    finally:
        child.kill()
        child.wait()


def test_soak_kills_fall_mid_run_far_enough_apart() -> None:
    for seed in range(50):
        times = kill_times_s(1200, random.Random(seed))
        assert len(times) == 3
        assert all(120 <= t <= 1080 for t in times)
        assert all(b - a >= KILL_GAP * 1200 for a, b in itertools.pairwise(times))


def test_soak_rss_is_the_peak_of_each_minute_from_the_start() -> None:
    mib = 2**20
    samples = [(99.0, 9 * mib), (100.0, 100 * mib), (130.0, 300 * mib), (159.9, 200 * mib),
               (220.0, 50 * mib)]  # fmt: skip
    assert rss_per_minute(samples, began_s=100.0) == [300, 0, 50]
    assert rss_per_minute([], began_s=0.0) == []


def test_a_holds_own_rows_and_bounds_come_from_its_bench_side() -> None:
    r = result("steady", False, ingest_per_s=900, lateness_ms={"p99": 800},
               redis={"used_memory_mb": 1.4, "peak_memory_mb": 8.6, "pending": 3,
                      "bytes_per_pending": 512})  # fmt: skip
    r["hold"] = "redis"
    r["baseline"]["redis"] = {"writes_per_s": 16579, "ping_us": summary([122, 253, 1105])}
    text = table(r)
    assert "raw Redis PING p50/p99/max (us)" in text
    assert "253/1,105" in text  # a summary shows as p50/p99/max, formatted
    assert "Redis bytes per pending schedule" in text
    bounds = {t["target"]: t["bound"] for t in evaluate(r)}
    assert bounds["sustained ingest (schedules/s)"] == ">= 50000"  # the hold's, not 20000
    assert any(b == "<= 1000" for b in bounds.values())  # its lateness bound at steady


@pytest.mark.parametrize(
    ("scenario", "jit", "warm_up_ms", "master", "refused"),
    [("steady", ["full"], 60_000, None, None),
     ("ladder", ["c1", "full"], 60_000, None, None),
     ("trickle", ["c1", "full"], None, None, "one setting"),
     ("restart", None, 60_000, None, "not restart"),
     ("idle", None, 60_000, None, None),
     ("backlog", None, 60_000, None, "not backlog"),
     ("steady", None, 60_000, "spark://h:7077", "would be cold"),
     ("committer", ["c1"], None, None, "runs no pipeline"),
     ("catalog", None, 60_000, None, "runs no pipeline")],
)  # fmt: skip
def test_jit_and_warm_up_are_refused_where_the_figures_would_not_hold(
    scenario: str, jit: list[str] | None, warm_up_ms: int | None, master: str | None,
    refused: str | None,
) -> None:  # fmt: skip
    args = Namespace(scenario=scenario, jit=jit, warm_up_ms=warm_up_ms, master=master)
    if refused is None:
        check_jit_and_warm_up(args)
    else:
        with pytest.raises(ConfigError, match=refused):
            check_jit_and_warm_up(args)


def test_the_jvms_idle_cpu_is_split_by_thread_kind() -> None:
    """RocksDB's compactions, the JIT, the collector and the rest, from two readings of
    each thread: a thread that started meanwhile counts whole, one that ended is left out."""
    assert [s._jvm_kind(n) for n in ("rocksdb:low", "C2 CompilerThre", "G1 Conc#0",
                                      "VM Periodic Tas", "stream executio")] == [
        "rocksdb", "jit", "gc", "gc", "other"]  # fmt: skip
    before = {(1, 10): ("rocksdb", 5.0), (1, 11): ("jit", 2.0), (1, 12): ("other", 9.0)}
    after = {(1, 10): ("rocksdb", 5.6), (1, 11): ("jit", 2.1), (1, 13): ("other", 0.2),
             (1, 12): ("gc", 0.1)}  # fmt: skip  # 12: a new thread with an old one's id
    assert s.jvm_kinds_between(before, after, 10.0) == {
        "rocksdb": 6.0, "jit": 1.0, "gc": 1.0, "other": 2.0}  # fmt: skip
    split = {"rocksdb": 6.0, "jit": 1.0, "gc": 0.0, "other": 2.0}
    report = table(result("backlog", False, cpu_idle_pct_by_jvm_thread=split))
    assert "idle, JVM: rocksdb/jit/gc/other" in report
    assert "6.0/1.0/0.0/2.0" in report
