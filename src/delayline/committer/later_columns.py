"""The bulk of what the committer's watch remembers, in columns, on disk past a budget.

Under a backlog the watch remembers every input record the pipeline has not read yet
(:class:`delayline.committer.later.LaterRecords`): millions, while the pipeline reads a
backlog of millions. As Python objects (a :class:`~delayline.committer.later.Later` in
dicts by id) that is about 300 bytes a record. Past a budget of records,
:class:`~delayline.committer.later.LaterRecords` moves its oldest here: each record's
:class:`~delayline.committer.later.Later` as one row of numpy arrays, its id as two
hashes, its topic and partition as one small number: 49 bytes a record.

**Ids as hashes.** A row keeps Python's hash of the id (64 bits, SipHash keyed anew in
each process: nobody outside it can choose ids that collide) and the CRC-32 of its
UTF-8 (32 bits, an unrelated function). A version is taken for the row's id only when
both agree and the topic is the same: with ten million rows remembered, a lookup meets
another id's row about once in 10^22 lookups, and such a row withholds the version only
if it also lies after the version in its topic.

**Runs, on disk.** Rows come in batches (:meth:`LaterColumns.add`), each batch one run
sorted by the hash, merged as they come (:mod:`delayline.committer.later_runs`), and
past about 26,000 rows in files, not in the process's memory: what the watch holds in
memory is a fixed budget whatever the backlog (the records kept as objects, the small
runs, each run's fence, and what one call touches: at most a merge of two runs, what
expiring one run keeps, or :data:`TOUCHED_BYTES` of lookups plus what one large lookup
touches of one run). :meth:`LaterColumns.ends_each` searches each run once for a batch
of versions.

Pure: no Kafka. Not thread-safe, but :func:`len` may be read from any thread.
"""

from __future__ import annotations

import mmap
import zlib
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from delayline.committer.later import CANCEL, UPDATE, Later
from delayline.committer.later_runs import ROW, Pages, Run
from delayline.core.model import SourceRef
from delayline.core.versions import supersedes

KINDS = (CANCEL, UPDATE)
"""A row's kind, by its number."""

TOUCHED_BYTES = 16 << 20
"""Lookups hand back the pages they touched once that could be this much (three pages
of each run a key, at most), and a lookup that could touch more on its own hands back
each run's as soon as it was searched."""


def crc_of(schedule_id: str) -> int:
    """The second hash of an id."""
    return zlib.crc32(schedule_id.encode("utf-8", "surrogatepass"))


