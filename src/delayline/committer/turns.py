"""What a group's schedules write: each one's firing, a recurring one's turn, a refusal.

A schedule whose window header is invalid is dead-lettered; a recurring one takes its
turn (:func:`delayline.committer.recurring.take_turn`: its occurrences, its re-arm or
its end); any other is delivered. Whether a header counts depends on the contract the
schedule came in by (the topology); without a topology, on the header alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from delayline.committer.pending import Pending
from delayline.committer.recurring import take_turn
from delayline.contract import OutgoingRecord
from delayline.contract.pacing import WINDOW_REFUSED, WindowError, has_window, window_of
from delayline.contract.recurring import is_recurring
from delayline.contract.topology import Topology
from delayline.core.model import Schedule
from delayline.fire.firing import Firing

log = logging.getLogger(__name__)

Rearmed = tuple[Pending, OutgoingRecord]
"""A recurring schedule due, and the record that re-arms it."""


@dataclass(slots=True)
class Turns:
    """What a group's live schedules write.

    Attributes:
        delivering: The schedules delivered, one per firing, in the order of the
            firings, which come first in :attr:`records` (a refusal's position is then
            its schedule's here).
        records: The firings, then the other records (refusals, re-arms, ends).
        rearms: Each recurring schedule re-armed, with its re-arm.
        skipped: Missed occurrences skipped by their catch-up policy.
    """

    delivering: list[Pending] = field(default_factory=list)
    records: list[Firing | OutgoingRecord] = field(default_factory=list)
    rearms: list[Rearmed] = field(default_factory=list)
    skipped: int = 0


def recurs(topology: Topology | None, schedule: Schedule) -> bool:
    """Whether ``schedule`` is a recurring schedule (the committer re-arms or ends it)."""
    if topology is None:
        return is_recurring(schedule.headers)
    return topology.recurs(schedule)


def windowed(topology: Topology | None, schedule: Schedule) -> bool:
    """Whether ``schedule``'s window header counts (it came in by the header contract)."""
    if topology is None:
        return has_window(schedule.headers)
    return topology.windowed(schedule)


def window_refusal(topology: Topology | None, schedule: Schedule) -> str | None:
    """Why ``schedule``'s window is refused (it is dead-lettered), if it is."""
    if not windowed(topology, schedule):
        return None
    try:
        window_of(schedule.headers)
    except WindowError as exc:
        return f"{WINDOW_REFUSED}: {exc}"
    return None


def take_turns(
    live: list[Pending],
    firing: Callable[[Pending], Firing],
    broker_now_ms: int,
    topology: Topology | None,
) -> Turns:
    """What ``live`` writes, each schedule's firing made by ``firing``."""
    turns = Turns()
    others: list[OutgoingRecord] = []
    for p in live:
        refusal = window_refusal(topology, p.schedule)
        if refusal is not None:
            _log_refused(p, refusal)
            # A recurring one ends: the fire stage wrote no tombstone for it.
            # A short one too: its own tombstone shows it done to a re-read.
            forget = recurs(topology, p.schedule) or p.short is not None
            others.extend(firing(p)._replace(forget=forget).refused(refusal))
            continue
        if not recurs(topology, p.schedule):
            turns.delivering.append(p)
            turns.records.append(firing(p))
            continue
        turn = take_turn(firing(p), broker_now_ms)
        turns.delivering.extend(p for _ in turn.firings)
        turns.records.extend(turn.firings)
        others.extend(turn.records)
        if turn.rearm is not None:
            turns.rearms.append((p, turn.rearm))
        turns.skipped += turn.skipped
        if turn.reason is not None:
            _log_refused(p, turn.reason)
    turns.records.extend(others)
    return turns


def _log_refused(p: Pending, reason: str) -> None:
    source = p.schedule.require_source().describe()
    log.info("committer: schedule %r (from %s) dead-lettered: %s", p.schedule.id, source, reason)
