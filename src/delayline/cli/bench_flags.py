"""The flags of ``delayline bench``, and which combinations a scenario takes."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

from delayline.bench import ladder
from delayline.bench.scenarios import (
    SCENARIOS,
    SIZES,
    WARM_UP_RATE_PER_S,
    WARM_UP_SCENARIOS,
    Size,
)
from delayline.cli._common import (
    add_kafka_config,
    duration_arg,
    env_bool,
    env_flag,
    positive_int,
)
from delayline.cli._holds import add_hold_flags
from delayline.contract.pacing import TargetRates
from delayline.core.units import parse_duration_ms
from delayline.errors import ConfigError
from delayline.pipeline.config import (
    DEFAULT_INFLIGHT_PARTITIONS,
    DEFAULT_JAVA_OPTIONS,
    JIT_OPTIONS,
)

PENDING_SCENARIOS = ("backlog", "restart", "idle")
"""The scenarios that hold far-future schedules (``--pending`` sets how many)."""
RATE_SCENARIOS = ("steady", "trickle", "retry-storm")
"""The scenarios that write at a rate (``--rate`` sets it)."""
PIPELINELESS = ("catalog", "committer", "takeover")
"""Scenarios that run no pipeline: the catalog alone, or `delayline committer`s alone."""


def add_flags(p: argparse.ArgumentParser) -> None:
    """Add every flag of ``delayline bench`` to ``p``."""
    env_flag(
        p,
        "--scenario",
        env="DELAYLINE_BENCH_SCENARIO",
        default="steady",
        choices=[*sorted(SCENARIOS), *PIPELINELESS, "ladder"],
        help="what to measure",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        default=env_bool("DELAYLINE_BENCH_QUICK"),
        help="a small variant that finishes in about a minute [env DELAYLINE_BENCH_QUICK=1]",
    )
    env_flag(
        p,
        "--pending",
        env="DELAYLINE_BENCH_PENDING",
        default=None,
        type=positive_int,
        help="far-future schedules held during the scenario, instead of its own number "
        f"({', '.join(PENDING_SCENARIOS)})",
    )
    env_flag(
        p,
        "--pending-span",
        env="DELAYLINE_BENCH_PENDING_SPAN",
        default="0s",
        type=duration_arg(parse_duration_ms),
        dest="pending_span_ms",
        metavar="DURATION",
        help="the far-future schedules are due from a day out, evenly over this long "
        "(0s: all within about a second)",
    )
    env_flag(
        p,
        "--rate",
        env="DELAYLINE_BENCH_RATE",
        default=None,
        type=positive_int,
        help="schedules written per second, instead of the scenario's own "
        f"({', '.join(RATE_SCENARIOS)})",
    )
    env_flag(
        p,
        "--committers",
        env="DELAYLINE_BENCH_COMMITTERS",
        default=1,
        type=positive_int,
        help="committers delivering what the pipeline hands over: its own and this many "
        "less one `delayline committer`s beside it (the figures show each one's share); "
        "--scenario committer measures one committer's ceiling alone, --scenario takeover "
        "two committers, one SIGKILLed",
    )
    env_flag(
        p,
        "--inflight-partitions",
        env="DELAYLINE_BENCH_INFLIGHT_PARTITIONS",
        default=DEFAULT_INFLIGHT_PARTITIONS,
        type=positive_int,
        help="the pipeline's --inflight-partitions: each committer delivers a partition "
        "with producers of its own, one transaction per group (--scenario takeover: 4 "
        "unless set above 1)",
    )
    env_flag(
        p,
        "--target-rate",
        env="DELAYLINE_BENCH_TARGET_RATE",
        default=None,
        type=_rate,
        metavar="N/s",
        help="the pipeline's --target-rate on the bench's target topic: deliveries beyond "
        "it wait (the figures show the busiest second against it)",
    )
    env_flag(
        p,
        "--bootstrap-servers",
        env="DELAYLINE_BENCH_BOOTSTRAP_SERVERS",
        default=None,
        help="use this Kafka instead of a private broker (fresh topics are created)",
    )
    add_kafka_config(
        p,
        "Kafka client properties for --bootstrap-servers (see delayline run); its "
        "principal creates the bench's topics",
    )
    env_flag(
        p,
        "--json",
        env="DELAYLINE_BENCH_JSON",
        default=None,
        type=Path,
        dest="json_path",
        help="write the result as JSON here",
    )
    env_flag(
        p,
        "--plot",
        env="DELAYLINE_BENCH_PLOT",
        default=None,
        type=Path,
        dest="plot_path",
        help="write a PNG: lateness histogram and throughput over time",
    )
    env_flag(
        p,
        "--work-dir",
        env="DELAYLINE_BENCH_WORK_DIR",
        default=None,
        type=Path,
        help="where the broker, checkpoint and logs go (default: a temporary directory)",
    )
    env_flag(
        p,
        "--trigger-interval",
        env="DELAYLINE_BENCH_TRIGGER_INTERVAL",
        default="1s",
        help="the pipeline's micro-batch interval",
    )
    add_hold_flags(
        p,
        "the pipeline's hold (see delayline run --hold); a hold's own figures and bounds "
        "are added (a private server of its own, its memory or disk)",
        env="DELAYLINE_BENCH_HOLD",
        flags_of=lambda kind: () if kind.bench is None else kind.bench.flags,
    )
    env_flag(
        p,
        "--master",
        env="DELAYLINE_BENCH_MASTER",
        default=None,
        help="also run the scenario with the pipeline on this Spark cluster "
        "(spark://HOST:PORT; `delayline cluster start` runs one here), after local mode, "
        "same broker, and print both side by side",
    )
    env_flag(
        p,
        "--driver-memory-mb",
        env="DELAYLINE_BENCH_DRIVER_MEMORY_MB",
        default=2048,
        type=positive_int,
        help="the pipeline's --driver-memory-mb (the Spark JVM's heap; local mode runs "
        "everything there)",
    )
    env_flag(
        p,
        "--lead",
        env="DELAYLINE_BENCH_LEAD",
        default=None,
        help="the pipeline's --lead (default: delayline run's); 0 makes the executors write "
        "the deliveries themselves",
    )
    p.add_argument(
        "--write-ahead",
        action="store_true",
        default=os.environ.get("DELAYLINE_BENCH_WRITE_AHEAD", "") == "1",
        help="start the pipeline with --write-ahead for the bench's target topic (its "
        "readers read committed) [env DELAYLINE_BENCH_WRITE_AHEAD=1]",
    )
    env_flag(
        p,
        "--warm-up",
        env="DELAYLINE_BENCH_WARM_UP",
        default=None,
        type=duration_arg(parse_duration_ms),
        dest="warm_up_ms",
        metavar="DURATION",
        help=f"{', '.join(WARM_UP_SCENARIOS)}: warm the pipeline's JVM first, with "
        f"{WARM_UP_RATE_PER_S} schedules/s due 5-15 s ahead for this long (to a target "
        "topic of their own), all delivered before the scenario starts, whose figures "
        "leave them out (peak RSS excepted); default none. --scenario ladder: each rung "
        "runs again on fresh checkpoints this long after its cold run, then once more, "
        "warm (default 3m)",
    )
    env_flag(
        p,
        "--jit",
        env="DELAYLINE_BENCH_JIT",
        default=None,
        type=duration_arg(_jit_settings),
        help="the pipeline JVM's JIT: c1 (-XX:TieredStopAtLevel=1) or full (the JVM's "
        "tiered JIT); default delayline run's. --scenario ladder: the settings to run "
        "each rung under, comma-separated (default c1,full)",
    )
    env_flag(
        p,
        "--rungs",
        env="DELAYLINE_BENCH_RUNGS",
        default=",".join(ladder.RUNGS),
        type=duration_arg(_rungs),
        help="--scenario ladder: which rungs to run, comma-separated, of "
        + ", ".join(ladder.RUNGS),
    )


def jit_name(args: argparse.Namespace) -> str:
    """The JIT the scenario's pipeline ran: ``--jit``'s, else ``delayline run``'s as its
    environment sets it (``custom`` for options that are neither)."""
    if args.jit is not None:
        return str(args.jit[0])
    options = os.environ.get("DELAYLINE_JAVA_OPTIONS", DEFAULT_JAVA_OPTIONS).strip()
    return next((name for name, value in JIT_OPTIONS.items() if value == options), "custom")


def _jit_settings(text: str) -> list[str]:
    return _comma_choices(text, "--jit", tuple(JIT_OPTIONS))


def _rungs(text: str) -> list[str]:
    return _comma_choices(text, "--rungs", ladder.RUNGS)


def _comma_choices(text: str, flag: str, allowed: tuple[str, ...]) -> list[str]:
    """The values of a comma-separated flag, in the order of ``allowed``.

    Raises:
        ConfigError: none given, or one not in ``allowed``.
    """
    wanted = {part.strip() for part in text.split(",") if part.strip()}
    if not wanted or wanted - set(allowed):
        raise ConfigError(f"{flag} takes {', '.join(allowed)}, comma-separated, not {text!r}")
    return [value for value in allowed if value in wanted]


def check_jit_and_warm_up(args: argparse.Namespace) -> None:
    """Refuse ``--jit`` and ``--warm-up`` where they would not hold for the figures.

    Raises:
        ConfigError: more than one ``--jit`` outside the ladder; either flag where no
            pipeline runs; ``--warm-up`` on a scenario that restarts its pipeline or
            reports a peak over the run, or with ``--master`` (the cluster's run is cold).
    """
    if args.scenario == "ladder":
        return
    if args.scenario in PIPELINELESS and (args.jit or args.warm_up_ms):
        raise ConfigError(f"--scenario {args.scenario} runs no pipeline: --jit and --warm-up "
                          "do not apply")  # fmt: skip
    if args.jit is not None and len(args.jit) > 1:
        raise ConfigError("--jit takes one setting, c1 or full, except with --scenario ladder")
    if args.warm_up_ms and args.scenario not in WARM_UP_SCENARIOS:
        raise ConfigError(f"--warm-up applies to {', '.join(WARM_UP_SCENARIOS)} (and the "
                          f"ladder), not {args.scenario}")  # fmt: skip
    if args.warm_up_ms and args.master is not None:
        raise ConfigError("--warm-up with --master: the cluster's run would be cold")


def scenario_size(args: argparse.Namespace) -> Size:
    """The scenario's size, with ``--pending``, ``--pending-span`` and ``--rate``.

    Raises:
        ConfigError: a flag the scenario has no use for.
    """
    backlog = args.pending is not None or args.pending_span_ms
    if backlog and args.scenario not in PENDING_SCENARIOS:
        raise ConfigError(f"--pending: the {args.scenario} scenario holds no backlog")
    if args.rate is not None and args.scenario not in RATE_SCENARIOS:
        raise ConfigError(f"--rate: the {args.scenario} scenario writes at no rate")
    if args.committers > args.inflight_partitions:
        raise ConfigError(
            f"--committers {args.committers}: set --inflight-partitions to at least that "
            "(each committer delivers whole partitions)"
        )
    if args.scenario in (*PIPELINELESS, "ladder"):
        if args.committers > 1:
            raise ConfigError(f"--committers: the {args.scenario} scenario runs no pipeline")
        return Size()
    size = SIZES[args.scenario][1 if args.quick else 0]
    if args.pending is not None:
        size = dataclasses.replace(size, pending=args.pending)
    if args.pending_span_ms:
        size = dataclasses.replace(size, pending_span_ms=args.pending_span_ms)
    if args.rate is not None:
        size = dataclasses.replace(size, rate_per_s=args.rate)
    return size


def _rate(text: str) -> float:
    """``--target-rate``: ``N/s`` or ``N/min``, as deliveries per second."""
    try:
        return TargetRates.parse([f"target={text}"]).per_topic[0][1]
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: write N/s or N/min") from exc