class LaterColumns:
    """Rows of :class:`~delayline.committer.later.Later` by topic and id, in columns.

    Args:
        spill: Whether large arrays live in files (see the module's docstring);
            otherwise in anonymous memory, all of it the process's.
    """

    def __init__(self, *, spill: bool = True) -> None:
        self._runs: tuple[Run, ...] = ()
        self._places: list[tuple[str, int]] = []
        self._place_ids: dict[tuple[str, int], int] = {}
        self._pages = Pages(spill)
        self._unreleased = 0
        """What lookups may have touched since the files' pages were last handed back."""

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
        table = np.empty(size, ROW)
        # Column by column from generators: no list of a number object per row.
        table["crc"] = np.fromiter((crc_of(sid) for _, sid, _ in rows), np.uint32, size)
        table["kind"] = np.fromiter((KINDS.index(r[2].kind) for r in rows), np.uint8, size)
        table["place"] = np.fromiter(
            (self._place(topic, later.partition) for topic, _, later in rows), np.uint32, size
        )
        for field in ("version_offset", "version_timestamp_ms", "offset", "read_ms"):
            table[field] = np.fromiter((getattr(r[2], field) for r in rows), np.int64, size)
        order = np.argsort(hashes, kind="stable")
        pages = self._pages
        run = pages.run(pages.taken(hashes, order), pages.taken(table, order))
        self._runs = tuple(pages.settled([*self._runs, run]))
        self._release()

    def has_each(self, records: Sequence[tuple[str, str, int, int]]) -> list[bool]:
        """For each of ``records`` (topic, schedule id, partition, offset), whether it
        is remembered. Each run is searched once for them all."""
        found = [False] * len(records)
        wanted = [
            (crc_of(sid), self._place_ids.get((topic, partition)), offset)
            for topic, sid, partition, offset in records
        ]
        for run, i, rows in self._hits([sid for _, sid, _, _ in records]):
            found[i] = found[i] or any(
                (int(row["crc"]), int(row["place"]), int(row["offset"])) == wanted[i]
                for row in (run.rows[r] for r in rows)
            )
        return found

    def versions_between_each(self, spans: Sequence[tuple[str, str, int, int, int]]) -> list[bool]:
        """For each of ``spans`` (topic, schedule id, partition, low, high), whether a
        valid version of that id (an :data:`~delayline.committer.later.UPDATE`) is
        remembered in that partition with an offset strictly between ``low`` and
        ``high``. Each run is searched once for them all."""
        found = [False] * len(spans)
        update = KINDS.index(UPDATE)
        wanted = [
            (crc_of(sid), self._place_ids.get((topic, partition)), low, high)
            for topic, sid, partition, low, high in spans
        ]
        for run, i, rows in self._hits([sid for _, sid, _, _, _ in spans]):
            crc, place, low, high = wanted[i]
            found[i] = found[i] or any(
                int(row["crc"]) == crc and int(row["place"]) == place
                and int(row["kind"]) == update and low < int(row["offset"]) < high
                for row in (run.rows[r] for r in rows)
            )  # fmt: skip
        return found

    def ends_each(self, versions: Sequence[tuple[str, str, SourceRef]]) -> list[str | None]:
        """For each of ``versions`` (topic, schedule id, source), how the first row read
        of that id in that topic that lies after the version ends it (``None``: none
        does). Each run is searched once for them all; runs are in the order read, and
        the rows of one hash within a run, so the first row found is the first read."""
        found: list[str | None] = [None] * len(versions)
        crcs = [crc_of(sid) for _, sid, _ in versions]
        for run, i, rows in self._hits([sid for _, sid, _ in versions]):
            if found[i] is None:  # else an older run ended it
                topic, _, source = versions[i]
                found[i] = self._first_ending(run, rows, crcs[i], topic, source)
        return found

    def _hits(self, ids: Sequence[str]) -> Iterator[tuple[Run, int, range]]:
        """Each run (oldest first) with a row of the hash of one of ``ids``: the run,
        that id's index, those rows. Each run is searched once for them all, and handed
        back once searched when the lookup is large (:meth:`_searching`)."""
        if not self._runs or not ids:
            return
        keys = np.fromiter((hash(sid) for sid in ids), np.int64, len(ids))
        large = self._searching(len(ids))
        for run in self._runs:
            for i, rows in run.hits(keys):
                yield run, i, rows
            if large:
                run.release()

    def _first_ending(
        self, run: Run, rows: range, crc: int, topic: str, source: SourceRef
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

    def expire(
        self, before_ms: int, taken: Mapping[tuple[str, int], int] | None = None
    ) -> dict[tuple[str, int], int]:
        """Forget each row read before ``before_ms`` whose record lies before ``taken``
        (by topic and partition, the offset up to which the pipeline has read: a
        partition missing from it keeps its rows); ``None``: the time alone decides.
        A run none of whose rows can go (read since ``before_ms``, or each partition's
        lowest offset in it not before ``taken``) is not read. Returns, by topic and
        partition, one past the highest offset of a row forgotten."""
        forgotten: dict[tuple[str, int], int] = {}
        limits: list[int] | None = None
        if taken is not None:
            limits = [taken.get(place, 0) for place in self._places]
        by_place = None if limits is None else np.asarray(limits, np.int64)
        runs: list[Run] = []
        for run in self._runs:
            if run.min_read_ms >= before_ms or (
                limits is not None
                and all(low >= limits[place] for place, low in run.min_offsets.items())
            ):
                runs.append(run)
                continue
            gone = run.rows["read_ms"] < before_ms
            if by_place is not None:
                gone &= run.rows["offset"] < by_place[run.rows["place"]]
            if not gone.any():
                runs.append(run)
                run.release()
                continue
            self._forgot(forgotten, run, gone)
            if not gone.all():
                kept = np.flatnonzero(~gone)
                pages = self._pages
                runs.append(pages.run(pages.taken(run.hashes, kept), pages.taken(run.rows, kept)))
                runs[-1].release()
            run.release()
        self._runs = tuple(self._pages.settled(runs))
        self._release()
        return forgotten

    def _forgot(self, forgotten: dict[tuple[str, int], int], run: Run, gone: np.ndarray) -> None:
        """Note in ``forgotten`` the highest offset of each place among ``run``'s rows
        that are ``gone``."""
        places = run.rows["place"][gone]
        offsets = run.rows["offset"][gone]
        for place in np.unique(places).tolist():
            end = int(offsets[places == place].max()) + 1
            key = self._places[place]
            if end > forgotten.get(key, 0):
                forgotten[key] = end

    def _place(self, topic: str, partition: int) -> int:
        place = self._place_ids.get((topic, partition))
        if place is None:
            place = self._place_ids[(topic, partition)] = len(self._places)
            self._places.append((topic, partition))
        return place

    def _release(self) -> None:
        """Hand back every page of the runs' files this process touched."""
        self._unreleased = 0
        for run in self._runs:
            run.release()

    def _searching(self, keys: int) -> bool:
        """Count what looking up ``keys`` ids may touch, handing back what lookups
        touched before if this one could take it past :data:`TOUCHED_BYTES`; True when
        this one alone could: the caller hands back each run once searched."""
        more = keys * len(self._runs) * 3 * mmap.PAGESIZE
        if self._unreleased + more > TOUCHED_BYTES:
            self._release()
        if more > TOUCHED_BYTES:
            return True
        self._unreleased += more
        return False
