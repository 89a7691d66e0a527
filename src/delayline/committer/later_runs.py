"""The runs of the watch's columns (:mod:`delayline.committer.later_columns`), and where
they live: in memory while small, in files past that.

**Runs.** Rows come in batches, each batch one run sorted by the 64-bit hash. A new run
is merged into the one before it while that is at most twice its size, up to
:data:`RUN_ROWS` rows, so ten million rows noted 50,000 at a time sit in about 16
runs, and rows of one hash stay in the order read. Each run keeps every
:data:`FENCE`-th hash in memory (its *fence*): a lookup searches the fence, then one
stretch of :data:`FENCE` hashes, a page or two of the run.

**On disk, whatever the backlog.** An array of :data:`MAPPED_BYTES` or more (the rows of
a run past about 26,000 rows, its hashes past about 131,000) lives in a file of its
own, unnamed (gone when the process ends, SIGKILL included) in the system's temporary
directory (``TMPDIR``: a disk, not a ``tmpfs``), mapped into memory, and the pages a
call touched are handed back (:meth:`Run.release`, ``madvise(MADV_DONTNEED)``: the
kernel keeps them in its page cache while memory is free, writes them out and drops
them when it is not). So what the watch holds in its own memory is a fixed budget
whatever the backlog, and a backlog costs 49 bytes of disk a record and page faults on
lookups. Where no file can be made (a full disk), an array takes anonymous memory
instead, with a warning (:class:`Pages`).
"""

from __future__ import annotations

import logging
import mmap
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from delayline.core.mounts import is_memory_fs, mount_of, read_mounts

log = logging.getLogger(__name__)

CAN_SPILL = hasattr(os, "posix_fallocate") and hasattr(mmap, "MADV_DONTNEED")
"""Whether this system can keep the runs in files: room reserved on disk ahead
(``posix_fallocate``) and pages handed back (``MADV_DONTNEED``); Linux can."""

ROW = np.dtype(
    [
        ("crc", "<u4"),
        ("kind", "u1"),
        ("place", "<u4"),
        ("version_offset", "<i8"),
        ("version_timestamp_ms", "<i8"),
        ("offset", "<i8"),
        ("read_ms", "<i8"),
    ],
    align=False,
)
"""A row but its 64-bit hash (kept apart: it is searched)."""

RUN_ROWS = 1 << 20
"""The most rows a merge makes one run of (41 MiB and 8 MiB of hashes): a merge touches
both runs and the one it makes, so larger runs would raise the watch's budget, and ten
million rows are searched in a dozen runs."""
MAPPED_BYTES = 1 << 20
"""An array this large or larger lives in a file of its own, mapped (see the module's
docstring), or else in an anonymous mapping of its own: returned to the system when it
is dropped. The allocator would place arrays of up to 32 MiB on its heap once it has
seen one that large freed, and runs are merged and dropped all the time: the heap's
holes kept about 40 bytes a record more than the rows (``benchmarks/watch_memory.py``)."""
FENCE = 512
"""Every this many rows a run's hash is kept in memory, to find where to look."""
FEW_KEYS = 8
"""Up to this many keys are looked for one by one, more all at once (a bisection of
numpy arrays, which costs about as much for one key as for hundreds)."""


