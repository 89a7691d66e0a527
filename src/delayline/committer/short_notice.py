"""Short-notice versions a committer delivers itself (:mod:`delayline.contract.notice`),
as its watch reads them from the input: which to take, which it has delivered, and from
where a committer that takes an in-flight partition (after a restart, a SIGKILL, a
take-over) must read the input again so that it loses none.

A version is short under the epoch that governs its place in the input, judged from the
record alone; the hold folds it but never holds it, so the committer owning its in-flight
partition (:func:`~delayline.fire.inflight.inflight_partition` under that epoch's count)
is the only one that delivers it. Its delivery writes, in the same transaction,
delayline's own tombstone of it to its input partition (naming its offset, as a
hand-over's does: :func:`~delayline.contract.records.render_tombstone`): compaction then
forgets it, and a committer reading that partition again sees the version delivered.
A cancel or newer version that ends it is the watch's, as for a handed-over one.

Rules are judged only once fresh (:class:`~delayline.kafka.notice_store.NoticeFollower`):
what was read before a call that found them settled is judged by them, and what was read
while they were pending waits for a later call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from delayline.committer.rereads import Place
from delayline.contract import ConsumedRecord
from delayline.contract.checks import ScheduleFields
from delayline.contract.formats import SHORT_POSITIONS
from delayline.contract.notice import MAX_NOTICE_MS, NoticeRules
from delayline.core.model import Parsed, Schedule
from delayline.errors import RecordFormatError
from delayline.fire.inflight import inflight_partition

Told = Schedule | tuple[Place, str, int]
"""What the watch tells: a version, or an own tombstone ((place, id, fired offset))."""


@dataclass(frozen=True, slots=True)
class Short:
    """A short-notice version this committer delivers.

    Attributes:
        inflight_partition: The in-flight partition it belongs to (its owner delivers it).
        schedule: The version, with its place in the input as its source.
    """

    inflight_partition: int
    schedule: Schedule

    @property
    def place(self) -> Place:
        """Its input partition."""
        source = self.schedule.require_source()
        return source.topic, source.partition

    @property
    def offset(self) -> int:
        """Its offset there."""
        return self.schedule.require_source().offset


class Mark(NamedTuple):
    """What had been read when the rules were asked (:meth:`ShortVersions.mark`).

    Attributes:
        told: How many versions and tombstones had been told, since the start.
        read_to: The watch's positions then.
    """

    told: int
    read_to: dict[Place, int]


class ShortVersions:
    """The short-notice versions of the in-flight partitions a committer owns: fed what
    its watch reads, in each input partition's order, and judged when the rules are
    fresh.

    Guarantees:
        * every version read that is short under the rules governing its offset, and
          whose in-flight partition is owned, is given by :meth:`judge` once, unless
          delayline's own tombstone of it (its delivery) was read first; one whose
          tombstone is read after it was given is returned by :meth:`take_delivered`
          (the caller withholds it: delivered already);
        * :meth:`positions` never passes a version of an in-flight partition that is
          open (given and neither :meth:`done` nor seen delivered) or not judged yet:
          read again from there, nothing of it is missed.

    Each input partition is told forward only (:meth:`read_to` never moves back): a
    committer that reads one again from earlier (a take-over) tells only what lies past
    where this one had read, and a version read again while open is not given again.
    Not thread-safe.
    """

    def __init__(self, owned: Iterable[int] = ()) -> None:
        self.owned: set[int] = set(owned)
        self._unjudged: list[Told] = []
        """Versions and own tombstones ((place, id, fired offset)) read since the
        last judging, in the order read."""
        self._read_ms: list[int] = []
        """When each of those was read (host clock)."""
        self._told = 0
        """How many were told since the start (the judged ones included)."""
        self._read_to: dict[Place, int] = {}
        """Per input partition, the watch's position when last told: the next offset."""
        self._judged_to: dict[Place, int] = {}
        """The same, as of the last judging."""
        self._open: dict[tuple[str, str], Short] = {}
        """Given and not done, by (topic, id) and at most one per version."""
        self._delivered: list[Short] = []
        """Given, then shown delivered by an own tombstone read since."""

    def begin(self, positions: Mapping[Place, int]) -> None:
        """The watch begins to read each input partition at its offset in ``positions``
        (the next to read): until a judging passes them, :meth:`positions` says to read
        again from there."""
        for place, offset in positions.items():
            self._read_to.setdefault(place, offset)
            self._judged_to.setdefault(place, offset)

    @property
    def waiting(self) -> bool:
        """Whether something read waits to be judged."""
        return bool(self._unjudged)

    def read_version(self, schedule: Schedule, read_ms: int) -> None:
        """A valid schedule version the watch read at ``read_ms`` (its source is its
        place)."""
        self._unjudged.append(schedule)
        self._read_ms.append(read_ms)
        self._told += 1

    def oldest_ms(self) -> int | None:
        """When the earliest version or tombstone waiting to be judged was read: the
        watch forgets nothing read after it, less its memory (a cancel of a version
        judged late still withholds it)."""
        return self._read_ms[0] if self._read_ms else None

    def read_own_tombstone(
        self, place: Place, schedule_id: str, fired_offset: int, read_ms: int
    ) -> None:
        """Delayline's own tombstone read in ``place`` at ``read_ms``: the version of
        ``schedule_id`` at ``fired_offset`` was handed over or, if short, delivered (an
        open one is so at once: :meth:`take_delivered`)."""
        found = self._open.get((place[0], schedule_id))
        if found is not None and found.offset == fired_offset and found.place == place:
            del self._open[(place[0], schedule_id)]
            self._delivered.append(found)
            return
        self._unjudged.append((place, schedule_id, fired_offset))
        self._read_ms.append(read_ms)
        self._told += 1

    @property
    def told(self) -> int:
        """How many versions and tombstones were told since the start (a place in the
        order read, for :meth:`read_again`)."""
        return self._told

    def read_again(self, at: int, items: list[tuple[Told, int]]) -> None:
        """Versions and own tombstones ((place, id, fired offset)), each with its read
        time, read again (a partition taken over: from its last owner's positions) up
        to where the watch had read when :attr:`told` was ``at``: judged as if read
        then, before what the watch read since. No rules may be asked between the two
        (a mark would count the wrong items)."""
        start = max(0, at - (self._told - len(self._unjudged)))
        self._unjudged[start:start] = [item for item, _ in items]
        self._read_ms[start:start] = [read_ms for _, read_ms in items]
        self._told += len(items)

    def take_delivered(self) -> list[Short]:
        """The versions given that an own tombstone read since showed delivered (no
        longer open: withhold them), each once."""
        out, self._delivered = self._delivered, []
        return out

    def read_to(self, positions: Mapping[Place, int]) -> None:
        """The watch has read each input partition up to its offset in ``positions``
        (the next to read), everything before it told here."""
        for place, offset in positions.items():
            if offset > self._read_to.get(place, -1):
                self._read_to[place] = offset

    def mark(self) -> Mark:
        """What has been read by now: take it just before the rules are asked, and
        judge by those rules up to it (:meth:`judge`)."""
        return Mark(self._told, dict(self._read_to))

    def judge(self, rules: NoticeRules, mark: Mark | None = None) -> list[Short]:
        """Judge what was read up to ``mark`` (taken before the rules were asked; no
        mark: everything told, the rules asked after the last read). Pending rules judge
        nothing: what was read waits for settled ones.

        Returns:
            The short versions newly given, in the order read.
        """
        if rules.pending:
            return []
        read_to = self._read_to if mark is None else mark.read_to
        count = len(self._unjudged)
        if mark is not None:
            count = max(0, min(count, count - (self._told - mark.told)))
        given: list[Short] = []
        for item in self._unjudged[:count]:
            if isinstance(item, Schedule):
                short = self._short(item, rules)
                key = (item.require_source().topic, item.id)
                if short is not None and not _same(self._open.get(key), short):
                    self._open[key] = short
                    given.append(short)
            else:
                (topic, _), schedule_id, fired = item
                found = self._open.get((topic, schedule_id))
                if found is not None and found.offset == fired and found.place == item[0]:
                    del self._open[(topic, schedule_id)]
                    if found in given:
                        given.remove(found)
                    else:
                        self._delivered.append(found)
        del self._unjudged[:count]
        del self._read_ms[:count]
        self._judged_to = dict(read_to)
        return given

    def done(self, short: Short) -> None:
        """``short`` was delivered (its transaction committed) or withheld (a later
        record of its id ended it)."""
        key = (short.place[0], short.schedule.id)
        if self._open.get(key) is short:
            del self._open[key]

    def release(self, partitions: Iterable[int]) -> dict[int, dict[Place, int]]:
        """The in-flight ``partitions`` are no longer owned: what was open there is
        dropped.

        Returns:
            Where each one's next owner must read the input again from
            (:meth:`positions`, as they were before the drop).
        """
        gone = set(partitions)
        before = {p: self.positions(p) for p in gone}
        self.owned -= gone
        for s in [s for s in self._open.values() if s.inflight_partition in gone]:
            del self._open[(s.place[0], s.schedule.id)]
        return before

    def positions(self, inflight_partition: int) -> dict[Place, int]:
        """Per input partition, where a new owner of ``inflight_partition`` must read
        again from: its earliest open version, else where the last judging had read to."""
        out = dict(self._judged_to)
        for s in self._open.values():
            if s.inflight_partition == inflight_partition and s.offset < out.get(
                s.place, s.offset + 1
            ):
                out[s.place] = s.offset
        return out

    def open(self) -> list[Short]:
        """The versions given and not done, in no particular order."""
        return list(self._open.values())

    def _short(self, schedule: Schedule, rules: NoticeRules) -> Short | None:
        """The version as a :class:`Short` of this committer's, if it is one."""
        source = schedule.require_source()
        epoch = rules.short(
            source.topic, source.partition, source.offset, source.timestamp_ms, schedule.due_ms
        )
        if epoch is None:
            return None
        partition = inflight_partition(schedule.id, epoch.inflight_partitions)
        return Short(partition, schedule) if partition in self.owned else None


