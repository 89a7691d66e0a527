"""Run and watch a pipeline from outside, as an operator would: the ``delayline run``
process and a ``read_committed`` collector of what it delivers. Used by the demo,
the end-to-end tests and benchmarks."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from delayline.contract.headers import KEY
from delayline.core.clock import Clock, SystemClock
from delayline.errors import InfraError, WaitTimeoutError
from delayline.infra.procs import kill_until_gone, tree
from delayline.kafka.reader import private_consumer, to_consumed_record

_METRICS_LINE = re.compile(r"metrics on (http://[^/\s]+)/metrics")


class PipelineProcess:
    """``delayline run`` (or another ``command``, ``committer``) as a child process in
    its own process group.

    SIGKILL of the group takes the Spark JVM and Python workers down with the
    driver, as a crash of the machine or container would.
    """

    def __init__(
        self, bootstrap_servers: str, args: Sequence[str], log_path: Path, command: str = "run"
    ) -> None:
        self.command = command
        self.bootstrap_servers = bootstrap_servers
        self.args = list(args)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_start = 0

    def start(self, *extra: str, env: Mapping[str, str] | None = None) -> None:
        """Launch the pipeline; returns at once (see :meth:`wait_ready`).

        Args:
            extra: More ``delayline run`` arguments.
            env: Variables set for this launch only, over this process's environment
                (which the pipeline otherwise inherits as it is).
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "delayline",
                    self.command,
                    "-b",
                    self.bootstrap_servers,
                    *self.args,
                    *extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=None if env is None else {**os.environ, **env},
            )

    def wait_ready(self, timeout_s: float = 180, line: str = "ready: first batch done") -> float:
        """Wait for the first completed micro-batch (or the log ``line`` given); return
        seconds waited."""
        began = time.monotonic()
        self._wait_log(re.compile(re.escape(line)), timeout_s, "pipeline not ready")
        return time.monotonic() - began

    def metrics_url(self, timeout_s: float = 180) -> str:
        """The ``http://host:port`` of the metrics server this run started, as its log
        says (start it with ``--metrics-port 0``: the kernel picks a port no other
        process holds, where a port chosen beforehand could be taken meanwhile)."""
        return self._wait_log(_METRICS_LINE, timeout_s, "no metrics server").group(1)

    def _wait_log(self, pattern: re.Pattern[str], timeout_s: float, missing: str) -> re.Match[str]:
        """Wait until the log since the start matches ``pattern``; raise if the process
        exits first or ``timeout_s`` passes (``missing`` says what did not come)."""
        began = time.monotonic()
        while time.monotonic() - began < timeout_s:
            found = pattern.search(self.log_since_start())
            if found:
                return found
            if self.proc is not None and self.proc.poll() is not None:
                raise InfraError(f"pipeline exited with {self.proc.returncode}:\n{self.tail()}")
            time.sleep(0.2)
        raise WaitTimeoutError(f"{missing} in {timeout_s} s:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL the whole process tree (Spark's Python workers included) and wait."""
        if self.proc is None:
            return
        # List the tree first: once the root dies its children are reparented.
        members = tree(self.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        kill_until_gone(members)
        self.proc.wait()
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP the whole process tree: nothing it does moves on until :meth:`resume`
        (a test looks at what it left mid-run, then kills it or lets it go on)."""
        assert self.proc is not None
        for pid in tree(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the whole process tree after :meth:`pause`."""
        assert self.proc is not None
        for pid in tree(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def terminate(self, timeout_s: float = 90) -> int:
        """SIGTERM the driver (a clean stop) and return its exit code."""
        assert self.proc is not None
        members = tree(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout_s)
        kill_until_gone(members)  # stragglers only: a clean stop leaves none
        self.proc = None
        return code

    def interrupt(self, timeout_s: float = 90) -> int:
        """SIGINT the process group, as Ctrl-C in a terminal does; return the exit code."""
        assert self.proc is not None
        members = tree(self.proc.pid)
        os.killpg(self.proc.pid, signal.SIGINT)
        code = self.proc.wait(timeout_s)
        kill_until_gone(members)  # stragglers only: a clean stop leaves none
        self.proc = None
        return code

    def log_since_start(self) -> str:
        """The log written since the last :meth:`start`."""
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as f:
            f.seek(self._log_start)
            return f.read().decode(errors="replace")

    def tail(self, lines: int = 40) -> str:
        """The last lines of the log."""
        return "\n".join(self.log_since_start().splitlines()[-lines:])

    def __enter__(self) -> PipelineProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()


@dataclass(frozen=True, slots=True)
class Delivery:
    """A record seen on a target topic, with the time it was read."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    arrival_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    blind_ms: int = 0
    """How long the reader had not looked before it read this one (since it last took
    all there was): the record became readable at most that long before ``arrival_ms``,
    plus the fetch's own latency. A reader held up (a busy host, a long garbage collection)
    shows here, not as a burst."""

    @property
    def schedule_id(self) -> str | None:
        """The ``scheduler-key`` header: which schedule this delivery fired."""
        for name, value in self.headers:
            if name == KEY and value is not None:
                return value.decode()
        return None


COLLECT_BATCH = 1_000
"""The most records :class:`DeliveryCollector` takes from its consumer at a time,
beyond the one it waited for (all stamped with the time they arrived)."""


class DeliveryCollector:
    """Consumes topics from the beginning with ``read_committed`` (or, not
    ``read_committed``, as Kafka's Java consumer does by default) in a thread; each
    delivery is stamped with its arrival time from ``clock``. A record read again (the
    consumer group rewound by a broker restart) is kept once: a duplicate counted here
    is a second record, never the same one twice.

    The thread only stamps and keeps what its consumer returns; :meth:`snapshot` turns
    it into :class:`Delivery` values. Converting on the reading thread made the reader
    itself a second behind a burst of 50,000 deliveries."""

    def __init__(
        self,
        bootstrap_servers: str,
        topics: Sequence[str],
        clock: Clock | None = None,
        *,
        read_committed: bool = True,
    ) -> None:
        self.clock = clock or SystemClock()
        self._consumer = private_consumer(
            bootstrap_servers,
            "collector",
            read_committed=read_committed,
            overrides={"topic.metadata.refresh.interval.ms": 1000},
        )
        self._consumer.subscribe(list(topics))
        self._arrived: list[tuple[list[Any], int, int]] = []
        self._seen: list[Delivery] = []
        self._positions: set[tuple[str, int, int]] = set()
        self._lock = threading.Lock()
        self._converting = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DeliveryCollector:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()

    def snapshot(self) -> list[Delivery]:
        """Everything read so far."""
        # The reading thread's lock is held only to take what it kept: converting under
        # it held the reader back for as long (half a second for 150,000 records), and
        # every delivery it read next was stamped that much late.
        with self._converting:
            with self._lock:
                arrived, self._arrived = self._arrived, []
            for messages, arrival, blind in arrived:
                for msg in messages:
                    if msg.error() is not None:
                        continue
                    r = to_consumed_record(msg)
                    at = (r.topic, r.partition, r.offset)
                    if at in self._positions:
                        continue
                    self._positions.add(at)
                    self._seen.append(
                        Delivery(*at, r.timestamp_ms, arrival, r.key, r.value, r.headers, blind)
                    )
            return list(self._seen)

    def wait_for(
        self, predicate: Callable[[list[Delivery]], bool], timeout_s: float
    ) -> list[Delivery]:
        """Wait until ``predicate(deliveries)`` holds; return them (raise on timeout)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            seen = self.snapshot()
            if predicate(seen):
                return seen
            time.sleep(0.05)
        raise WaitTimeoutError(f"condition not met in {timeout_s} s; {len(self.snapshot())} seen")

    def _run(self) -> None:
        looked = self.clock.now_ms()
        while not self._stop.is_set():
            first = self._consumer.poll(0.1)
            if first is None:
                looked = self.clock.now_ms()
                continue
            # Then what is already there, without waiting (consume waits for a whole
            # batch).
            messages = [first, *self._consumer.consume(COLLECT_BATCH, 0)]
            arrival = self.clock.now_ms()
            with self._lock:
                self._arrived.append((messages, arrival, arrival - looked))
            if len(messages) <= COLLECT_BATCH:
                # All taken: what comes next arrived after now. A full batch left more
                # behind, as blind as this one (``looked`` stays).
                looked = self.clock.now_ms()
