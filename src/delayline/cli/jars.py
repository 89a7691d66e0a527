"""``delayline jars``: fill the jar cache ahead of time (``make test`` does)."""

from __future__ import annotations

import argparse
from pathlib import Path

from delayline.cli._common import env_bool, env_flag, say, warn
from delayline.errors import InfraError
from delayline.infra.cds import archive_path, build_archive
from delayline.infra.jars import CACHE_ENV, PROFILES, default_cache_dir, resolve_jars
from delayline.infra.jvm_hold import hold_jar


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``jars``."""
    parser = sub.add_parser(
        "jars",
        help=(
            "resolve the Kafka broker and Spark connector jars into the local cache, "
            "build the JVM hold and record Spark's class archive (faster JVM starts)"
        ),
    )
    parser.add_argument(
        "profile", nargs="?", choices=[*PROFILES, "hold", "classes", "all"], default="all"
    )
    env_flag(
        parser,
        "--cache-dir",
        env=CACHE_ENV,
        default=str(default_cache_dir()),
        type=Path,
        help="jar cache directory",
    )
    parser.add_argument(
        "--submit-args",
        action="store_true",
        default=env_bool("DELAYLINE_JARS_SUBMIT_ARGS"),
        help="print only the spark-submit flags that give `delayline run` under spark-submit "
        "its jars (the Kafka connector, the JVM hold), resolving them first; see "
        "docs/deployment.md [env DELAYLINE_JARS_SUBMIT_ARGS=1]",
    )
    parser.set_defaults(func=_jars)


def submit_args(spark_jars: list[Path], hold: Path) -> str:
    """The spark-submit flags for delayline's jars: under spark-submit the driver's JVM
    starts before delayline runs, so the jars it would give that JVM go on the command
    line (the Kafka source is looked up on the driver's own class path)."""
    jars = ",".join(str(j) for j in [*spark_jars, hold])
    return f"--jars {jars} --driver-class-path {hold} --conf spark.executor.extraClassPath={hold}"


def _jars(args: argparse.Namespace) -> int:
    if args.submit_args:
        print(submit_args(resolve_jars("spark", args.cache_dir), hold_jar(args.cache_dir)))
        return 0
    for profile in PROFILES if args.profile == "all" else (args.profile,):
        if profile in ("hold", "classes"):
            continue
        found = resolve_jars(profile, args.cache_dir)
        size_mb = sum(j.stat().st_size for j in found) / 1e6
        say(f"{profile}: {len(found)} jars, {size_mb:.1f} MB in {found[0].parent}")
    if args.profile not in ("hold", "classes", "all"):
        return 0
    hold = hold_jar(args.cache_dir)
    if args.profile in ("hold", "all"):
        say(f"hold: {hold}")
    if args.profile in ("classes", "all"):
        if not archive_path(hold, args.cache_dir).is_file():
            say("classes: recording Spark's class archive (once, about a minute)")
        try:
            archive = build_archive(hold, args.cache_dir)
        except InfraError as exc:
            if args.profile == "classes":
                raise
            # Only start-up speed depends on it: set-up goes on without.
            warn(f"Spark's JVMs will start without a class archive: {exc}")
            return 0
        say(f"classes: {archive} ({archive.stat().st_size / 1e6:.0f} MB)")
    return 0
