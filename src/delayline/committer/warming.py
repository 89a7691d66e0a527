"""Target topics' facts read ahead of their deliveries: a lookup at delivery time,
inside a group's write, would make that delivery late.

Facts that allow delivery live :data:`~delayline.fire.topic_catalog.FACTS_TTL_MS` in the
catalog every partition's writers share; :class:`Warmer` reads them again, on the lookups
thread, before they would expire under a schedule read to their topic, and has every
partition's producers look the topic up (a producer's first delivery to a topic it has
not looked up waits for the lookup), including, while the facts are fresh, the producers
that never did: a partition's taken over, or one replaced after a fatal error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from delayline.committer.broker_clock import BrokerTime
from delayline.committer.lanes import Lanes
from delayline.fire.topic_catalog import FACTS_TTL_MS, TopicCatalog

log = logging.getLogger(__name__)

WARM_AHEAD_MS = 20_000
"""Target topic facts are read again when they would expire within this (they live
:data:`~delayline.fire.topic_catalog.FACTS_TTL_MS`), at least: a schedule read waits for its
due time a lead, usually a few seconds, or more when its burst was raised early
(:func:`warm_within_ms`)."""
WARM_MARGIN_MS = 10_000
"""Facts are read again when they would expire sooner than this after the latest due
time of the schedules read to their topic; and never when read less than this ago."""
WARM_COVERS_MS = FACTS_TTL_MS - WARM_MARGIN_MS
"""How far ahead a due time may be for facts read now to outlive it (with the margin);
a topic with a schedule due later is warmed again on later steps."""


def warm_within_ms(due_ms: int, now_ms: int) -> int:
    """How soon to expire may the facts of a target topic be and not be read again, when
    the latest schedule read to it is due at ``due_ms`` (host time, as ``now_ms``): long
    enough that they outlive that due time (facts that expired before it would be read
    at delivery time, inside the group's write, making it late), but never so long that
    facts read less than :data:`WARM_MARGIN_MS` ago are read again."""
    return min(max(WARM_AHEAD_MS, due_ms - now_ms + WARM_MARGIN_MS), WARM_COVERS_MS)


def warm_plan(due_ms: Mapping[str, int], now_ms: int) -> tuple[dict[str, int], dict[str, int]]:
    """For target topics, each to the latest due time read to it (host time): each
    one's :func:`warm_within_ms` now, and those to warm again on a later step (due
    further ahead than :data:`WARM_COVERS_MS`)."""
    within = {target: warm_within_ms(due, now_ms) for target, due in due_ms.items()}
    later = {target: due for target, due in due_ms.items() if due - now_ms > WARM_COVERS_MS}
    return within, later


class Warmer:
    """Warms the target topics the in-flight reader read schedules to, one lookup at a
    time, and only when some topic's facts would expire too soon.

    Args:
        time: The broker's clock (due times are broker time; facts expire by the host's).
        lookups: The thread lookups run on.
        topics: The facts every partition's writers share.
    """

    def __init__(self, time: BrokerTime, lookups: ThreadPoolExecutor, topics: TopicCatalog) -> None:
        self._time = time
        self._lookups = lookups
        self._topics = topics
        self._warming: Future[None] | None = None
        self._to_warm: dict[str, int] = {}
        """Target topics to warm: the latest due time read to each (host time)."""

    def warm(self, read: dict[str, int], lanes: Iterable[Lanes]) -> None:
        """Look up the target topics whose facts expire too soon (:func:`warm_plan`)
        beside the deliveries, in the catalog and in every partition's producers (of
        ``lanes``), and those a partition's producers never looked up in theirs.
        ``read``: each target topic read since to its latest due time (broker time),
        emptied here. A topic with a schedule due further ahead than facts read now would
        last stays to be warmed again on later calls; nothing starts while the last
        lookup runs (what failed it is logged: the deliveries look up for themselves)."""
        warming = self._warming
        if warming is not None:
            if not warming.done():
                return
            self._warming = None
            failure = warming.exception()
            if failure is not None:
                log.warning(
                    "committer: looking target topics up ahead of their deliveries failed "
                    "(%s); a delivery to one looks it up itself",
                    failure,
                )
        to_warm = self._to_warm
        for target, due in read.items():
            at = self._time.host_ms(due)
            if to_warm.get(target, -1) < at:
                to_warm[target] = at
        read.clear()
        lanes = list(lanes) if to_warm else []
        if not lanes:
            return
        within, self._to_warm = warm_plan(to_warm, self._time.clock.now_ms())
        stale = {t for t, ms in within.items() if self._topics.stale((t,), ms)}
        asks = [(lane, topics) for lane in lanes if (topics := stale | lane.unseen(within))]
        if asks:
            self._warming = self._lookups.submit(_warm_all, self._topics, stale, asks)


def _warm_all(topics: TopicCatalog, stale: set[str], asks: list[tuple[Lanes, set[str]]]) -> None:
    """Read the facts of ``stale`` afresh and have each partition's producers look up
    the topics asked of them (on the lookups thread: a lane closed meanwhile, its
    partition revoked, fails only this lookup)."""
    if stale:
        topics.confirm(stale)
    for lane, names in asks:
        lane.load_metadata(names)
