"""What the committer's watch remembers of a record that ends a handed-over version.

A cancel (not delayline's own tombstone) or a valid newer version of a schedule's id
ends an older version by the hold's own rules (:func:`delayline.core.versions.supersedes`);
the watch (:mod:`delayline.committer.watch`) keeps only what deciding that takes
(:class:`Later`), by topic and id, until the pipeline has read the record
(:meth:`LaterRecords.expire`). Pure: no Kafka.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, NamedTuple

from delayline.contract import ConsumedRecord
from delayline.contract.checks import ScheduleFields
from delayline.core.model import Cancel, Parsed, Schedule, SourceRef
from delayline.core.versions import supersedes

if TYPE_CHECKING:
    from delayline.committer.later_columns import LaterColumns

CANCEL = "cancel"
"""A later cancel withholds the version."""
UPDATE = "update"
"""A later valid version withholds it (and is planned by the hold)."""
HOT_RECORDS = 100_000
"""How many records :class:`LaterRecords` keeps as objects; past it half of them move to
columns (:mod:`delayline.committer.later_columns`), each topic's oldest first, the topic
with the most first: 49 bytes a record instead of about 300, on disk."""
COLUMNS_EXPIRE_MS = 5_000
"""How often the records in columns are looked at for what to forget (a pass over them
all)."""
MEMORY_MS = 30_000
"""How long the watch remembers a record that ends a version not (yet) handed over, at
least: longer than a micro-batch takes, from reading its input to handing over. It is
all a committer without the pipeline's checkpoint has: there, a pipeline further behind
its input than this can hand over a schedule whose cancel the watch has forgotten."""


class Later(NamedTuple):
    """A record of the input topics that would end an older version of its id, as the
    watch read it: only what deciding that takes, not the record (the watch may keep a
    record long: a whole record cost the driver about 1.5 KiB, a :class:`SourceRef`
    beside it 0.6 KiB). A tuple of numbers and a string: the garbage collector stops
    tracking it, so tens of thousands remembered add nothing to a full collection's pause.

    Attributes:
        kind: :data:`CANCEL` or :data:`UPDATE`.
        partition: Its partition.
        version_offset: Its place among its id's versions: its offset (a copy: the
            offset of the version it copies, :class:`delayline.contract.checks.ScheduleFields`).
        version_timestamp_ms: The timestamp that goes with :attr:`version_offset`.
        offset: Its own offset.
        read_ms: When the watch read it (host clock).
    """

    kind: str
    partition: int
    version_offset: int
    version_timestamp_ms: int
    offset: int
    read_ms: int

    def ends(self, version: Schedule) -> str | None:
        """How this record (of ``version``'s topic and id) ends ``version``:
        :attr:`kind`, or ``None`` when it is not later than ``version``."""
        source = version.require_source()
        at = SourceRef(source.topic, self.partition, self.version_offset, self.version_timestamp_ms)
        return self.kind if supersedes(at, source) else None


def later_of(
    record: ConsumedRecord, parse: Callable[[ConsumedRecord], Parsed], read_ms: int
) -> tuple[str, Later] | None:
    """The schedule id ``record`` would end an older version of, and how (see
    :func:`later_from`)."""
    return later_from(record, parse(record), read_ms)


def later_from(
    record: ConsumedRecord, parsed: Parsed | ScheduleFields, read_ms: int
) -> tuple[str, Later] | None:
    """The schedule id ``record`` (parsed as ``parsed``, or a valid schedule's fields
    only) would end an older version of, and how; ``None`` when it ends nothing: an
    invalid record (the hold dead-letters it), one without an id, or delayline's own
    tombstone (one follows every delivery)."""
    if isinstance(parsed, ScheduleFields):  # the fields of the schedule below
        version = parsed.version_offset
        return parsed.id, Later(UPDATE, record.partition, version, record.timestamp_ms,
                                record.offset, read_ms)  # fmt: skip
    if isinstance(parsed, Cancel) and parsed.fired_offset is None:
        kind = CANCEL
    elif isinstance(parsed, Schedule):
        kind = UPDATE
    else:
        return None
    if not parsed.id:
        return None
    source = parsed.source or record.source
    return parsed.id, Later(kind, source.partition, source.offset, source.timestamp_ms,
                            record.offset, read_ms)  # fmt: skip


class LaterRecords:
    """What each (topic, schedule id) read lately ends. Pure: no Kafka, the caller
    passes the time and the pipeline's progress. Not thread-safe.

    A record is forgotten once it was read more than ``memory_ms`` ago *and*, when the
    pipeline's progress is known (:meth:`expire`), the pipeline has read it: until its
    hold has read a cancel or a newer version, only the watch can withhold what that
    ends, however far behind its input the pipeline is.

    Kept small (millions may be remembered while the pipeline reads a backlog): the
    newest ``hot_records`` by topic, each id to its record or, rarely, its records in
    the order read, and each topic's ids in the order read (an id once per record); the
    older ones in columns (:class:`~delayline.committer.later_columns.LaterColumns`,
    its ids as two hashes), 49 bytes each, on disk past about 26,000: so its memory
    is bounded whatever the backlog.

    Args:
        memory_ms: How long a record is kept at least.
        hot_records: How many records are kept as objects at most.
        columns_every_ms: How often those in columns are looked at by :meth:`expire`.
        spill: Whether the columns live in files (``False``: in memory, all of them).
    """

    def __init__(
        self,
        memory_ms: int = MEMORY_MS,
        hot_records: int = HOT_RECORDS,
        columns_every_ms: int = COLUMNS_EXPIRE_MS,
        *,
        spill: bool = True,
    ) -> None:
        self.memory_ms = memory_ms
        self.hot_records = hot_records
        self.columns_every_ms = columns_every_ms
        self.spill = spill
        self._by_id: dict[str, dict[str, Later | tuple[Later, ...]]] = {}
        self._order: dict[str, deque[str]] = {}
        self._hot = 0
        """Records kept as objects."""
        self._columns: LaterColumns | None = None
        self._columns_expired_ms: int | None = None
        self.forgotten: dict[tuple[str, int], int] = {}
        """By input (topic, partition): one past the highest offset of a record
        forgotten; a partition missing: none was. Records read there from that offset on
        are all remembered (:meth:`InputWatch.reread` reads no further, and moves it back
        to where it began once it has read everything again, nothing forgotten
        meanwhile: :meth:`kept`)."""
        self._kept = 0
        self.keep_until: int | None = None
        """Nothing is forgotten before this time: what a restarted committer read of the
        input since the checkpoint stays until a batch hands over again (then plus
        :attr:`memory_ms`); ``None``: no such wait."""

    def __len__(self) -> int:
        """How many records are remembered (may be read from any thread)."""
        columns = self._columns
        return self._hot + (0 if columns is None else len(columns))

    def note(self, topic: str, schedule_id: str, later: Later) -> None:
        """Remember ``later``, a record of ``schedule_id`` in ``topic``."""
        ids = self._by_id.get(topic)
        if ids is None:
            ids = self._by_id[topic] = {}
            self._order[topic] = deque()
        known = _laters(ids.get(schedule_id))
        if _among(later, known):
            return  # read again: remembered already
        ids[schedule_id] = (*known, later) if known else later
        self._order[topic].append(schedule_id)
        self._hot += 1
        if self._hot > self.hot_records:
            self._to_columns(self.hot_records // 2)

    def note_again(self, records: Sequence[tuple[str, str, Later]]) -> None:
        """Remember ``records`` (topic, schedule id, what it ends) read again
        (:meth:`InputWatch.reread`), each once: whether each is remembered already is
        decided before any is noted (noting moves the oldest to columns), the columns
        searched once for them all."""
        fresh = [
            (topic, sid, later)
            for topic, sid, later in records
            if not _among(later, _laters(self._by_id.get(topic, {}).get(sid)))
        ]
        columns = self._columns
        if columns is not None and fresh:
            there = columns.has_each(
                [(topic, sid, later.partition, later.offset) for topic, sid, later in fresh]
            )
            fresh = [record for record, known in zip(fresh, there, strict=True) if not known]
        seen: set[tuple[str, int, int]] = set()
        for topic, sid, later in fresh:
            place = (topic, later.partition, later.offset)
            if place not in seen:
                seen.add(place)
                self.note(topic, sid, later)

    def ends(self, version: Schedule) -> str | None:
        """How a remembered record ends ``version`` (``None``: none does): the first
        read that does."""
        return self.ends_each([version])[0]

    def ends_each(self, versions: Sequence[Schedule]) -> list[str | None]:
        """:meth:`ends` of each of ``versions``, the columns searched once for them all
        (a batch just handed over): columns first, they were read first."""
        sources = [version.require_source() for version in versions]
        columns = self._columns
        found: list[str | None] = (
            [None] * len(versions)
            if columns is None
            else columns.ends_each(
                [(s.topic, v.id, s) for v, s in zip(versions, sources, strict=True)]
            )
        )
        return [
            kind if kind is not None else self._hot_ends(version, source.topic)
            for version, source, kind in zip(versions, sources, found, strict=True)
        ]

    def versions_between_each(self, spans: Sequence[tuple[str, str, int, int, int]]) -> list[bool]:
        """For each of ``spans`` (topic, schedule id, partition, low, high), whether a
        remembered valid version of that id (:data:`UPDATE`: a newer one, or a copy)
        lies in that partition strictly between offsets ``low`` and ``high``. The
        columns are searched once for them all, and only for those not kept as objects."""
        found = [
            any(
                _between(later, partition, low, high)
                for later in _laters(self._by_id.get(topic, {}).get(sid))
            )
            for topic, sid, partition, low, high in spans
        ]
        columns = self._columns
        rest = [i for i, hit in enumerate(found) if not hit]
        if columns is not None and rest:
            there = columns.versions_between_each([spans[i] for i in rest])
            for i, hit in zip(rest, there, strict=True):
                found[i] = hit
        return found

    def _hot_ends(self, version: Schedule, topic: str) -> str | None:
        """How a record kept as an object ends ``version``, the first read that does."""
        for later in _laters(self._by_id.get(topic, {}).get(version.id)):
            kind = later.ends(version)
            if kind is not None:
                return kind
        return None

    @contextmanager
    def kept(self) -> Iterator[None]:
        """Forget nothing meanwhile (:meth:`expire` does nothing): what a re-read finds
        remembered stays so until it ends."""
        self._kept += 1
        try:
            yield
        finally:
            self._kept -= 1

    def expire(self, now_ms: int, taken: Mapping[tuple[str, int], int] | None = None) -> None:
        """Forget what was read more than :attr:`memory_ms` before ``now_ms`` and lies
        before ``taken``: by (topic, partition), the offset up to which the pipeline has
        read its input and the versions handed over before have been checked (a
        partition missing from it: nothing of it is forgotten); ``None``: the pipeline's
        progress is unknown, the time alone decides. Records kept as objects are
        forgotten in the order read (the first that must stay keeps those after it), those
        in columns each on its own, at most every :attr:`columns_every_ms`."""
        if self._kept or (self.keep_until is not None and now_ms < self.keep_until):
            return
        columns = self._columns
        if columns is not None and (
            self._columns_expired_ms is None
            or now_ms - self._columns_expired_ms >= self.columns_every_ms
        ):
            self._columns_expired_ms = now_ms
            _forgot(self.forgotten, columns.expire(now_ms - self.memory_ms, taken))
        forgotten = self.forgotten
        for topic, order in self._order.items():
            ids = self._by_id[topic]
            while order:
                schedule_id = order[0]
                # An id's records are in the order read, as its places in the order.
                first, *rest = _laters(ids[schedule_id])
                if first.read_ms >= now_ms - self.memory_ms:
                    break
                if taken is not None and first.offset >= taken.get((topic, first.partition), 0):
                    break
                order.popleft()
                _drop_first(ids, schedule_id, rest)
                self._hot -= 1
                place = (topic, first.partition)
                if first.offset >= forgotten.get(place, 0):
                    forgotten[place] = first.offset + 1

    def _to_columns(self, keep: int) -> None:
        """Move the oldest records kept as objects to columns, all but ``keep``."""
        if self._columns is None:
            from delayline.committer.later_columns import LaterColumns  # noqa: PLC0415 - numpy

            self._columns = LaterColumns(spill=self.spill)
        moved: list[tuple[str, str, Later]] = []
        for topic, order in sorted(self._order.items(), key=lambda item: -len(item[1])):
            ids = self._by_id[topic]
            while order and self._hot - len(moved) > keep:
                schedule_id = order.popleft()
                first, *rest = _laters(ids[schedule_id])
                moved.append((topic, schedule_id, first))
                _drop_first(ids, schedule_id, rest)
        self._columns.add(moved)  # before the count drops: len() is read meanwhile
        self._hot -= len(moved)


def _forgot(forgotten: dict[tuple[str, int], int], ends: Mapping[tuple[str, int], int]) -> None:
    """Raise ``forgotten``'s end of each place to ``ends``' where higher."""
    for place, end in ends.items():
        if end > forgotten.get(place, 0):
            forgotten[place] = end


def _drop_first(
    ids: dict[str, Later | tuple[Later, ...]], schedule_id: str, rest: Sequence[Later]
) -> None:
    """Forget the first of ``schedule_id``'s records kept as objects (``rest``: the
    others, in the order read)."""
    if rest:
        ids[schedule_id] = rest[0] if len(rest) == 1 else tuple(rest)
    else:
        del ids[schedule_id]


def _between(later: Later, partition: int, low: int, high: int) -> bool:
    """Whether ``later`` is a valid version in ``partition`` strictly between offsets
    ``low`` and ``high``."""
    return later.kind == UPDATE and later.partition == partition and low < later.offset < high


def _among(later: Later, known: Sequence[Later]) -> bool:
    """Whether ``later``'s record (its partition and offset) is one of ``known``."""
    return any(k.partition == later.partition and k.offset == later.offset for k in known)


def _laters(found: Later | tuple[Later, ...] | None) -> tuple[Later, ...]:
    """What :class:`LaterRecords` keeps for an id, as a tuple."""
    if found is None:
        return ()
    return (found,) if isinstance(found, Later) else found
