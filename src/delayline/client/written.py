"""What a write acknowledged by Kafka answers with, in both clients."""

from __future__ import annotations

from dataclasses import dataclass

from delayline.core.model import Schedule


@dataclass(frozen=True, slots=True)
class Written:
    """Where Kafka stored a record: it was acknowledged by every in-sync replica, so it
    is durable, and the pipeline acts on it in partition order.

    Attributes:
        id: Schedule id.
        topic: Schedules topic.
        partition: Partition written to.
        offset: Offset assigned by the broker.
        schedule: The schedule written, or ``None`` for a cancel.
    """

    id: str
    topic: str
    partition: int
    offset: int
    schedule: Schedule | None = None