@dataclass(frozen=True, slots=True)
class Run:
    """Rows sorted by :attr:`hashes`, rows of one hash in the order read.

    Attributes:
        hashes: Each row's 64-bit hash, ascending.
        rows: The rows, in the same order.
        min_read_ms: The earliest read time among them.
        min_offsets: By place, the lowest offset among them (a place not in it: none).
        fence: Every :data:`FENCE`-th hash, in memory.
        mappings: The mappings of the files behind :attr:`hashes` and :attr:`rows`,
            if any.
    """

    hashes: npt.NDArray[np.int64]
    rows: npt.NDArray[np.void]
    min_read_ms: int
    min_offsets: Mapping[int, int]
    fence: npt.NDArray[np.int64]
    mappings: tuple[mmap.mmap, ...]

    def __len__(self) -> int:
        return len(self.hashes)

    def starts(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
        """For each of ``keys``, the first row whose hash is not below it (numpy's
        ``searchsorted``), found through the fence: a bisection of each key's stretch of
        :data:`FENCE` rows, so a lookup touches a page or two of a run on disk."""
        if not self.mappings:  # in memory: no page to spare
            return np.searchsorted(self.hashes, keys, side="left")
        size = len(self.hashes)
        blocks = np.searchsorted(self.fence, keys, side="left")
        # fence[b - 1] < key <= fence[b]: the row sought is past (b - 1) * FENCE, at or
        # before b * FENCE.
        lo = np.maximum(blocks - 1, 0) * FENCE
        hi = np.minimum(blocks * FENCE, size)
        if len(keys) <= FEW_KEYS:
            for i, (low, high) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
                lo[i] = low + int(np.searchsorted(self.hashes[low:high], keys[i], side="left"))
            return lo
        active = np.flatnonzero(lo < hi)
        while len(active):
            mid = (lo[active] + hi[active]) // 2
            below = self.hashes[mid] < keys[active]
            lo[active] = np.where(below, mid + 1, lo[active])
            hi[active] = np.where(below, hi[active], mid)
            active = active[lo[active] < hi[active]]
        return lo

    def hits(self, keys: npt.NDArray[np.int64]) -> list[tuple[int, range]]:
        """For each of ``keys`` some row has, its index among them and those rows."""
        starts = self.starts(keys)
        size = len(self.hashes)
        inside = np.flatnonzero(starts < size)
        out = []
        for i in inside[self.hashes[starts[inside]] == keys[inside]].tolist():
            start = end = int(starts[i])
            key = int(keys[i])
            while end < size and int(self.hashes[end]) == key:
                end += 1
            out.append((i, range(start, end)))
        return out

    def release(self) -> None:
        """Hand back the pages of its files this process touched (the kernel keeps
        what they hold)."""
        for mapping in self.mappings:
            mapping.madvise(mmap.MADV_DONTNEED)


class Pages:
    """Where the arrays of one :class:`~delayline.committer.later_columns.LaterColumns`
    live: an array of :data:`MAPPED_BYTES` or more in a file of its own when ``spill``
    and this system can (:data:`CAN_SPILL`), else in an anonymous mapping of its own.

    Guarantees: an array in a file has its room taken on disk before it is mapped
    (``posix_fallocate``), so on ext4, xfs and the like writing to it never meets a full
    disk (on a copy-on-write file system, btrfs or ZFS, reserving is no promise and a
    full disk would end the process: keep ``TMPDIR`` elsewhere); a file that cannot be
    made costs one array in memory, with a warning, and the next array tries again;
    every file is unnamed and goes with the process, however it ends.
    """

    def __init__(self, spill: bool) -> None:
        self.spill = spill and CAN_SPILL
        self._failing = False
        self._checked_dir = False

    def empty(self, size: int, dtype: np.dtype[Any]) -> tuple[npt.NDArray[Any], mmap.mmap | None]:
        """An array of ``size`` items, uninitialised, and the mapping of the file it
        lives in, if one."""
        nbytes = size * dtype.itemsize
        if nbytes < MAPPED_BYTES:
            return np.empty(size, dtype), None
        mapping = self._file(nbytes) if self.spill else None
        if mapping is None:
            return np.frombuffer(mmap.mmap(-1, nbytes), dtype, count=size), None
        return np.frombuffer(mapping, dtype, count=size), mapping

    def _file(self, nbytes: int) -> mmap.mmap | None:
        """A file of ``nbytes``, its room taken on disk, mapped; ``None`` if none can be
        made (said once until one can again)."""
        if not self._checked_dir:
            self._checked_dir = True
            _warn_if_memory(Path(tempfile.gettempdir()))
        try:
            with tempfile.TemporaryFile(prefix="delayline-watch-") as file:
                os.posix_fallocate(file.fileno(), 0, nbytes)
                mapping = mmap.mmap(file.fileno(), nbytes)  # holds a descriptor of its own
        except OSError as exc:
            if not self._failing:
                log.warning(
                    "committer watch: no file of %d bytes in %s (%s): what it remembers "
                    "stays in memory until one can be made",
                    nbytes,
                    tempfile.gettempdir(),
                    exc,
                )
            self._failing = True
            return None
        if self._failing:
            log.info("committer watch: files in %s again", tempfile.gettempdir())
            self._failing = False
        return mapping

    def taken(
        self, array: npt.NDArray[Any], at: npt.NDArray[np.intp]
    ) -> tuple[npt.NDArray[Any], mmap.mmap | None]:
        """``array[at]`` into an array of :meth:`empty` (``clip``: no copy on the way;
        the indices are in range)."""
        out, mapping = self.empty(len(at), array.dtype)
        return np.take(array, at, mode="clip", out=out), mapping

    def run(
        self,
        hashes: tuple[npt.NDArray[np.int64], mmap.mmap | None],
        rows: tuple[npt.NDArray[np.void], mmap.mmap | None],
        min_offsets: Mapping[int, int] | None = None,
    ) -> Run:
        """A run of ``hashes`` and ``rows`` (sorted), each with its file if one;
        ``min_offsets``: :attr:`Run.min_offsets` if known."""
        table = rows[0]
        return Run(
            hashes[0],
            table,
            int(table["read_ms"].min()),
            _min_offsets(table) if min_offsets is None else min_offsets,
            hashes[0][::FENCE].copy(),
            tuple(mapping for _, mapping in (hashes, rows) if mapping is not None),
        )

    def merge(self, older: Run, newer: Run) -> Run:
        """One run of both, rows of one hash in the order read (``older``'s first)."""
        at = np.searchsorted(older.hashes, newer.hashes, side="right") + np.arange(len(newer))
        size = len(older) + len(newer)
        from_newer = np.zeros(size, bool)
        from_newer[at] = True
        hashes = self.empty(size, np.dtype(np.int64))
        rows = self.empty(size, ROW)
        hashes[0][at], rows[0][at] = newer.hashes, newer.rows
        from_older = ~from_newer
        hashes[0][from_older], rows[0][from_older] = older.hashes, older.rows
        lows = dict(older.min_offsets)
        for place, low in newer.min_offsets.items():
            lows[place] = min(low, lows.get(place, low))
        return self.run(hashes, rows, lows)

    def settled(self, runs: Iterable[Run]) -> list[Run]:
        """``runs`` (oldest first), each merged into the one before it while that is at
        most twice its size and both fit in :data:`RUN_ROWS`; each run read handed back
        (:meth:`Run.release`) as soon as it was."""
        out: list[Run] = []
        for run in runs:
            out.append(run)
            while (
                len(out) >= 2
                and len(out[-2]) <= 2 * len(out[-1])
                and len(out[-2]) + len(out[-1]) <= RUN_ROWS
            ):
                newer, older = out.pop(), out[-1]
                out[-1] = self.merge(older, newer)
                for done in (older, newer, out[-1]):
                    done.release()
        return out


def _min_offsets(rows: npt.NDArray[np.void]) -> dict[int, int]:
    """By place, the lowest offset among ``rows``."""
    places, offsets = rows["place"], rows["offset"]
    return {int(place): int(offsets[places == place].min()) for place in np.unique(places)}


def _warn_if_memory(directory: Path) -> None:
    """Warn when ``directory`` is on a file system kept in memory."""
    mount = mount_of(directory, read_mounts())
    if mount is not None and is_memory_fs(mount.fs_type):
        log.warning(
            "committer watch: the temporary directory %s is a %s, kept in memory: point "
            "TMPDIR at a disk, or a backlog the pipeline has not read costs memory again",
            directory,
            mount.fs_type,
        )
