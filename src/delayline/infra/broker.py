"""A single-node KRaft Apache Kafka broker on loopback, for development and tests.

The broker is a detached ``java -cp`` process over the cached broker jars. Its
data directory holds everything: the generated config, Kafka's log dirs, the
log file, the PID file and a lock. The lock (``flock``) is inherited by the
broker process, so two brokers can never share a data directory, even when
two ``start`` commands race.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from delayline.errors import (
    BrokerAlreadyRunningError,
    BrokerNotRunningError,
    BrokerStartError,
    ConfigError,
    InfraError,
)
from delayline.infra.broker_security import (
    ALLOWED_FILES,
    ALLOWED_URLS,
    PLAINTEXT,
    SASL_SSL,
    SECURITY_MODES,
    SecureFiles,
    create_users,
    internal_client,
    prepare,
    write_client_files,
)
from delayline.infra.jars import classpath, resolve_jars
from delayline.infra.ports import accepts, require_free_port
from delayline.infra.procs import pid_alive
from delayline.kafka.config import RDKAFKA_LOGGER

log = logging.getLogger(__name__)

_MAIN_CLASS = "kafka.Kafka"
_STORAGE_TOOL = "kafka.tools.StorageTool"
_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Where and how the local broker runs.

    Attributes:
        data_dir: Everything the broker owns lives here.
        port: Client listener port on 127.0.0.1.
        controller_port: KRaft controller port; ``port + 1`` when ``None``.
        heap_mb: JVM heap.
        start_timeout_ms: How long ``start`` waits for the broker to answer.
        stop_timeout_ms: Grace period after SIGTERM before SIGKILL.
        jar_cache_dir: Jar cache; the default cache when ``None``.
        acls: Enforce ACLs (KRaft's ``StandardAuthorizer``) so tests can deny an
            operation. Every principal may do everything on a resource that has no
            ACL, so nothing changes until an ACL is added. Off by default.
        security: ``plaintext``, or ``sasl-ssl``: TLS, SASL users and ACLs denying what
            none allows (:mod:`delayline.infra.broker_security`), with client properties
            files written next to the data.
        oauth_jwks_url: With ``sasl-ssl``, also accept OAUTHBEARER tokens that this
            OpenID provider's key set verifies (an ``https://``, ``http://`` or
            ``file://`` URL); the principal is ``User:`` and the token's ``sub``.
    """

    data_dir: Path = field(default_factory=lambda: Path(".delayline/broker"))
    port: int = 9092
    controller_port: int | None = None
    heap_mb: int = 512
    start_timeout_ms: int = 90_000
    stop_timeout_ms: int = 30_000
    jar_cache_dir: Path | None = None
    acls: bool = False
    security: str = PLAINTEXT
    oauth_jwks_url: str | None = None

    @property
    def host(self) -> str:
        """The loopback address the broker binds."""
        return "127.0.0.1"

    @property
    def bootstrap_servers(self) -> str:
        """What clients pass as ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    @property
    def controller(self) -> int:
        """The controller port in use."""
        return self.controller_port if self.controller_port is not None else self.port + 1

    @property
    def secured(self) -> bool:
        return self.security == SASL_SSL

    @property
    def internal_port(self) -> int:
        """The broker's own SASL_PLAINTEXT listener (secured only)."""
        return self.port + 2

    @property
    def mtls_port(self) -> int:
        """The mutual-TLS listener (secured only)."""
        return self.port + 3

    @property
    def ports(self) -> tuple[int, ...]:
        """Every port the broker binds."""
        extra = (self.internal_port, self.mtls_port) if self.secured else ()
        return (self.port, self.controller, *extra)


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """What ``status`` found: ``pid`` is ``None`` when nothing runs."""

    pid: int | None
    bootstrap_servers: str
    log_file: Path

    @property
    def running(self) -> bool:
        """Whether a broker process owns the data directory."""
        return self.pid is not None


