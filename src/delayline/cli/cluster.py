"""``delayline cluster start|stop|status``: a Spark standalone cluster on loopback."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from delayline.cli._common import add_start_timeout, env_flag, positive_int, say
from delayline.infra.spark_cluster import ClusterConfig, LocalCluster

DEFAULT_DATA_DIR = Path(".delayline/cluster")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``cluster`` command group."""
    parser = sub.add_parser(
        "cluster",
        help="run a Spark standalone cluster on this machine (for run --master spark://...)",
        description="Run a Spark standalone master and its workers on 127.0.0.1 with the Spark "
        "the pyspark package ships; pass the master URL it prints to `delayline run --master`. "
        "See docs/deployment.md for a real cluster.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser(
        "start", help="start the master and workers; wait until they register"
    )
    stop = actions.add_parser(
        "stop", help="stop the workers and the master (SIGTERM, then SIGKILL)"
    )
    status = actions.add_parser("status", help="say whether the cluster runs (exit 3 if not)")
    for p in (start, stop, status):
        env_flag(
            p,
            "--data-dir",
            env="DELAYLINE_CLUSTER_DATA_DIR",
            default=str(DEFAULT_DATA_DIR),
            type=Path,
            help="directory holding the PID files, logs and the workers' work directories",
        )
    env_flag(
        start,
        "--workers",
        env="DELAYLINE_CLUSTER_WORKERS",
        default=2,
        type=positive_int,
        help="worker JVMs to start",
    )
    env_flag(
        start,
        "--worker-cores",
        env="DELAYLINE_CLUSTER_WORKER_CORES",
        default=1,
        type=positive_int,
        help="cores each worker offers (tasks its executor runs at once)",
    )
    env_flag(
        start,
        "--worker-memory",
        env="DELAYLINE_CLUSTER_WORKER_MEMORY",
        default="2g",
        type=_memory_mb,
        dest="worker_memory_mb",
        metavar="SIZE",
        help="memory each worker offers its executor (e.g. 2g, 1536m)",
    )
    env_flag(
        start,
        "--port",
        env="DELAYLINE_CLUSTER_PORT",
        default=7077,
        type=int,
        help="the master's port on 127.0.0.1",
    )
    env_flag(
        start,
        "--ui-port",
        env="DELAYLINE_CLUSTER_UI_PORT",
        default=8080,
        type=int,
        help="the master's web UI port (workers and applications at a glance)",
    )
    add_start_timeout(start, "DELAYLINE_CLUSTER_START_TIMEOUT", "90s", "every worker to register")
    start.set_defaults(func=_start)
    stop.set_defaults(func=_stop)
    status.set_defaults(func=_status)


def _memory_mb(text: str) -> int:
    """``2g``, ``1536m`` or a number of MB."""
    value = text.strip().lower()
    scale = {"g": 1024, "m": 1}.get(value[-1:])
    number = value[:-1] if scale is not None else value
    try:
        mb = int(number) * (scale or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a memory size: {text!r} (e.g. 2g, 1536m)") from None
    if mb <= 0:
        raise argparse.ArgumentTypeError(f"memory must be positive, got {text!r}")
    return mb


def _cluster(args: argparse.Namespace) -> LocalCluster:
    defaults = ClusterConfig()
    return LocalCluster(
        ClusterConfig(
            data_dir=args.data_dir,
            workers=getattr(args, "workers", defaults.workers),
            worker_cores=getattr(args, "worker_cores", defaults.worker_cores),
            worker_memory_mb=getattr(args, "worker_memory_mb", defaults.worker_memory_mb),
            port=getattr(args, "port", defaults.port),
            ui_port=getattr(args, "ui_port", defaults.ui_port),
            start_timeout_ms=getattr(args, "start_timeout_ms", defaults.start_timeout_ms),
        )
    )


def _start(args: argparse.Namespace) -> int:
    began = time.monotonic()
    status = _cluster(args).start(progress=lambda m: print(f"delayline: {m}", file=sys.stderr))
    say(
        f"spark cluster ready at {status.master_url} ({status.alive_workers} workers x "
        f"{args.worker_cores} cores, {time.monotonic() - began:.1f} s, logs in {status.log_dir}); "
        f"run the pipeline on it with `delayline run --master {status.master_url}`"
    )
    return 0


def _stop(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    if not cluster.daemons():
        say(f"spark cluster not running (data dir {args.data_dir}); nothing to stop")
        return 0
    pids = cluster.stop()
    say(f"spark cluster stopped ({len(pids)} processes)")
    return 0


def _status(args: argparse.Namespace) -> int:
    status = _cluster(args).status()
    if not status.running:
        say(
            f"spark cluster not running (data dir {args.data_dir}); "
            "start it with `delayline cluster start`"
        )
        return 3
    executors = sum(len(p) for p in status.executor_pids.values())
    say(
        f"spark cluster running at {status.master_url} (master pid {status.master_pid}, "
        f"{len(status.worker_pids)} worker processes, {status.alive_workers} registered, "
        f"{executors} executors, logs in {status.log_dir})"
    )
    return 0
