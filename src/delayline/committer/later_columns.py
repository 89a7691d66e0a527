"""The bulk of what the committer's watch remembers, in columns: 49 bytes a record.

Under a backlog the watch remembers every input record the pipeline has not read yet
(:class:`delayline.committer.later.LaterRecords`): millions, while the pipeline reads a
backlog of millions. As Python objects (a :class:`~delayline.committer.later.Later` in
dicts by id) that is about 300 bytes a record. Past a budget of records,
:class:`~delayline.committer.later.LaterRecords` moves its oldest here: each record's
:class:`~delayline.committer.later.Later` as one row of numpy arrays, its id as two
hashes, its topic and partition as one small number.

**Ids as hashes.** A row keeps Python's hash of the id (64 bits, SipHash keyed anew in
each process: nobody outside it can choose ids that collide) and the CRC-32 of its
UTF-8 (32 bits, an unrelated function). A version is taken for the row's id only when
both agree and the topic is the same: with ten million rows remembered, a lookup meets
another id's row about once in 10^22 lookups, and such a row withholds the version only
if it also lies after the version in its topic.

**Runs.** Rows come in batches (:meth:`LaterColumns.add`), each batch one run sorted by
the 64-bit hash, found by binary search. A new run is merged into the one before it
while that is at most twice its size, up to :data:`RUN_ROWS` rows, so ten million rows
sit in about a dozen runs, and rows of one hash stay in the order read.
:meth:`LaterColumns.ends_each` searches each run once for a batch of versions.

Pure: no Kafka. Not thread-safe, but :func:`len` may be read from any thread.
"""

from __future__ import annotations

import mmap
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from delayline.committer.later import CANCEL, UPDATE, Later
from delayline.core.model import SourceRef
from delayline.core.versions import supersedes

KINDS = (CANCEL, UPDATE)
"""A row's kind, by its number."""

