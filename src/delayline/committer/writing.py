"""Writing and committing a group of deliveries, on a lane's thread.

Unless every target of a group may be written ahead (``--write-ahead``), the group is
written only once due, after the watch has read every input record acknowledged
:data:`~delayline.committer.watch.READ_AHEAD_MS` before: no reader, ``read_uncommitted``
ones included, sees a delivery early or one that such a cancel or update ends. It then
commits at once or, held back by a target's rate, at its slot. A group written ahead
reads the watch again just before its commit and is aborted and written again without
what was withheld meanwhile (:class:`~delayline.committer.withholding.Withdrawn`).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable

from delayline.committer.broker_clock import BrokerTime
from delayline.committer.config import CommitterConfig
from delayline.committer.lanes import Job
from delayline.committer.ownership import Slot
from delayline.committer.pacing import Pacer
from delayline.committer.pending import Group, Pending
from delayline.committer.turns import recurs, take_turns
from delayline.committer.watch import READ_AHEAD_MS
from delayline.committer.withholding import Withdrawn, Withholding
from delayline.contract.kinds import EXPIRED
from delayline.contract.topics import topic_matches
from delayline.fire.firing import Firing
from delayline.fire.inflight import render_inflight_tombstone
from delayline.fire.report import Delivered
from delayline.fire.topic_catalog import TopicCatalog
from delayline.fire.transactional import TransactionalFirer
from delayline.fire.write_attempt import Placed

log = logging.getLogger(__name__)


class GroupWriter:
    """Makes the lane jobs that deliver a session's groups.

    Args:
        config: The committer's settings.
        time: The broker's time.
        pacer: The target rates' slots.
        withholding: What is withheld, and the watch's read barrier.
    """

    def __init__(
        self, config: CommitterConfig, time: BrokerTime, pacer: Pacer, withholding: Withholding
    ) -> None:
        self._config = config
        self._time = time
        self._clock = time.clock
        self._pacer = pacer
        self._withholding = withholding

    def job(self, group: Group, slot: Slot) -> Job:
        """The job that delivers ``group`` in one of ``slot``'s lanes. A paced group, or
        one that writes to an input topic, writes only once the group submitted before it
        has written for good (:attr:`Slot.settled`): written while the group before waits
        for the watch to read that partition, its open transaction would hold that wait,
        and the group before hold its commit."""
        inputs = self.writes_input(group)
        ordered = inputs or self._paced(group)
        before = slot.settled if ordered else None
        settled = slot.settled = threading.Event()

        def done_writing() -> None:
            slot.writing.discard(id(group))

        def job(firer: TransactionalFirer, after_before: Callable[[], None]) -> Delivered:
            try:
                if before is not None:
                    before.wait()  # set by that group's thread, whatever becomes of it
                while True:
                    try:
                        return self._write(
                            group, inputs, firer, after_before, done_writing, settled.set
                        )
                    except Withdrawn:
                        log.debug("committer group due at %d: written again without what "
                                  "was withheld meanwhile", group.commit_ms)  # fmt: skip
            finally:
                done_writing()
                settled.set()  # ended (failed ones too): the next group may write

        return job

    def writes_input(self, group: Group) -> bool:
        """Whether ``group``'s transaction writes to an input topic (which the watch of
        every group waits to have read): a recurring schedule's re-arm or end, a short
        one's own tombstone, or a delivery to an input topic."""
        topology = self._config.topology
        inputs = () if topology is None else topology.input_topics
        return any(
            p.short is not None or recurs(topology, p.schedule) or p.schedule.target_topic in inputs
            for p in group.items
        )

    def _write(
        self,
        group: Group,
        writes_input: bool,
        firer: TransactionalFirer,
        after_before: Callable[[], None],
        done_writing: Callable[[], None],
        settle: Callable[[], None],
    ) -> Delivered:
        """One attempt at a group (``writes_input``: :meth:`writes_input`): what is
        withheld by now is left out. Calls ``settle`` when about to commit (it writes
        nothing more)."""
        config = self._config
        ahead = not writes_input and self._writes_ahead(group, firer)
        if not ahead:
            self._wait_to_write(group, writes_input)
        now = self._clock.now_ms()
        live, expired, withheld = self._split(group, now)

        def firing(p: Pending) -> Firing:
            # A handed-over one was forgotten by its hand-over; a short one is now (a
            # recurring one's turn writes its re-arm or end instead).
            forget = p.short is not None and not recurs(config.topology, p.schedule)
            return Firing(
                p.schedule,
                config.dead_letter_topic,
                config.history_topic,
                timestamp_ms=max(p.due_ms, now),
                forget=forget,
            )

        turns = take_turns(live, firing, self._time.broker_ms(now), config.topology)
        began = self._clock.now_ms()
        marks: list[int] = [began]

        def written(placed: Placed) -> None:
            marks.append(self._clock.now_ms())
            done_writing()
            after_before()
            marks.append(self._clock.now_ms())
            # Written once due, it commits at once or, held by a rate, at its slot
            # (read the watch again before: a cancel read by then still wins). One that
            # writes to an input topic waited for its slot before the write: a read now
            # would wait for this very transaction.
            commit_ms = group.commit_ms if writes_input else self._rate_commit_ms(group, live)
            again = ahead or commit_ms > group.commit_ms
            if again:
                self._time.wait_until(commit_ms - READ_AHEAD_MS)
                self._withholding.read_to_now()
            self._withholding.check_rearms(turns.rearms, placed)
            self._time.wait_until(commit_ms)
            marks.append(self._clock.now_ms())
            if (again or turns.rearms) and any(self._withholding.withheld(p) for p in live):
                raise Withdrawn
            settle()

        records = turns.records
        inflight = config.inflight_topic
        for p in expired:  # a recurring one ends (no tombstone yet), a short one is done
            forget = recurs(config.topology, p.schedule) or p.short is not None
            records.extend(firing(p)._replace(forget=forget).refused(EXPIRED))
        refused = firer.deliver(
            records,
            extra=[
                render_inflight_tombstone(inflight, p.key, p.partition)
                for p in group.items
                if p.short is None  # a short one has no in-flight record
            ],
            label=f"committer group of {len(group.items)} due at {group.commit_ms}",
            before_commit=written,
            track=[record for _, record in turns.rearms],
        )
        done = self._clock.now_ms()
        if turns.skipped:
            log.info("committer group due at %d: %d missed occurrence(s) skipped by their "
                     "catch-up policy", group.commit_ms, turns.skipped)  # fmt: skip
        delivering = turns.delivering
        dead = [*((delivering[i], why) for i, why in sorted(refused.items()))]
        dead += [(p, EXPIRED) for p in expired]
        for p, reason in dead:
            log.info(
                "committer group due at %d: schedule %r (from %s) dead-lettered: %s",
                group.commit_ms,
                p.schedule.id,
                p.schedule.require_source().describe(),
                reason,
            )
        # Missed ones (past due when written) are late by their writer: counted apart.
        # Counted from the release time: what pacing adds is intended (its own figures).
        lateness = [
            done - p.release_ms + p.late_ms
            for i, p in enumerate(delivering)
            if i not in refused and not p.missed
        ]
        missed = sum(1 for i, p in enumerate(delivering) if i not in refused and p.missed)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "group of %d due %d: write began %+d, written %+d, previous done %+d, "
                "wait done %+d, committed %+d ms (relative to its commit time)",
                len(group.items),
                group.commit_ms,
                *(m - self._time.host_ms(group.commit_ms) for m in (*marks, done)),
            )
        return Delivered(
            delivered=len(lateness) + missed,
            refused=len(refused),
            expired=len(expired),
            lateness_ms=lateness,
            arrived_due=sum(1 for p in group.items if p.read_ms >= p.due_ms),
            write_ms=marks[1] - began if len(marks) > 1 else 0,
            withheld=withheld,
        )

    def _wait_to_write(self, group: Group, writes_input: bool) -> None:
        """Wait until ``group`` may be written once due: its due time has passed, the
        watch having read the input 20 ms before. One that writes to an input topic
        (``writes_input``) and is held by a rate waits for its slot too (open until
        then, its transaction would hold every group's read of that partition)."""
        self._await(group.commit_ms)
        if not writes_input:
            return  # a rate's slot, if any, is its commit time (:meth:`_write`)
        paced_ms = self._rate_commit_ms(group, self._split(group, self._clock.now_ms())[0])
        if paced_ms > group.commit_ms:
            self._await(paced_ms)

    def _await(self, at_ms: int) -> None:
        """Wait until ``at_ms`` (broker time), the watch having read the input
        acknowledged :data:`READ_AHEAD_MS` before."""
        self._time.wait_until(at_ms - READ_AHEAD_MS)
        self._withholding.read_to_now()
        self._time.wait_until(at_ms)

    def _writes_ahead(self, group: Group, firer: TransactionalFirer) -> bool:
        """Whether ``group`` may be written before it is due: every target of it is named
        by :attr:`CommitterConfig.write_ahead_topics` and known not to be stamped on
        append (unknown facts count as stamped: better late than stamped early). Asked
        only of a group that writes to no input topic (:meth:`writes_input`: held open
        ahead, such a record would hold the watch of every group due before it until its
        commit)."""
        pattern = self._config.write_ahead_topics
        if pattern is None:
            return False
        return all(
            may_write_ahead(p.schedule.target_topic, pattern, firer.topics) for p in group.items
        )

    def _paced(self, group: Group) -> bool:
        """Whether ``group`` delivers to a rated topic."""
        if not self._pacer.rates:
            return False
        return any(self._pacer.rated(p.schedule.target_topic) for p in group.items)

    def _rate_commit_ms(self, group: Group, live: list[Pending]) -> int:
        """When ``group`` commits (broker time): at its commit time, or later when the
        rates of ``live``'s target topics hold it back
        (:meth:`delayline.committer.pacing.Pacer.commit_at`; taken on a lane's thread,
        before the watch's last read, so a cancel written meanwhile still wins)."""
        if not self._pacer.rates:
            return group.commit_ms  # no rate set (the usual case): nothing to count
        counts = Counter(p.schedule.target_topic for p in live)
        if not any(self._pacer.rated(topic) for topic in counts):
            return group.commit_ms
        partition = group.items[0].partition
        wanted = max(self._clock.now_ms(), self._time.host_ms(group.commit_ms))
        at = self._pacer.commit_at(partition, counts, wanted)
        return max(group.commit_ms, self._time.broker_ms(at))

    def _split(self, group: Group, now_ms: int) -> tuple[list[Pending], list[Pending], int]:
        """(to deliver, expired, how many withheld) of ``group`` at ``now_ms``."""
        limit = self._config.max_lateness_ms
        live: list[Pending] = []
        expired: list[Pending] = []
        withheld = 0
        for p in group.items:
            if self._withholding.withheld(p):
                withheld += 1
            elif limit is not None and now_ms - p.release_ms + p.late_ms > limit:  # pacing: none
                expired.append(p)
            else:
                live.append(p)
        return live, expired, withheld


def may_write_ahead(topic: str, pattern: str | None, topics: TopicCatalog) -> bool:
    """Whether deliveries to ``topic`` may be written before they are due: ``pattern``
    (``--write-ahead``) names it and the broker is known not to stamp it on append."""
    if not topic_matches(topic, pattern):
        return False
    facts = topics.cached(topic)
    return facts is not None and not facts.log_append_time
