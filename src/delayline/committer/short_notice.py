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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from delayline.contract.notice import NoticeRules
from delayline.core.model import Schedule
from delayline.fire.inflight import inflight_partition

Place = tuple[str, int]
"""An input partition: (topic, partition)."""


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


class ShortVersions:
    """The short-notice versions of the in-flight partitions a committer owns: fed what
    its watch reads, in each input partition's order, and judged when the rules are
    fresh.

    Guarantees:
        * every version read that is short under the rules governing its offset, and
          whose in-flight partition is owned, is given by :meth:`judge` once, unless
          delayline's own tombstone of it (its delivery) was read first;
        * :meth:`positions` never passes a version of an in-flight partition that is
          open (given and neither :meth:`done` nor seen delivered) or not judged yet:
          read again from there, nothing of it is missed.

    Each input partition is told forward only (:meth:`read_to` never moves back): a
    committer that reads one again from earlier (a take-over) tells only what lies past
    where this one had read, and a version read again while open is not given again.
    """

    def __init__(self, owned: Iterable[int] = ()) -> None:
        self.owned: set[int] = set(owned)
        self._unjudged: list[Schedule | tuple[Place, str, int]] = []
        """Versions and own tombstones ((place, id, fired offset)) read since the
        last judging, in the order read."""
        self._read_to: dict[Place, int] = {}
        """Per input partition, the watch's position when last told: the next offset."""
        self._judged_to: dict[Place, int] = {}
        """The same, as of the last judging."""
        self._open: dict[tuple[str, str], Short] = {}
        """Given and not done, by (topic, id) and at most one per version."""

    def read_version(self, schedule: Schedule) -> None:
        """A valid schedule version the watch read (its source is its place)."""
        self._unjudged.append(schedule)

    def read_own_tombstone(self, place: Place, schedule_id: str, fired_offset: int) -> None:
        """Delayline's own tombstone read in ``place``: the version of ``schedule_id`` at
        ``fired_offset`` was handed over or, if short, delivered."""
        self._unjudged.append((place, schedule_id, fired_offset))

    def read_to(self, positions: Mapping[Place, int]) -> None:
        """The watch has read each input partition up to its offset in ``positions``
        (the next to read), everything before it told here."""
        for place, offset in positions.items():
            if offset > self._read_to.get(place, -1):
                self._read_to[place] = offset

    def judge(self, rules: NoticeRules) -> list[Short]:
        """Judge what was read before the rules were asked (they must have been asked
        after the last read told here). Pending rules judge nothing: what was read waits
        for settled ones.

        Returns:
            The short versions newly given, in the order read.
        """
        if rules.pending:
            return []
        given: list[Short] = []
        for item in self._unjudged:
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
        self._unjudged.clear()
        self._judged_to = dict(self._read_to)
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


def _same(given: Short | None, short: Short) -> bool:
    """Whether ``given`` is ``short``'s version (read again: given once already)."""
    return given is not None and given.place == short.place and given.offset == short.offset