class LocalBroker:
    """Start, stop and inspect the broker of one data directory."""

    def __init__(self, config: BrokerConfig) -> None:
        if not 0 < config.port < 65536 or not 0 < config.controller < 65536:
            raise ConfigError(f"ports must be 1-65535, got {config.port}/{config.controller}")
        if config.port == config.controller:
            raise ConfigError("client and controller ports must differ")
        if config.security not in SECURITY_MODES:
            raise ConfigError(f"--security: one of {', '.join(SECURITY_MODES)}")
        if config.oauth_jwks_url and not config.secured:
            raise ConfigError(f"--oauth-jwks-url needs --security {SASL_SSL}")
        self.config = config
        self.data_dir = config.data_dir.resolve()
        # The broker process this object started, kept so that it is reaped by stop()
        # and never garbage-collected while it runs (Popen warns then).
        self._process: subprocess.Popen[bytes] | None = None
        self.log_file = self.data_dir / "broker.log"
        self.pid_file = self.data_dir / "broker.pid"
        self._lock_file = self.data_dir / "broker.lock"
        self._props = self.data_dir / "server.properties"
        self._log_dirs = self.data_dir / "kraft"
        self.secure_files = SecureFiles(self.data_dir)

    @property
    def log_dirs(self) -> Path:
        """Where the broker keeps its partitions (one directory per topic partition)."""
        return self._log_dirs

    def status(self) -> BrokerStatus:
        """Report whether a broker owns this data directory, its PID and its address.

        The address is read back from the config the broker was last started with (in
        the data directory), whatever port this object was given; the configured one
        when the directory holds no config yet.
        """
        pid = self._running_pid()
        return BrokerStatus(pid, self.recorded_bootstrap_servers(), self.log_file)

    def recorded_bootstrap_servers(self) -> str:
        """The address in the data directory's config (``advertised.listeners``), or
        the configured one when there is none."""
        try:
            lines = self._props.read_text().splitlines()
        except OSError:
            return self.config.bootstrap_servers
        for line in lines:
            key, sep, value = line.partition("=")
            if sep and key.strip() == "advertised.listeners":
                first = value.strip().split(",")[0]
                return first.split("://", 1)[-1]
        return self.config.bootstrap_servers

    def start(self, progress: Callable[[str], None] = lambda _msg: None) -> BrokerStatus:
        """Start the broker and wait until it answers metadata requests.

        Formats the data directory on first start.

        Raises:
            BrokerAlreadyRunningError: a broker already owns the data directory.
            BrokerStartError: the port is taken, or the broker exited or did not
                answer within ``start_timeout_ms``; the log tail is in the message.
            InfraError: Java or the jars are missing.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._process is not None and self._process.poll() is not None:
            self._process = None  # the broker this object started died (was killed): reaped
        lock_fd = os.open(self._lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BrokerAlreadyRunningError(
                    f"a broker already runs on {self.data_dir} (pid {self._read_pid()}); "
                    "stop it with `delayline broker stop`"
                ) from None
            for port in self.config.ports:
                require_free_port(self.config.host, port)
            java = shutil.which("java")
            if java is None:
                raise InfraError("java is not on PATH; install Java 17 or newer")
            cp = classpath(resolve_jars("broker", self.config.jar_cache_dir))
            self._write_config()
            if not (self._log_dirs / "meta.properties").exists():
                progress(f"formatting {self._log_dirs}")
                self._format(java, cp)
            proc = self._launch(java, cp, lock_fd)
        finally:
            # The broker inherited the lock; our copy is no longer needed.
            os.close(lock_fd)
        self._process = proc
        self.pid_file.write_text(f"{proc.pid}\n")
        progress(f"broker pid {proc.pid}, waiting for {self.config.bootstrap_servers}")
        admin = self._wait_ready(proc)
        if self.config.secured:
            create_users(admin, self.secure_files)
            c = self.config
            write_client_files(self.secure_files, c.bootstrap_servers, f"{c.host}:{c.mtls_port}")
            progress(
                f"client properties: {self.secure_files.admin_properties} (admin), "
                f"{self.secure_files.delayline_properties} (delayline)"
            )
        return self.status()

    def stop(self) -> int:
        """Stop the broker by its own PID: SIGTERM, then SIGKILL after the grace period.

        Returns:
            The PID that was stopped.

        Raises:
            BrokerNotRunningError: no broker owns the data directory.
        """
        pid = self._running_pid()
        if pid is None:
            raise BrokerNotRunningError(f"no broker runs on {self.data_dir}")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.config.stop_timeout_ms / 1000
        while time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.1)
        if pid_alive(pid):
            log.warning(
                "broker %d ignored SIGTERM for %d ms; killing it", pid, self.config.stop_timeout_ms
            )
            os.kill(pid, signal.SIGKILL)
            while pid_alive(pid):
                time.sleep(0.05)
        if self._process is not None and self._process.pid == pid:
            self._process.wait()
        self._process = None
        self.pid_file.unlink(missing_ok=True)
        return pid

    def _running_pid(self) -> int | None:
        if not self._lock_file.exists():
            return None
        fd = os.open(self._lock_file, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return self._read_pid()
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def _read_pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _is_our_broker(pid, self.data_dir) else None

    def _write_config(self) -> None:
        c = self.config
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{c.host}:{c.controller}",
            "listeners": f"PLAINTEXT://{c.host}:{c.port},CONTROLLER://{c.host}:{c.controller}",
            "advertised.listeners": f"PLAINTEXT://{c.host}:{c.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self._log_dirs),
            # One node: every internal topic has one replica.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.partitions": "1",
            # Compaction of the schedules topic kicks in quickly on a dev box.
            "log.cleaner.backoff.ms": "5000",
        }
        if c.acls:
            props["authorizer.class.name"] = _AUTHORIZER
            # An ACL on a resource restricts that resource only.
            props["allow.everyone.if.no.acl.found"] = "true"
        if c.secured:
            h = c.host
            props |= {
                "listeners": f"SASL_SSL://{h}:{c.port},CONTROLLER://{h}:{c.controller},"
                f"INTERNAL://{h}:{c.internal_port},SSL://{h}:{c.mtls_port}",
                "advertised.listeners": f"SASL_SSL://{h}:{c.port},"
                f"INTERNAL://{h}:{c.internal_port},SSL://{h}:{c.mtls_port}",
                "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT,"
                "INTERNAL:SASL_PLAINTEXT,SSL:SSL",
                "inter.broker.listener.name": "INTERNAL",
                **prepare(self.secure_files, h, c.oauth_jwks_url),
            }
        # Owner-only: a secured broker's holds its passwords.
        fd = os.open(self._props, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write("".join(f"{k}={_escaped(v)}\n" for k, v in props.items()))
        (self.data_dir / "log4j2.xml").write_text(_LOG4J2)

    def _jvm(self, java: str, cp: str) -> list[str]:
        return [
            java,
            f"-Xms{min(256, self.config.heap_mb)}m",
            f"-Xmx{self.config.heap_mb}m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.xml'}",
            f"-Ddelayline.broker.dir={self.data_dir}",
            *self._oauth_jvm(),
            "-cp",
            cp,
        ]

    def _oauth_jvm(self) -> list[str]:
        """Kafka 4 reads OAUTHBEARER key sets only from URLs (and files) allowed by name."""
        url = self.config.oauth_jwks_url  # only with sasl-ssl: checked at construction
        if not url:
            return []
        allowed = [f"-D{ALLOWED_URLS}={url}"]
        if url.startswith("file:"):
            path = urllib.parse.unquote(urllib.parse.urlparse(url).path)  # as_uri's inverse
            allowed.append(f"-D{ALLOWED_FILES}={path}")
        return allowed

    def _format(self, java: str, cp: str) -> None:
        cluster_id = new_cluster_id()
        cmd = [
            *self._jvm(java, cp),
            _STORAGE_TOOL,
            "format",
            "-t",
            cluster_id,
            "-c",
            str(self._props),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BrokerStartError(
                f"formatting {self._log_dirs} failed:\n{result.stdout}{result.stderr}"
            )

    def _launch(self, java: str, cp: str, lock_fd: int) -> subprocess.Popen[bytes]:
        with self.log_file.open("ab") as out:
            return subprocess.Popen(
                [*self._jvm(java, cp), _MAIN_CLASS, str(self._props)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                pass_fds=(lock_fd,),
                start_new_session=True,  # survives the shell that started it
                cwd=self.data_dir,
            )

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> AdminClient:
        """An admin client of the broker, once it answers (the secured broker's
        ``admin`` on its INTERNAL listener)."""
        admin: AdminClient | None = None
        c = self.config
        port, extra = (
            (c.internal_port, internal_client(self.secure_files)) if c.secured else (c.port, {})
        )
        deadline = time.monotonic() + self.config.start_timeout_ms / 1000
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                tail = self._log_tail()
                raise BrokerStartError(
                    f"broker exited with code {proc.returncode}; last log lines:\n{tail}"
                )
            # A listening socket first, so the admin client is not made to retry in a loop.
            if admin is None and accepts(c.host, port):
                # The broker's own settings, not the process's --kafka-config.
                settings: dict[str, Any] = {"bootstrap.servers": f"{c.host}:{port}", **extra}
                settings["logger"] = RDKAFKA_LOGGER
                admin = AdminClient(settings)
            if admin is not None:
                with contextlib.suppress(KafkaException):
                    if admin.list_topics(timeout=1).brokers:
                        return admin
            time.sleep(0.2)
        proc.kill()
        proc.wait()
        self.pid_file.unlink(missing_ok=True)
        raise BrokerStartError(
            f"broker did not answer on {self.config.bootstrap_servers} within "
            f"{self.config.start_timeout_ms / 1000:g} s; last log lines:\n{self._log_tail()}"
        )

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def _escaped(value: str) -> str:
    """A Java properties value: backslashes doubled (nothing else here needs it)."""
    return value.replace("\\", "\\\\")


def new_cluster_id(random_uuid: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64.

    Never one starting with ``-``: the storage tool would take it for an option
    and fail to format (1 start in 64 did, before). Kafka's own ids skip them too.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(random_uuid().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def _is_our_broker(pid: int, data_dir: Path) -> bool:
    """Guard against a recycled PID: the process must be a broker of this directory."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        _MAIN_CLASS.encode() in cmdline and f"-Ddelayline.broker.dir={data_dir}".encode() in cmdline
    )


# The broker logs to stdout, which start() sends to broker.log: one file, and
# JVM crash output lands beside the broker's own lines.
_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Logger name="kafka" level="INFO"/>
    <Logger name="org.apache.kafka" level="INFO"/>
    <Logger name="state.change.logger" level="WARN"/>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Root level="WARN"><AppenderRef ref="out"/></Root>
  </Loggers>
</Configuration>
"""
