"""How far the committer has read each in-flight partition it owns, against the ends it
must reach (:class:`ReadProgress`).

A partition assigned is *caught up* once it is read to its end as of the fence of its
earlier owners (:meth:`ReadProgress.fenced`): only then may its schedules be delivered.
A committer following the pipeline's checkpoint waits until its partitions are read to
their stable ends as of a batch logged (:meth:`ReadProgress.stable_ends`,
:meth:`ReadProgress.has_read`). The ends are asked through an admin client: the
reader's consumer would answer only after the fetch it holds open.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka.admin import AdminClient

from delayline.committer.due_plan import DuePlan
from delayline.kafka.config import kafka_client_config
from delayline.kafka.reader import acknowledged_ends, earliest_offsets, stable_ends

log = logging.getLogger(__name__)


class ReadProgress:
    """The partitions of ``topic`` this committer owns, where each is read to, and which
    are still catching up. Kept on the reader's thread (the group's callbacks run in
    its poll).

    Args:
        bootstrap_servers: Kafka bootstrap list (for the admin client, made on first use).
        topic: The in-flight topic.
        plan: Where what is read goes (how much is pending in a partition caught up).
    """

    def __init__(self, bootstrap_servers: str, topic: str, plan: DuePlan) -> None:
        self.topic = topic
        self.plan = plan
        self.owned: set[int] = set()
        """The partitions assigned to this committer."""
        self._catching_up: dict[int, int | None] = {}
        """Partition: the end offset to read to (``None`` until it is fenced)."""
        self._position: dict[int, int] = {}  # partition: the next offset to read
        self._at_end: dict[int, int] = {}  # partition: the end offset it was read to
        self._bootstrap_servers = bootstrap_servers
        self._admin: AdminClient | None = None
        """Made on the first :meth:`stable_ends` or :meth:`fenced`."""

    def caught_up(self, partition: int) -> bool:
        """Whether ``partition`` is ours and read to its end as of its assignment (its
        schedules may be delivered)."""
        return partition in self.owned and partition not in self._catching_up

    def all_caught_up(self) -> bool:
        """Whether no partition owned is still catching up."""
        return not self._catching_up

    def read_to(self, partition: int) -> int:
        """The next offset to read in ``partition``: past its records read (and the
        markers after them, by the consumer's position) and its end seen."""
        return max(self._position.get(partition, 0), self._at_end.get(partition, -1))

    def has_read(self, ends: dict[int, int]) -> bool:
        """Whether every partition of ``ends`` still owned is read (into the plan) up to
        its offset there."""
        return all(self.read_to(p) >= end for p, end in ends.items() if p in self.owned)

    def stable_ends(self, timeout_s: float = 10.0) -> dict[int, int]:
        """Each owned partition's last stable offset now: every hand-over committed by
        now is before it (see :meth:`has_read`).

        Raises:
            KafkaUnavailableError: the offsets could not be read in time.
        """
        places = [(self.topic, p) for p in sorted(self.owned)]
        ends = stable_ends(self._admin_client(), places, timeout_s)
        return {p: end for (_, p), end in ends.items()}

    def assigned(self, partitions: list[int]) -> None:
        """``partitions`` are ours, not caught up until fenced and read to their end."""
        self.owned.update(partitions)
        for p in partitions:
            self._catching_up[p] = None

    def released(self, partition: int) -> None:
        """``partition`` is no longer ours: forget where it was read to."""
        self.owned.discard(partition)
        self._catching_up.pop(partition, None)
        self._at_end.pop(partition, None)
        self._position.pop(partition, None)

    def fenced(self, partition: int) -> None:
        """``partition``'s earlier owners are fenced: read it to its end as of now before
        delivering from it. The end counts transactions still open (the high watermark,
        not the last stable offset): a fire task's transaction left open by a killed
        pipeline, or one a live batch has not committed yet, may sit before delivery
        tombstones an earlier owner committed, and a schedule whose tombstone was not read
        would be delivered again. A read_committed reader gets there once every such
        transaction has ended."""
        if self._catching_up.get(partition, 0) is not None:
            return  # not ours any more, or fenced already
        # Asked through the admin client, retried while a just-created partition has no
        # leader yet: the consumer's own request would wait behind the fetch it holds
        # open (500 ms; each partition fenced at a start waited for one in turn).
        deadline = time.monotonic() + 30
        place = (self.topic, partition)
        low = earliest_offsets(self._admin_client(), [place], deadline - time.monotonic())[place]
        high = self._acknowledged_end(partition, max(0.1, deadline - time.monotonic()))
        if high <= low or self.read_to(partition) >= high:
            self._caught_up(partition)
        else:
            self._catching_up[partition] = high

    def at_end(self, partition: int, offset: int) -> None:
        """The consumer reached the end of ``partition``, at ``offset``: one read past the
        end as of its fence (an open transaction ended) is caught up."""
        self._at_end[partition] = offset
        end = self._catching_up.get(partition)
        if end is not None and offset >= end:  # past the fence's end: an open one ended
            self._caught_up(partition)

    def settle(self, read: dict[int, int]) -> None:
        """Note where each partition of ``read`` (partition: the next offset to read) was
        read to; one read to its end as of its fence is caught up."""
        for partition, offset in read.items():
            self._at_end.pop(partition, None)
            self._position[partition] = offset
            end = self._catching_up.get(partition)
            if end is not None and offset >= end:
                self._caught_up(partition)

    def _caught_up(self, partition: int) -> None:
        del self._catching_up[partition]
        log.info(
            "committer: in-flight partition %d read to its end: %d pending there",
            partition,
            self.plan.pending_in(partition),
        )

    def _acknowledged_end(self, partition: int, timeout_s: float) -> int:
        """``partition``'s high watermark now: open transactions included."""
        ends = acknowledged_ends(self._admin_client(), [(self.topic, partition)], timeout_s)
        return ends[(self.topic, partition)]

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(kafka_client_config(self._bootstrap_servers))
        return self._admin
