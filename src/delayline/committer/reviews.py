"""Own tombstones the hold must read after all: the committer's watch asks for them.

A hold that drops before the shuffle the tombstones its start handed over
(:attr:`delayline.holds.hold.Hold.tombstone_mark`) misses one thing they can do: a
version of the same id written while the batch that raised the older one ran lands
before the tombstone, which then hides it from compaction, and the hold never rewrites
it. The watch reads every input record, so for each such tombstone it looks whether a
record of its id landed in its partition between the version it names and it (a newer
version, a cancel, a copy: what :class:`~delayline.committer.later.LaterRecords` keeps),
and if one did writes the tombstone again after itself, marked for review
(:func:`~delayline.contract.records.review_tombstone`): the hold reads that one as it
read every own tombstone before. Rare: it takes a write to an id within a batch's time
of its hand-over. A review written twice (by two committers, or again after a restart)
is read twice, to the same effect. Pure: the writing is passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import KafkaException

from delayline.committer.later import LaterRecords
from delayline.contract import OutgoingRecord
from delayline.contract.records import review_tombstone
from delayline.core.model import Headers
from delayline.errors import DelaylineError
from delayline.kafka.produce import produce_one

log = logging.getLogger(__name__)

WRITE_TIMEOUT_MS = 5_000
"""How long writing a review tombstone may take before the watch tries again at its next
read."""


class Reviews:
    """The skippable own tombstones read since the last look, and the reviews not yet
    written. Not thread-safe (the watch's thread).

    Args:
        later: What the watch remembers of the records it read.
        write: Writes one record and waits for Kafka's acknowledgement; raises
            :class:`DelaylineError` or ``KafkaException`` when it could not.
    """

    def __init__(self, later: LaterRecords, write: Callable[[OutgoingRecord], object]) -> None:
        self.later = later
        self.write = write
        self.written = 0
        """Review tombstones written."""
        self._read: list[tuple[str, int, int, bytes, Headers, str, int]] = []
        self._unwritten: list[OutgoingRecord] = []

    def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes,
        headers: Headers,
        schedule_id: str,
        fired_offset: int,
    ) -> None:
        """A skippable own tombstone (of ``schedule_id``, naming ``fired_offset``) was
        read (:func:`~delayline.contract.records.skippable_tombstone`); call :meth:`look`
        once the records read with it are noted."""
        self._read.append((topic, partition, offset, key, headers, schedule_id, fired_offset))

    def look(self) -> None:
        """Review each tombstone read since the last look that a remembered record of
        its id lands before (after the version it names), then write what waits."""
        read, self._read = self._read, []
        spans = [(topic, sid, partition, fired, offset)
                 for topic, partition, offset, _, _, sid, fired in read]  # fmt: skip
        for (topic, partition, offset, key, headers, sid, fired), landed in zip(
            read, self.later.lands_each(spans), strict=True
        ):
            if landed:
                log.info(
                    "committer watch: a record of %r landed in %s/%d between the version "
                    "at offset %d and its tombstone at %d: asking the hold to read that",
                    sid, topic, partition, fired, offset,
                )  # fmt: skip
                self._unwritten.append(review_tombstone(topic, partition, key, headers))
        self.flush()

    def flush(self) -> None:
        """Write the reviews waiting, in order; what fails waits for the next call."""
        while self._unwritten:
            try:
                self.write(self._unwritten[0])
            except (DelaylineError, KafkaException) as exc:
                log.warning(
                    "committer watch: %d review tombstone(s) not written yet (%s); "
                    "trying again at the next read", len(self._unwritten), exc,
                )  # fmt: skip
                return
            del self._unwritten[0]
            self.written += 1

    @classmethod
    def to_kafka(cls, later: LaterRecords, bootstrap_servers: str) -> Reviews:
        """Reviews written to Kafka at ``bootstrap_servers`` (an idempotent producer of
        its own each time: they are rare)."""
        return cls(later, lambda record: produce_one(bootstrap_servers, record, WRITE_TIMEOUT_MS))

    @property
    def waiting(self) -> bool:
        """Whether tombstones wait to be looked at or reviews to be written."""
        return bool(self._read or self._unwritten)
