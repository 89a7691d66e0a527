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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from delayline.committer.rereads import Place
from delayline.contract import ConsumedRecord
from delayline.contract.checks import ScheduleFields
from delayline.contract.notice import MAX_NOTICE_MS, NoticeRules
from delayline.core.model import Parsed, Schedule
from delayline.fire.inflight import inflight_partition

Key = tuple[str, int, int]
"""A version's place and offset: (topic, partition, offset)."""
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

    @property
    def key(self) -> Key:
        """Its place and offset: what names it among the versions given."""
        source = self.schedule.require_source()
        return source.topic, source.partition, source.offset


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
          whose in-flight partition is owned, is given by :meth:`judge`, unless
          delayline's own tombstone of it (its delivery) was read first; one whose
          tombstone is read after it was given is returned by :meth:`take_delivered`
          (the caller withholds it: delivered already);
        * a version is given again only when read again (:meth:`read_again`) after it
          was settled (:meth:`done`, or shown delivered) before the re-read began: the
          record that settled it (its own tombstone, a cancel, a newer version) lies
          after it and is read again too, so the caller withholds it;
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
        self._oldest_ms: int | None = None
        """The earliest of those."""
        self._told = 0
        """How many were told since the start (the judged ones included)."""
        self._read_to: dict[Place, int] = {}
        """Per input partition, the watch's position when last told: the next offset."""
        self._judged_to: dict[Place, int] = {}
        """The same, as of the last judging."""
        self._open: dict[Key, Short] = {}
        """Given and not done, by place and offset."""
        self._delivered: list[Short] = []
        """Given, then shown delivered by an own tombstone read since."""
        self._reading = False
        """Whether a re-read began and has not given what it read yet."""
        self._reread_end: int | None = None
        """While versions read again wait to be judged: the place (in :attr:`told`)
        after the last of them."""
        self._settled: set[Key] = set()
        """Meanwhile, the versions given that were done or shown delivered: read again,
        they are not given again."""

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
        self._told_now(schedule, read_ms)

    def oldest_ms(self) -> int | None:
        """When the earliest version or tombstone waiting to be judged was read: the
        watch forgets nothing read after it, less its memory (a cancel of a version
        judged late still withholds it)."""
        return self._oldest_ms

    def read_own_tombstone(
        self, place: Place, schedule_id: str, fired_offset: int, read_ms: int
    ) -> None:
        """Delayline's own tombstone read in ``place`` at ``read_ms``: the version of
        ``schedule_id`` at ``fired_offset`` was handed over or, if short, delivered (an
        open one is so at once: :meth:`take_delivered`)."""
        if self._delivered_now((place[0], place[1], fired_offset), schedule_id):
            return
        self._told_now((place, schedule_id, fired_offset), read_ms)

    @property
    def told(self) -> int:
        """How many versions and tombstones were told since the start (a place in the
        order read, for :meth:`read_again`)."""
        return self._told

    def reading_again(self) -> int:
        """A re-read begins (:meth:`read_again` gives what it read): what this committer
        settles from now on is not given again by it. Returns where (in :attr:`told`)
        its versions are judged."""
        self._reading = True
        return self._told

    def read_again(self, at: int, items: list[tuple[Told, int]]) -> None:
        """Versions and own tombstones, each with its read time, read again (a partition
        taken over: from its last owner's positions) up to where the watch had read when
        :meth:`reading_again` returned ``at``: judged as if read then, before what the
        watch read since, and none given that this committer gave and settled since.
        No rules may be asked between the two (a mark would count the wrong items)."""
        start = max(0, at - (self._told - len(self._unjudged)))
        self._unjudged[start:start] = [item for item, _ in items]
        self._read_ms[start:start] = [read_ms for _, read_ms in items]
        self._told += len(items)
        self._reading = False
        self._reread_end = max(self._reread_end or 0, at + len(items))
        self._oldest_ms = min(self._read_ms, default=None)

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
                fresh = short is not None and short.key not in self._open
                if short is not None and fresh and short.key not in self._settled:
                    self._open[short.key] = short
                    given.append(short)
            else:
                (topic, partition), schedule_id, fired = item
                key = (topic, partition, fired)
                found = self._open.get(key)
                if found is not None and found in given and found.schedule.id == schedule_id:
                    del self._open[key]  # given in this judging: not planned at all
                    self._settle(key)
                    given.remove(found)
                else:
                    self._delivered_now(key, schedule_id)
        del self._unjudged[:count]
        del self._read_ms[:count]
        self._oldest_ms = min(self._read_ms, default=None)
        self._judged_to = dict(read_to)
        self._reread_over()
        return given

    def done(self, short: Short) -> None:
        """``short`` was delivered (its transaction committed) or withheld (a later
        record of its id ended it)."""
        if self._open.get(short.key) is short:
            del self._open[short.key]
            self._settle(short.key)

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
            del self._open[s.key]
        return before

    def positions(self, inflight_partition: int) -> dict[Place, int]:
        """Per input partition, where a new owner of ``inflight_partition`` must read
        again from: its earliest open version, else the earliest version not judged yet
        (whose in-flight partition the rules will tell), else where the last judging had
        read to."""
        out = dict(self._judged_to)

        def lower(place: Place, offset: int) -> None:
            if offset < out.get(place, offset + 1):
                out[place] = offset

        for s in self._open.values():
            if s.inflight_partition == inflight_partition:
                lower(s.place, s.offset)
        for item in self._unjudged:
            if isinstance(item, Schedule):
                source = item.require_source()
                lower((source.topic, source.partition), source.offset)
        return out

    def _delivered_now(self, key: Key, schedule_id: str) -> bool:
        """Whether an open version (``key``, of ``schedule_id``) is shown delivered by
        its own tombstone read now; if so it is no longer open (:meth:`take_delivered`)."""
        found = self._open.get(key)
        if found is None or found.schedule.id != schedule_id:
            return False
        del self._open[key]
        self._settle(key)
        self._delivered.append(found)
        return True

    def _settle(self, key: Key) -> None:
        """Note a given version settled while versions read again wait to be judged."""
        self._reread_over()
        if self._reading or self._reread_end is not None:
            self._settled.add(key)

    def _reread_over(self) -> None:
        """Forget what was settled once everything read again is judged."""
        end = self._reread_end
        if end is not None and self._told - len(self._unjudged) >= end and not self._reading:
            self._reread_end = None
            self._settled.clear()

    def _told_now(self, item: Told, read_ms: int) -> None:
        """``item`` read at ``read_ms``, to be judged after what was told before."""
        self._unjudged.append(item)
        self._read_ms.append(read_ms)
        self._told += 1
        if self._oldest_ms is None or read_ms < self._oldest_ms:
            self._oldest_ms = read_ms

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
