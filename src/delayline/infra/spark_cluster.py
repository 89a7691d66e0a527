"""A Spark standalone cluster on loopback: one master and its workers, for development,
tests and the cluster bench.

``delayline cluster start|stop|status`` runs it the way ``delayline broker`` runs Kafka:
every process is a detached JVM started by the ``spark-class`` script of the Spark that
the pyspark package ships, with its PID file and log in one data directory. Workers
keep their executors' logs under ``<data dir>/worker-<n>/work/<app>/<executor>/``.

What carries over to a real cluster, and what does not, is in docs/deployment.md.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from delayline.core.http import get_json
from delayline.errors import ConfigError, HttpUnavailableError, SparkClusterError
from delayline.infra.ports import accepts
from delayline.infra.procs import kill_until_gone, pid_alive, proc_stats, tree

log = logging.getLogger(__name__)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
DIR_PROPERTY = "delayline.cluster.dir"
"""A system property every daemon of a cluster gets: a PID file is trusted only when the
process carries its own data directory (a recycled PID would not)."""


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Where and how the local cluster runs.

    Attributes:
        data_dir: PID files, logs and the workers' work directories.
        workers: How many workers (one JVM each).
        worker_cores: Cores each worker offers (its executor runs that many tasks).
        worker_memory_mb: Memory each worker offers its executors.
        port: The master's port on 127.0.0.1.
        ui_port: The master's web UI port (its ``/json`` view is how ``start`` sees the
            workers register).
        daemon_memory_mb: Heap of the master and of each worker JVM (not executors).
        start_timeout_ms: How long ``start`` waits for every worker to register.
        stop_timeout_ms: Grace period after SIGTERM before SIGKILL.
    """

    data_dir: Path = field(default_factory=lambda: Path(".delayline/cluster"))
    workers: int = 2
    worker_cores: int = 1
    worker_memory_mb: int = 2048
    port: int = 7077
    ui_port: int = 8080
    daemon_memory_mb: int = 256
    start_timeout_ms: int = 90_000
    stop_timeout_ms: int = 30_000

    @property
    def master_url(self) -> str:
        """What ``delayline run --master`` takes."""
        return f"spark://127.0.0.1:{self.port}"


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """What ``status`` found.

    Attributes:
        master_url: The master's URL (the port it was started with).
        master_pid: ``None`` when no master runs.
        worker_pids: PIDs of the workers that run, by index.
        alive_workers: Workers the master counts as alive (0 when it does not answer).
        executor_pids: Executor JVMs the workers run now, by worker index.
        log_dir: Where the logs are.
    """

    master_url: str
    master_pid: int | None
    worker_pids: dict[int, int]
    alive_workers: int
    executor_pids: dict[int, list[int]]
    log_dir: Path

    @property
    def running(self) -> bool:
        """Whether the master runs."""
        return self.master_pid is not None


