"""Process trees from /proc: what to measure, and what to kill, for a launched tool.

A tree, not a process group: PySpark's Python worker daemon moves itself into a
group of its own, so a group misses the workers that hold much of the memory.
"""

from __future__ import annotations

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
        stats[int(entry.name)] = stat.rsplit(")", 1)[1].split()
    return stats


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