_FIELDS = np.dtype(
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


def crc_of(schedule_id: str) -> int:
    """The second hash of an id."""
    return zlib.crc32(schedule_id.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class _Run:
    """Rows sorted by :attr:`hashes`, rows of one hash in the order read."""

    hashes: npt.NDArray[np.int64]
    rows: npt.NDArray[np.void]
    min_read_ms: int

    def __len__(self) -> int:
        return len(self.hashes)

    def matches(self, key: int) -> range:
        """The rows whose 64-bit hash is ``key``."""
        lo = int(np.searchsorted(self.hashes, key, side="left"))
        if lo == len(self.hashes) or int(self.hashes[lo]) != key:
            return range(0)
        return range(lo, int(np.searchsorted(self.hashes, key, side="right")))


class LaterColumns:
    """Rows of :class:`~delayline.committer.later.Later` by topic and id, in columns."""

    def __init__(self) -> None:
        self._runs: tuple[_Run, ...] = ()
        self._places: list[tuple[str, int]] = []
        self._place_ids: dict[tuple[str, int], int] = {}

    def __len__(self) -> int:
        """How many rows are remembered."""
        return sum(len(run) for run in self._runs)

    def add(self, rows: Sequence[tuple[str, str, Later]]) -> None:
        """Remember ``rows`` (topic, schedule id, what its record ends), read after every
        row remembered so far, in the order read."""
        if not rows:
            return
        size = len(rows)
        hashes = np.fromiter((hash(sid) for _, sid, _ in rows), np.int64, size)
        table = np.empty(size, _FIELDS)
        # Column by column from generators: no list of a number object per row.
        table["crc"] = np.fromiter((crc_of(sid) for _, sid, _ in rows), np.uint32, size)
        table["kind"] = np.fromiter((KINDS.index(r[2].kind) for r in rows), np.uint8, size)
        table["place"] = np.fromiter(
            (self._place(topic, later.partition) for topic, _, later in rows), np.uint32, size
        )
        for field in ("version_offset", "version_timestamp_ms", "offset", "read_ms"):
            table[field] = np.fromiter((getattr(r[2], field) for r in rows), np.int64, size)
        order = np.argsort(hashes, kind="stable")
        self._runs = tuple(
            _settled([*self._runs, _run(_taken(hashes, order), _taken(table, order))])
        )

    def has(self, topic: str, schedule_id: str, partition: int, offset: int) -> bool:
        """Whether the record at ``offset`` of ``topic``'s ``partition`` is remembered
        for ``schedule_id``."""
        place = self._place_ids.get((topic, partition))
        if place is None:
            return False
        key, crc = hash(schedule_id), crc_of(schedule_id)
        for run in self._runs:
            for i in run.matches(key):
                row = run.rows[i]
                if (int(row["crc"]), int(row["place"]), int(row["offset"])) == (crc, place, offset):
                    return True
        return False

    def ends_each(self, versions: Sequence[tuple[str, str, SourceRef]]) -> list[str | None]:
        """For each of ``versions`` (topic, schedule id, source), how the first row read
        of that id in that topic that lies after the version ends it (``None``: none
        does). Each run is searched once for them all; runs are in the order read, and
        the rows of one hash within a run, so the first row found is the first read."""
        found: list[str | None] = [None] * len(versions)
        if not self._runs or not versions:
            return found
        keys = np.fromiter((hash(sid) for _, sid, _ in versions), np.int64, len(versions))
        crcs = [crc_of(sid) for _, sid, _ in versions]
        for run in self._runs:
            starts = np.searchsorted(run.hashes, keys, side="left")
            inside = starts < len(run)
            hits = np.flatnonzero(inside)
            hits = hits[run.hashes[starts[hits]] == keys[hits]]
            for i in hits.tolist():
                if found[i] is not None:
                    continue  # an older run ended it
                topic, _, source = versions[i]
                key, start = int(keys[i]), int(starts[i])
                rows = range(start, int(np.searchsorted(run.hashes, key, side="right")))
                found[i] = self._first_ending(run, rows, crcs[i], topic, source)
        return found

    def _first_ending(
        self, run: _Run, rows: range, crc: int, topic: str, source: SourceRef
    ) -> str | None:
        """How the first of ``rows`` (of ``run``, one hash) that is of the id whose CRC
        is ``crc`` in ``topic`` ends the version at ``source``, if one does."""
        for i in rows:
            row = run.rows[i]
            if int(row["crc"]) != crc:
                continue
            place_topic, partition = self._places[int(row["place"])]
            if place_topic != topic:
                continue
            at = SourceRef(
                topic, partition, int(row["version_offset"]), int(row["version_timestamp_ms"])
            )
            if supersedes(at, source):
                return KINDS[int(row["kind"])]
        return None

    def expire(self, before_ms: int, taken: Mapping[tuple[str, int], int] | None = None) -> None:
        """Forget each row read before ``before_ms`` whose record lies before ``taken``
        (by topic and partition, the offset up to which the pipeline has read: a
        partition missing from it keeps its rows); ``None``: the time alone decides."""
        if not any(run.min_read_ms < before_ms for run in self._runs):
            return
        limits: npt.NDArray[np.int64] | None = None
        if taken is not None:
            limits = np.fromiter(
                (taken.get(place, 0) for place in self._places), np.int64, len(self._places)
            )
        runs: list[_Run] = []
        for run in self._runs:
            if run.min_read_ms >= before_ms:
                runs.append(run)
                continue
            gone = run.rows["read_ms"] < before_ms
            if limits is not None:
                gone &= run.rows["offset"] < limits[run.rows["place"]]
            if not gone.any():
                runs.append(run)
            elif not gone.all():
                kept = np.flatnonzero(~gone)
                runs.append(_run(_taken(run.hashes, kept), _taken(run.rows, kept)))
        self._runs = tuple(_settled(runs))

    def _place(self, topic: str, partition: int) -> int:
        place = self._place_ids.get((topic, partition))
        if place is None:
            place = self._place_ids[(topic, partition)] = len(self._places)
            self._places.append((topic, partition))
        return place


RUN_ROWS = 1 << 20
"""The most rows a merge makes one run of (49 MiB and its hashes): a merge holds both
runs and the one it makes, so larger runs would double the memory of a backlog of
millions for a moment, and ten million rows are searched in a dozen runs."""
MAPPED_BYTES = 1 << 20
"""An array this large or larger is given pages of its own (an anonymous mapping),
returned to the system when it is dropped. The allocator would place arrays of up to
32 MiB on its heap once it has seen one that large freed, and runs are merged and
dropped all the time: the heap's holes kept about 40 bytes a record more than the rows
(``benchmarks/watch_memory.py``)."""


def _empty(size: int, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """An array of ``size`` items, uninitialised (see :data:`MAPPED_BYTES`)."""
    nbytes = size * dtype.itemsize
    if nbytes < MAPPED_BYTES:
        return np.empty(size, dtype)
    return np.frombuffer(mmap.mmap(-1, nbytes), dtype, count=size)


def _taken(array: npt.NDArray[Any], at: npt.NDArray[np.intp]) -> npt.NDArray[Any]:
    """``array[at]`` into an array of :func:`_empty` (``clip``: no copy on the way; the
    indices are in range)."""
    return np.take(array, at, mode="clip", out=_empty(len(at), array.dtype))


def _run(hashes: npt.NDArray[np.int64], rows: npt.NDArray[np.void]) -> _Run:
    return _Run(hashes, rows, int(rows["read_ms"].min()))


def _merge(older: _Run, newer: _Run) -> _Run:
    """One run of both, rows of one hash in the order read (``older``'s first)."""
    at = np.searchsorted(older.hashes, newer.hashes, side="right") + np.arange(len(newer))
    size = len(older) + len(newer)
    from_newer = np.zeros(size, bool)
    from_newer[at] = True
    hashes = _empty(size, np.dtype(np.int64))
    rows = _empty(size, _FIELDS)
    hashes[at], rows[at] = newer.hashes, newer.rows
    from_older = ~from_newer
    hashes[from_older], rows[from_older] = older.hashes, older.rows
    return _Run(hashes, rows, min(older.min_read_ms, newer.min_read_ms))


def _settled(runs: Iterable[_Run]) -> list[_Run]:
    """``runs`` (oldest first), each merged into the one before it while that is at
    most twice its size and both fit in :data:`RUN_ROWS`."""
    out: list[_Run] = []
    for run in runs:
        out.append(run)
        while (
            len(out) >= 2
            and len(out[-2]) <= 2 * len(out[-1])
            and len(out[-2]) + len(out[-1]) <= RUN_ROWS
        ):
            newer = out.pop()
            out[-1] = _merge(out[-1], newer)
    return out
