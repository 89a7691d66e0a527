"""One due schedule's records: its delivery, its tombstone (or re-arm) and its history,
or a dead letter instead (written by :class:`delayline.fire.transactional.TransactionalFirer`)."""

from __future__ import annotations

from typing import NamedTuple

from delayline.contract import (
    ConsumedRecord,
    OutgoingRecord,
    render_dead_letter,
    render_delivery,
    render_history,
    render_tombstone,
)
from delayline.core.model import Schedule


class Firing(NamedTuple):
    """A due schedule: its delivery, tombstone and history, or a dead letter instead.
    Immutable; a named tuple, as the records it makes are: the committer makes one per
    delivery (``_replace`` makes a changed copy).

    Attributes:
        schedule: The schedule that fell due (read from Kafka: it has a source).
        dead_letter_topic: Where it goes if its delivery is refused.
        history_topic: Audit topic of deliveries, if any.
        timestamp_ms: The delivery's (and history record's) timestamp; ``None``: the
            time of writing. The committer writes ahead of the due time and sets the due
            time here, so no delivery carries a timestamp before its due time.
        forget: Write the schedule's tombstone too. The committer's firings of one-off
            schedules have none: the fire stage wrote it when it handed the schedule
            over.
        rearm: The record that re-arms a recurring schedule for its next occurrence
            (:func:`delayline.contract.recurring.render_rearm`), written after the
            delivery; a refused delivery writes the tombstone instead (the series ends).
    """

    schedule: Schedule
    dead_letter_topic: str
    history_topic: str | None = None
    timestamp_ms: int | None = None
    forget: bool = True
    rearm: OutgoingRecord | None = None

    @property
    def delivery(self) -> OutgoingRecord:
        """The record for the target topic."""
        return render_delivery(self.schedule, self.timestamp_ms)

    def records(self, delivery: OutgoingRecord | None = None) -> list[OutgoingRecord]:
        """Delivery (``delivery``, if already rendered), tombstone (or re-arm) and
        history record: the schedule delivered and forgotten (or armed for its next
        occurrence)."""
        out = [self.delivery if delivery is None else delivery, *self._forget()]
        if self.rearm is not None:
            out.append(self.rearm)
        if self.history_topic:
            # Stamped like the delivery: written ahead, it must not say "delivered early".
            history = render_history(self.schedule, self.history_topic)
            out.append(history._replace(timestamp_ms=self.timestamp_ms))
        return out

    def refused(self, reason: str) -> list[OutgoingRecord]:
        """Dead letter and tombstone: the schedule (key = id, payload, headers) with
        ``delayline-error`` = ``reason`` and ``delayline-source``, then forgotten."""
        s = self.schedule
        src, key = s.require_source(), s.id.encode()
        at = (src.topic, src.partition, src.offset, src.timestamp_ms)
        rejected = ConsumedRecord(*at, key, s.payload, s.headers)
        dead = render_dead_letter(rejected, reason, self.dead_letter_topic)
        return [dead, *self._forget(refused=True)]

    def _forget(self, *, refused: bool = False) -> list[OutgoingRecord]:
        ends = self.forget or (refused and self.rearm is not None)
        return [render_tombstone(self.schedule)] if ends else []