def short_candidate(
    record: ConsumedRecord,
    parsed: Parsed | ScheduleFields,
    parse: Callable[[ConsumedRecord], Parsed],
) -> Schedule | None:
    """``record`` as a version to tell :meth:`ShortVersions.read_version`, if it may be
    short under some rules: valid, not a copy (one names an earlier place), due less
    than :data:`~delayline.contract.notice.MAX_NOTICE_MS` after its timestamp.
    ``parsed`` is what the watch made of it (a header-contract schedule's fields only:
    it is then made whole by ``parse``, only if it may be short)."""
    if not isinstance(parsed, ScheduleFields | Schedule):
        return None
    if parsed.due_ms - record.timestamp_ms >= MAX_NOTICE_MS:
        return None
    if isinstance(parsed, ScheduleFields):
        if parsed.version_offset != record.offset:
            return None
        made = parse(record)
        if not isinstance(made, Schedule):
            return None
        parsed = made
    source = parsed.source or record.source
    if source.offset != record.offset:
        return None
    return parsed if parsed.source is not None else replace(parsed, source=source)


def encode_positions(positions: Mapping[Place, int]) -> str:
    """``positions`` (:meth:`ShortVersions.positions`) as the metadata of an in-flight
    partition's committed offset (JSON, in the current
    :data:`~delayline.contract.formats.SHORT_POSITIONS` format). A broker keeps 4,096
    bytes of it by default (``offset.metadata.max.bytes``): about 150 input partitions."""
    read: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(positions.items()):
        read.setdefault(topic, {})[str(partition)] = offset
    return json.dumps({"format": SHORT_POSITIONS.current, "read": read}, separators=(",", ":"))


def decode_positions(text: str, where: str) -> dict[Place, int] | None:
    """What :func:`encode_positions` wrote; ``None`` for no metadata (an offset committed
    by a release or a committer that took no short versions).

    Raises:
        FormatVersionError: written in a newer format than this release reads.
        RecordFormatError: other metadata.
    """
    if not text:
        return None
    try:
        value = json.loads(text)
        SHORT_POSITIONS.check(int(value["format"]), where)
        return {
            (str(topic), int(p)): int(offset)
            for topic, parts in value["read"].items()
            for p, offset in parts.items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RecordFormatError(f"{where}: not short-notice read positions ({exc})") from exc


def _same(given: Short | None, short: Short) -> bool:
    """Whether ``given`` is ``short``'s version (read again: given once already)."""
    return given is not None and given.place == short.place and given.offset == short.offset
