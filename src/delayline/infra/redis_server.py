"""A local Redis server for development and tests: Debian's ``redis-server``.

``delayline redis start|stop|status`` runs it the way ``delayline broker`` runs Kafka:
on 127.0.0.1, its data, config, log and PID file in one directory. The append-only
file is on with ``appendfsync always`` by default, so a write Redis acknowledged
survives a SIGKILL of the server (see docs/holds.md for what ``everysec`` may lose).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from delayline.errors import ConfigError, RedisServerError
from delayline.infra.ports import accepts
from delayline.infra.procs import pid_alive

log = logging.getLogger(__name__)

FSYNC_POLICIES = ("always", "everysec", "no")


@dataclass(frozen=True, slots=True)
class RedisServerConfig:
    """Settings of a local Redis server.

    Attributes:
        data_dir: Holds ``redis.conf``, the append-only files, ``redis.log`` and
            ``redis.pid``.
        port: TCP port on 127.0.0.1.
        appendfsync: ``always`` (every write on disk before Redis answers),
            ``everysec`` or ``no``.
        start_timeout_ms: How long :meth:`LocalRedis.start` waits for a PONG.
        stop_timeout_ms: Grace period after SIGTERM before SIGKILL.
    """

    data_dir: Path
    port: int = 6379
    appendfsync: str = "always"
    start_timeout_ms: int = 30_000
    stop_timeout_ms: int = 30_000

    @property
    def url(self) -> str:
        """The ``redis://`` URL of database 0."""
        return f"redis://127.0.0.1:{self.port}/0"


@dataclass(frozen=True, slots=True)
class RedisServerStatus:
    """Whether a server owns the data directory, its PID, URL and log."""

    pid: int | None
    url: str
    log_file: Path

    @property
    def running(self) -> bool:
        return self.pid is not None


class LocalRedis:
    """Start, stop and inspect the Redis server of one data directory."""

    def __init__(self, config: RedisServerConfig) -> None:
        if not 0 < config.port < 65536:
            raise ConfigError(f"port must be 1-65535, got {config.port}")
        if config.appendfsync not in FSYNC_POLICIES:
            choices = ", ".join(FSYNC_POLICIES)
            raise ConfigError(f"appendfsync must be one of {choices}, got {config.appendfsync!r}")
        self.config = config
        self.data_dir = config.data_dir.resolve()
        self.log_file = self.data_dir / "redis.log"
        self.pid_file = self.data_dir / "redis.pid"
        self._conf = self.data_dir / "redis.conf"
        self._process: subprocess.Popen[bytes] | None = None

    def status(self) -> RedisServerStatus:
        """Whether a server of this directory runs (the port it was started with)."""
        return RedisServerStatus(self._running_pid(), self._recorded_url(), self.log_file)

    def start(self, progress: Callable[[str], None] = lambda _msg: None) -> RedisServerStatus:
        """Start ``redis-server`` and wait until it answers PING.

        Raises:
            RedisServerError: one already runs on the directory, the port is taken,
                ``redis-server`` is missing, or it exited or stayed silent (the log
                tail is in the message).
        """
        running = self._running_pid()
        if running is not None:
            raise RedisServerError(
                f"a Redis server already runs on {self.data_dir} (pid {running}); "
                "stop it with `delayline redis stop`"
            )
        binary = shutil.which("redis-server")
        if binary is None:
            raise RedisServerError(
                "redis-server is not on PATH; install Debian's redis-server "
                "(bash infra/system-packages.sh does)"
            )
        if accepts("127.0.0.1", self.config.port):
            raise RedisServerError(f"port {self.config.port} is in use; pick another with --port")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        with self.log_file.open("ab") as out:
            proc = subprocess.Popen(
                [binary, str(self._conf)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C of the caller does not reach it
            )
        self._process = proc
        self.pid_file.write_text(f"{proc.pid}\n")
        progress(f"redis-server pid {proc.pid}, waiting for {self.config.url}")
        deadline = time.monotonic() + self.config.start_timeout_ms / 1000
        while not _pong(self.config.port):
            if proc.poll() is not None:
                raise RedisServerError(
                    f"redis-server exited with {proc.returncode}:\n{self._log_tail()}"
                )
            if time.monotonic() > deadline:
                raise RedisServerError(
                    f"redis-server did not answer on port {self.config.port} within "
                    f"{self.config.start_timeout_ms} ms:\n{self._log_tail()}"
                )
            time.sleep(0.05)
        return self.status()

    def stop(self) -> int:
        """SIGTERM (Redis flushes its append-only file), then SIGKILL after the grace.

        Returns:
            The PID stopped.

        Raises:
            RedisServerError: no server runs on the directory.
        """
        pid = self._running_pid()
        if pid is None:
            raise RedisServerError(f"no Redis server runs on {self.data_dir}")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.config.stop_timeout_ms / 1000
        while time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.05)
        if pid_alive(pid):
            log.warning("redis-server %d ignored SIGTERM; killing it", pid)
            os.kill(pid, signal.SIGKILL)
            while pid_alive(pid):
                time.sleep(0.05)
        if self._process is not None and self._process.pid == pid:
            self._process.wait()
        self._process = None
        self.pid_file.unlink(missing_ok=True)
        return pid

    def stop_hard(self) -> int:
        """SIGKILL the server at once, as a crash would (tests of durability).

        Raises:
            RedisServerError: no server runs on the directory.
        """
        pid = self._running_pid()
        if pid is None:
            raise RedisServerError(f"no Redis server runs on {self.data_dir}")
        os.kill(pid, signal.SIGKILL)
        while pid_alive(pid):
            time.sleep(0.02)
        if self._process is not None and self._process.pid == pid:
            self._process.wait()
        self._process = None
        return pid

    def _write_config(self) -> None:
        c = self.config
        lines = [
            "bind 127.0.0.1",
            f"port {c.port}",
            "daemonize no",
            f"dir {self.data_dir}",
            "appendonly yes",
            f"appendfsync {c.appendfsync}",
            "save ''",  # the append-only file is the durable copy; no RDB snapshots
            "loglevel notice",
            "protected-mode yes",
            # The hold's keys must never be evicted to make room.
            "maxmemory-policy noeviction",
        ]
        self._conf.write_text("\n".join(lines) + "\n")

    def _recorded_url(self) -> str:
        try:
            for line in self._conf.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "port":
                    return f"redis://127.0.0.1:{int(value)}/0"
        except (OSError, ValueError):
            pass
        return self.config.url

    def _running_pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if not pid_alive(pid):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        # Guard against a recycled PID: it must be redis-server with our config.
        return pid if b"redis-server" in cmdline or str(self._conf).encode() in cmdline else None

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def _pong(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False