class LocalCluster:
    """Start, stop and inspect the standalone cluster of one data directory."""

    def __init__(self, config: ClusterConfig) -> None:
        for name, port in (("port", config.port), ("ui port", config.ui_port)):
            if not 0 < port < 65536:
                raise ConfigError(f"{name} must be 1-65535, got {port}")
        if config.workers < 1 or config.worker_cores < 1:
            raise ConfigError("a cluster needs at least one worker with at least one core")
        if config.worker_memory_mb < 512:
            raise ConfigError(
                f"worker memory {config.worker_memory_mb} MB is too small for an executor "
                "(Spark needs about 450 MB of heap for one): give at least 512"
            )
        self.config = config
        self.data_dir = config.data_dir.resolve()
        self._state = self.data_dir / "cluster.json"
        self._processes: list[subprocess.Popen[bytes]] = []

    def status(self) -> ClusterStatus:
        """Which daemons of this directory run, and what the master says of its workers."""
        recorded = self._recorded()
        port = int(recorded.get("port", self.config.port))
        ui_port = int(recorded.get("ui_port", self.config.ui_port))
        master = self._running_pid("master")
        workers = {
            i: pid
            for i in range(int(recorded.get("workers", self.config.workers)))
            if (pid := self._running_pid(f"worker-{i}")) is not None
        }
        stats = proc_stats()
        executors = {i: executor_pids(pid, stats) for i, pid in workers.items()}
        alive = _alive_workers(ui_port) if master is not None else 0
        return ClusterStatus(
            f"spark://127.0.0.1:{port}", master, workers, alive, executors, self.data_dir
        )

    def start(self, progress: Callable[[str], None] = lambda _msg: None) -> ClusterStatus:
        """Start the master, then the workers, and wait until every worker registered.

        Raises:
            SparkClusterError: a cluster already runs on the directory, a port is taken,
                or a daemon exited or the workers did not register in time (the log tail
                is in the message). What was started is stopped again.
        """
        c = self.config
        if self._running_pid("master") is not None:
            raise SparkClusterError(
                f"a Spark cluster already runs on {self.data_dir}; "
                "stop it with `delayline cluster stop`"
            )
        for name, port in (("--port", c.port), ("--ui-port", c.ui_port)):
            if accepts("127.0.0.1", port):
                raise SparkClusterError(f"port {port} is in use; pick another with {name}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._state.write_text(
            json.dumps({"port": c.port, "ui_port": c.ui_port, "workers": c.workers})
        )
        try:
            self._spawn(
                "master",
                [
                    MASTER_CLASS,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(c.port),
                    "--webui-port",
                    str(c.ui_port),
                ],
            )
            progress(f"master starting at {c.master_url}, waiting for its web UI")
            self._wait(lambda: _alive_workers(c.ui_port) >= 0, "the master to answer")
            for i in range(c.workers):
                work = self.data_dir / f"worker-{i}" / "work"
                work.mkdir(parents=True, exist_ok=True)
                self._spawn(
                    f"worker-{i}",
                    [
                        WORKER_CLASS,
                        "--host",
                        "127.0.0.1",
                        "--port",
                        "0",
                        "--webui-port",
                        "0",
                        "--cores",
                        str(c.worker_cores),
                        "--memory",
                        f"{c.worker_memory_mb}m",
                        "--work-dir",
                        str(work),
                        c.master_url,
                    ],
                )
            progress(f"{c.workers} workers starting, waiting until they register")
            self._wait(lambda: _alive_workers(c.ui_port) >= c.workers, "every worker to register")
        except BaseException:
            self._stop_all(signal.SIGKILL)
            raise
        return self.status()

    def stop(self) -> list[int]:
        """SIGTERM the workers (they end their executors), then the master; SIGKILL
        whatever is left after the grace period.

        Returns:
            The PIDs stopped (master last).

        Raises:
            SparkClusterError: no master runs on the directory.
        """
        if not self.daemons():
            raise SparkClusterError(f"no Spark cluster runs on {self.data_dir}")
        return self._stop_all(signal.SIGTERM)

    def daemons(self) -> dict[str, int]:
        """The PIDs of this directory's daemons that run, by name (workers first, the
        master last): no HTTP, no process table."""
        recorded = int(self._recorded().get("workers", self.config.workers))
        names = [f"worker-{i}" for i in range(recorded)] + ["master"]
        return {name: pid for name in names if (pid := self._running_pid(name)) is not None}

    def _stop_all(self, sig: signal.Signals) -> list[int]:
        stopped: list[int] = []
        for name, pid in self.daemons().items():
            members = tree(pid)  # its executors and their Python workers too
            os.kill(pid, sig)
            deadline = time.monotonic() + self.config.stop_timeout_ms / 1000
            while time.monotonic() < deadline and pid_alive(pid):
                time.sleep(0.05)
            outlived = kill_until_gone(members, timeout_s=10)
            if outlived:
                log.warning("%s: %d process(es) outlived the stop; killed", name, len(outlived))
            (self.data_dir / f"{name}.pid").unlink(missing_ok=True)
            stopped.append(pid)
        for proc in self._processes:
            proc.poll()  # reap what this object started
        self._processes.clear()
        return stopped

    def _spawn(self, name: str, args: list[str]) -> None:
        log_file = self.data_dir / f"{name}.log"
        env = dict(os.environ)
        env["SPARK_HOME"] = str(spark_home())
        env["SPARK_DAEMON_MEMORY"] = f"{self.config.daemon_memory_mb}m"
        env["SPARK_DAEMON_JAVA_OPTS"] = f"-D{DIR_PROPERTY}={self.data_dir}"
        # The master and workers log to their files; no conf dir of the user's applies.
        env["SPARK_CONF_DIR"] = str(self.data_dir)
        with log_file.open("ab") as out:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # a Ctrl-C of the caller does not reach it
            )
        self._processes.append(proc)
        (self.data_dir / f"{name}.pid").write_text(f"{proc.pid}\n")

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.config.start_timeout_ms / 1000
        while not ready():
            for proc in self._processes:
                if proc.poll() is not None:
                    name = _name_of(self.data_dir, proc.pid)
                    raise SparkClusterError(
                        f"{name} exited with {proc.returncode}:\n{self._log_tail(name)}"
                    )
            if time.monotonic() > deadline:
                raise SparkClusterError(
                    f"waited {self.config.start_timeout_ms} ms for {what}:\n"
                    f"{self._log_tail('master')}"
                )
            time.sleep(0.2)

    def _running_pid(self, name: str) -> int | None:
        try:
            pid = int((self.data_dir / f"{name}.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        if not pid_alive(pid):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        return pid if f"-D{DIR_PROPERTY}={self.data_dir}".encode() in cmdline else None

    def _recorded(self) -> dict[str, int]:
        try:
            data = json.loads(self._state.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _log_tail(self, name: str, lines: int = 20) -> str:
        try:
            text = (self.data_dir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def spark_home() -> Path:
    """The Spark the pyspark package ships (its ``bin/spark-class`` and ``jars/``)."""
    import pyspark  # noqa: PLC0415 - only the cluster commands need it

    return Path(pyspark.__file__).parent


def executor_pids(worker_pid: int, stats: dict[int, list[str]] | None = None) -> list[int]:
    """The executor JVMs a worker runs now (its children running
    :data:`EXECUTOR_CLASS`)."""
    stats = proc_stats() if stats is None else stats
    found: list[int] = []
    for pid in tree(worker_pid, stats):
        if pid == worker_pid:
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if EXECUTOR_CLASS.encode() in cmdline:
            found.append(pid)
    return sorted(found)


def executors_here() -> list[int]:
    """Every executor JVM running on this machine, of any worker or application."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if EXECUTOR_CLASS.encode() in cmdline:
            found.append(int(entry.name))
    return sorted(found)


def _alive_workers(ui_port: int) -> int:
    """How many workers the master's ``/json`` view counts alive; -1 if it does not answer."""
    try:
        status, body = get_json(f"http://127.0.0.1:{ui_port}/json/", timeout_s=2)
    except HttpUnavailableError:
        return -1
    if status != 200 or not isinstance(body, dict):
        return -1
    try:
        return int(body.get("aliveworkers", 0))
    except (TypeError, ValueError):
        return -1


def _name_of(data_dir: Path, pid: int) -> str:
    for pid_file in data_dir.glob("*.pid"):
        try:
            if int(pid_file.read_text().strip()) == pid:
                return pid_file.stem
        except (OSError, ValueError):
            continue
    return f"process {pid}"
