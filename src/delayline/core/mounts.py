"""The machine's mounts: which file system holds a path, and of what kind."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MEMORY_FS_TYPES = frozenset({"tmpfs", "ramfs"})
"""File systems whose files are kept in memory."""


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of ``/proc/mounts``: where a file system is mounted and its type."""

    point: Path
    fs_type: str


def mount_of(path: Path, mounts: Iterable[Mount]) -> Mount | None:
    """The mount holding ``path`` (the longest mount point above it)."""
    best: Mount | None = None
    for mount in mounts:
        holds = path == mount.point or mount.point in path.parents
        if holds and (best is None or len(mount.point.parts) > len(best.point.parts)):
            best = mount
    return best


def read_mounts(proc_mounts: Path = Path("/proc/mounts")) -> list[Mount]:
    """This machine's mounts (empty where ``/proc/mounts`` does not exist)."""
    try:
        lines = proc_mounts.read_text().splitlines()
    except OSError:
        return []
    mounts = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3:
            # Spaces in mount points are written as \040.
            mounts.append(Mount(Path(fields[1].replace("\\040", " ")), fields[2]))
    return mounts


def is_memory_fs(fs_type: str) -> bool:
    """Whether files of a file system of this type live in memory."""
    return fs_type in MEMORY_FS_TYPES
