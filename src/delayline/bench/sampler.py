"""Resident memory and CPU time of a process group, sampled from /proc."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from delayline.infra.procs import proc_stats, stat_fields, tree

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


ROLES = ("jvm", "driver", "python workers", "other")
"""What each process of a pipeline's tree is: Spark's JVM, the Python driver (the
tree's root), PySpark's Python worker daemon and workers, anything else."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One reading: wall time, summed RSS, summed CPU seconds of the live members, and
    RSS and CPU seconds per role (:data:`ROLES`, in that order)."""

    at_s: float
    rss_bytes: int
    cpu_s: float
    rss_by_role: tuple[int, ...] = ()
    cpu_by_role: tuple[float, ...] = ()


class GroupSampler:
    """Samples the process tree rooted at ``pgid`` (a session leader), in a thread.

    The tree, not the process group: PySpark's Python worker daemon moves itself
    into a group of its own, and its workers hold a large share of the memory.
    CPU time of processes that leave the tree is kept, so totals never go backwards.
    """

    def __init__(
        self,
        pgid: int,
        interval_s: float = 0.5,
        also: Callable[[], list[int]] | None = None,
    ) -> None:
        self.pgid = pgid
        self.also = also
        """Roots of further trees sampled with this one, found afresh each time (the
        executors of a cluster on this machine, which are not the pipeline's children)."""
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self._cpu_base_s = 0.0  # CPU of processes that left the tree
        self._last_raw_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> GroupSampler:
        """Begin sampling."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join()

    def retarget(self, pgid: int) -> None:
        """Follow a new process tree (a restarted pipeline); CPU stays cumulative."""
        self.pgid = pgid

    def peak_rss_bytes(self) -> int:
        """Highest summed RSS seen."""
        return max((s.rss_bytes for s in self.samples), default=0)

    def rss_at_peak_mb(self) -> dict[str, int]:
        """RSS (MiB) per role when the summed RSS peaked: where the peak came from."""
        peak = max(self.samples, key=lambda s: s.rss_bytes, default=None)
        if peak is None or not peak.rss_by_role:
            return {}
        return {role: round(b / 2**20) for role, b in zip(ROLES, peak.rss_by_role, strict=True)}

    def cpu_percent(self, start_s: float, end_s: float) -> float | None:
        """CPU used between two wall times, as % of one core (None without samples)."""
        window = self._window(start_s, end_s)
        if window is None:
            return None
        return 100 * (window[-1].cpu_s - window[0].cpu_s) / (window[-1].at_s - window[0].at_s)

    def cpu_seconds(self, start_s: float, end_s: float) -> float | None:
        """CPU seconds used between two wall times (None without samples)."""
        window = self._window(start_s, end_s)
        return None if window is None else window[-1].cpu_s - window[0].cpu_s

    def cpu_seconds_by_role(self, start_s: float, end_s: float) -> dict[str, float]:
        """CPU seconds used between two wall times by role (:data:`ROLES`), by the
        processes alive at both ends (one that exited meanwhile takes its share with
        it: never below 0); empty without samples."""
        return _cpu_by_role(self._window(start_s, end_s))

    def cpu_percent_by_role(self, start_s: float, end_s: float) -> dict[str, float]:
        """:meth:`cpu_seconds_by_role` as % of one core, over the span
        :meth:`cpu_percent` divides by (the first and last samples of the window)."""
        window = self._window(start_s, end_s)
        if window is None:
            return {}
        span_s = window[-1].at_s - window[0].at_s
        return {role: 100 * cpu_s / span_s for role, cpu_s in _cpu_by_role(window).items()}

    def _window(self, start_s: float, end_s: float) -> list[Sample] | None:
        """The samples between two wall times, if two or more, apart in time."""
        window = [s for s in self.samples if start_s <= s.at_s <= end_s]
        if len(window) < 2 or window[-1].at_s <= window[0].at_s:
            return None
        return window

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = read_group(self.pgid, self.also() if self.also else ())
            if sample.cpu_s < self._last_raw_s:
                # Processes left the tree (exited, or the pipeline was killed): keep
                # their CPU time so the total never goes backwards.
                self._cpu_base_s += self._last_raw_s - sample.cpu_s
            self._last_raw_s = sample.cpu_s
            total = sample.cpu_s + self._cpu_base_s
            self.samples.append(replace(sample, cpu_s=total))
            self._stop.wait(self.interval_s)


def _cpu_by_role(window: list[Sample] | None) -> dict[str, float]:
    """CPU seconds by role between a window's first and last samples (never below 0)."""
    if window is None or not window[0].cpu_by_role or not window[-1].cpu_by_role:
        return {}
    return {
        role: max(0.0, after - before)
        for role, before, after in zip(
            ROLES, window[0].cpu_by_role, window[-1].cpu_by_role, strict=True
        )
    }


def read_group(root: int, also: Iterable[int] = ()) -> Sample:
    """Sum RSS and CPU time over the live processes descending from ``root`` and from
    each of ``also`` (inclusive)."""
    stats = proc_stats()
    rss = 0
    cpu_ticks = 0
    by_role = [0] * len(ROLES)
    ticks_by_role = [0] * len(ROLES)
    members = set(tree(root, stats))
    for other in also:
        members.update(tree(other, stats))
    roles = {pid: _role(pid, root, stats[pid][19]) for pid in members}
    for pid in sorted(members):
        fields = stats[pid]
        ticks = int(fields[11]) + int(fields[12])
        cpu_ticks += ticks
        role = ROLES.index(roles[pid])
        ticks_by_role[role] += ticks
        if roles[pid] == "other" and roles.get(int(fields[1])) == "jvm":
            # A command the JVM spawns shares the JVM's memory until it runs (vfork):
            # its RSS is the JVM's, counted already (one run's peak was 932 MiB too high).
            continue
        pages = int(fields[21]) * _PAGE
        rss += pages
        by_role[role] += pages
    cpu_by_role = tuple(t / _TICKS for t in ticks_by_role)
    return Sample(time.time(), rss, cpu_ticks / _TICKS, tuple(by_role), cpu_by_role)


def cpu_by_role(root: int) -> dict[str, float]:
    """CPU seconds by role (:data:`ROLES`) of the live processes descending from
    ``root`` (inclusive), each with what its exited children used (a reaped child's
    time is its parent's). The difference of two calls is what the tree used between
    them, as long as its processes live."""
    stats = proc_stats()
    out = dict.fromkeys(ROLES, 0.0)
    for pid in tree(root, stats):
        fields = stats[pid]
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
        out[_role(pid, root, fields[19])] += ticks / _TICKS
    return out


THREAD_KINDS = ("python", "librdkafka", "exited")
"""What each thread of a Python process is: librdkafka's own (named ``rdk:...``), any
other live one (the interpreter's threads, which in Python 3.11 keep the process's name),
or one that exited (what the process used less what its live threads did)."""


def cpu_by_thread_kind(pid: int) -> dict[str, float]:
    """CPU seconds of ``pid`` by thread kind (:data:`THREAD_KINDS`); they add up to the
    process's. The difference of two calls is what each kind used between them, but for
    a thread that exited meanwhile: all of its time counts as "exited" then. Empty if
    ``pid`` is gone."""
    out = dict.fromkeys(THREAD_KINDS, 0.0)
    try:
        total = _cpu_s(Path(f"/proc/{pid}/stat").read_text())
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return {}
    for task in tasks:
        try:
            name = (task / "comm").read_bytes()
            used = _cpu_s((task / "stat").read_text())
        except OSError:
            continue  # the thread ended between the listing and the read: "exited"
        out["librdkafka" if name.startswith(b"rdk:") else "python"] += used
    out["exited"] = max(0.0, total - out["python"] - out["librdkafka"])
    return out


JVM_THREAD_KINDS = ("rocksdb", "jit", "gc", "other")
"""What each thread of Spark's JVM is: RocksDB's background flushes and compactions of the
state (``rocksdb:...``), the JIT compilers (``C1``/``C2 CompilerThread``), the garbage
collector and the VM's own (``G1 ...``, ``GC Thread``, ``VM ...``), anything else (the
query's and the tasks' threads, Kafka's clients, the network)."""


def jvm_cpu_by_thread_kind(root: int) -> dict[tuple[int, int], tuple[str, float]]:
    """CPU seconds of every live thread of the JVMs descending from ``root``, by (pid,
    thread id), with its kind (:data:`JVM_THREAD_KINDS`); :func:`jvm_kinds_between` turns
    two readings into each kind's share."""
    stats = proc_stats()
    out: dict[tuple[int, int], tuple[str, float]] = {}
    for pid in tree(root, stats):
        if _role(pid, root, stats[pid][19]) != "jvm":
            continue
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                name = (task / "comm").read_text()
                used = _cpu_s((task / "stat").read_text())
            except OSError:
                continue
            out[(pid, int(task.name))] = (_jvm_kind(name), used)
    return out


def jvm_kinds_between(
    before: dict[tuple[int, int], tuple[str, float]],
    after: dict[tuple[int, int], tuple[str, float]],
    seconds: float,
) -> dict[str, float]:
    """Each kind's CPU between two :func:`jvm_cpu_by_thread_kind` readings ``seconds``
    apart, as % of one core: by the threads alive at the second (one that started
    meanwhile counts whole; one that ended is left out, so the kinds may add up to less
    than the JVM used)."""
    out = dict.fromkeys(JVM_THREAD_KINDS, 0.0)
    for key, (kind, used) in after.items():
        was = before.get(key)
        # A thread id used again by a new thread: less than the old one had, counted whole.
        out[kind] += used if was is None or was[1] > used else used - was[1]
    return {kind: round(100 * cpu_s / seconds, 2) for kind, cpu_s in out.items()}


def _jvm_kind(name: str) -> str:
    if name.startswith("rocksdb"):
        return "rocksdb"
    if name.startswith(("C1 Compiler", "C2 Compiler")):
        return "jit"
    if name.startswith(("G1 ", "GC Thread", "VM ")):
        return "gc"
    return "other"


def _cpu_s(stat: str) -> float:
    """utime + stime of a /proc ``stat`` line, in seconds."""
    fields = stat_fields(stat)
    return (int(fields[11]) + int(fields[12])) / _TICKS


_ROLE_OF: dict[tuple[int, str], str] = {}
"""Roles seen, by (pid, start time): a JVM or Python process keeps its role (a reused pid
does not); "other" is never kept, as a launcher script may still exec into Java."""


def _role(pid: int, root: int, started: str) -> str:
    if pid == root:
        return "driver"
    role = _ROLE_OF.get((pid, started))
    if role is None:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return "other"  # gone: asked again if it is still there next time
        if name == "java":
            role = "jvm"
        elif name.startswith("python"):
            role = "python workers"
        else:
            return "other"
        _ROLE_OF[(pid, started)] = role
    return role
