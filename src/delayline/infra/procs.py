"""Process trees from /proc: what to measure, and what to kill, for a launched tool.

A tree, not a process group: PySpark's Python worker daemon moves itself into a
group of its own, so a group misses the workers that hold much of the memory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path


def proc_stats() -> dict[int, list[str]]:
    """The fields of /proc/<pid>/stat after the command name, for every process.

    Index 0 is the state, 1 the ppid, 11/12 utime/stime (ticks), 19 the start time
    (ticks after boot), 21 RSS (pages).
    """
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        stats[int(entry.name)] = stat_fields(stat)
    return stats


def stat_fields(stat: str) -> list[str]:
    """The fields of a /proc ``stat`` line (a process's or a thread's) after the command
    name, indexed as :func:`proc_stats` says."""
    return stat.rsplit(")", 1)[1].split()


def tree(root: int, stats: dict[int, list[str]] | None = None) -> list[int]:
    """``root`` and all its live (non-zombie) descendants."""
    stats = proc_stats() if stats is None else stats
    children: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)
    out: list[int] = []
    todo = [root] if root in stats else []
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        if stats[pid][0] != "Z":
            out.append(pid)
    return out


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs. A zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of this very process still answers kill(0); check its state.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def kill_until_gone(pids: Iterable[int], timeout_s: float = 30) -> list[int]:
    """SIGKILL each of ``pids`` still alive, again and again until all are gone or
    ``timeout_s`` passed (a process may fork while it is killed).

    Returns:
        Those that were still alive when called (those it killed).
    """
    alive = [p for p in pids if pid_alive(p)]
    deadline = time.monotonic() + timeout_s
    left = alive
    while left and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
        left = [p for p in left if pid_alive(p)]
    return alive
