"""Own tombstones the hold must read after all: the committer's watch asks for them.

A hold that drops before the shuffle the tombstones its start handed over
(:attr:`delayline.holds.hold.Hold.tombstone_mark`) misses one thing they can do: a
version of the same id that lands between the version a tombstone names and the
tombstone (written while the batch that raised the older one ran, or a copy of the
older one) is hidden by it from compaction, and the hold never rewrites it. The watch
reads every input record, so for each such tombstone it looks whether a valid version
of its id landed in its partition between the version it names and it (what
:class:`~delayline.committer.later.LaterRecords` keeps; a cancel there leaves nothing
to hide), or whether that span begins before the watch began reading the partition
while the pipeline still reads before that too (it cannot tell: after a rebuild, or a
pipeline catching up, a batch hands over versions whose successors the watch never
read; once the pipeline reads past where the watch began, every version it hands over
is followed by what the watch read). Then it writes the tombstone again after itself,
marked for review (:func:`~delayline.contract.records.review_tombstone`): the hold reads
that one as it read every own tombstone before. A review written twice (by two committers, or again
after a restart) is read twice, to the same effect.

Reviews are written by a producer of their own, without waiting: the watch runs on the
committer's thread, whose deliveries wait for it (a write that waited for Kafka there
held up the read barrier). One that fails retriably is sent again at the next look; one
that cannot be written is logged and dropped. Pure but for the producer, passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException, Producer

from delayline.committer.later import LaterRecords
from delayline.contract import OutgoingRecord
from delayline.contract.records import review_tombstone
from delayline.core.model import Headers
from delayline.kafka.config import kafka_client_config

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 5.0
"""How long closing waits for the reviews written but not yet acknowledged."""


@dataclass(slots=True)
class ReviewCounts:
    """What became of the reviews a committer sent, over all its sessions (shown as
    ``delayline_committer_reviews_total``).

    Attributes:
        written: Review tombstones Kafka acknowledged.
        dropped: Review tombstones Kafka refused for good: the hold will not rewrite
            what their tombstone may hide from compaction (each is logged).
    """

    written: int = 0
    dropped: int = 0


class ReviewWriter(Protocol):
    """Writes review tombstones without waiting for Kafka."""

    def send(self, record: OutgoingRecord, done: Callable[[str | None, bool], None]) -> bool:
        """Queue ``record``; ``done`` is called later, from :meth:`serve` only, with
        ``None`` once Kafka acknowledged it, or the error and whether trying again may
        help. False: not queued now (full, or the producer failed)."""

    def serve(self) -> None:
        """Call the ``done`` of what was acknowledged or failed since; never waits."""

    def close(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for what is queued, then let go."""


class Reviews:
    """The skippable own tombstones read since the last look, and the reviews not yet
    acknowledged. Not thread-safe (the watch's thread).

    Args:
        later: What the watch remembers of the records it read.
        writer: Where reviews go.
        unseen: By input partition (topic, partition), the offset before which the
            watch cannot tell what landed (where it began, while the pipeline still
            reads before it); a partition not in it, the watch can.
        counts: Where what became of the reviews is counted (kept across sessions).
    """

    def __init__(
        self,
        later: LaterRecords,
        writer: ReviewWriter,
        unseen: Callable[[], Mapping[tuple[str, int], int]],
        counts: ReviewCounts | None = None,
    ) -> None:
        self.later = later
        self.writer = writer
        self.unseen = unseen
        self.counts = ReviewCounts() if counts is None else counts
        self._read: list[tuple[str, int, int, bytes, Headers, str, int]] = []
        self._unsent: list[OutgoingRecord] = []
        self._sent = 0

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
        """Review each tombstone read since the last look whose span (after the version
        it names, before it) holds a remembered valid version of its id or begins before
        the watch did; then send what waits and take what Kafka answered."""
        read, self._read = self._read, []
        if read:
            unseen = self.unseen()
            spans = [(topic, sid, partition, fired, offset)
                     for topic, partition, offset, _, _, sid, fired in read]  # fmt: skip
            landed = self.later.versions_between_each(spans)
            for (topic, partition, offset, key, headers, sid, fired), found in zip(
                read, landed, strict=True
            ):
                blind = fired < unseen.get((topic, partition), 0)
                if found or blind:
                    log.debug(
                        "committer watch: %s between the version of %r at %s/%d:%d and "
                        "its tombstone at %d: asking the hold to read that",
                        "a newer version" if found else "records it did not read",
                        sid, topic, partition, fired, offset,
                    )  # fmt: skip
                    self._unsent.append(review_tombstone(topic, partition, key, headers))
        self.flush()

    def flush(self) -> None:
        """Send the reviews waiting, then take what Kafka answered (what failed
        retriably is sent at the next call); never waits."""
        todo, self._unsent = self._unsent, []
        for record in todo:
            if self.writer.send(record, partial(self._done, record)):
                self._sent += 1
            else:
                self._unsent.append(record)
        self.writer.serve()

    def close(self) -> None:
        """Wait a little for what was sent, then let go: what is left unwritten is lost
        (a restarted watch reads again only where :meth:`InputWatch.start` begins)."""
        self.writer.close(CLOSE_TIMEOUT_S)

    @property
    def waiting(self) -> bool:
        """Whether tombstones wait to be looked at, or reviews to be sent or answered."""
        return bool(self._read or self._unsent or self._sent)

    def _done(self, record: OutgoingRecord, error: str | None, retriable: bool) -> None:
        self._sent -= 1
        if error is None:
            self.counts.written += 1
        elif retriable:
            log.warning("committer watch: a review tombstone was not written (%s); again "
                        "at the next read", error)  # fmt: skip
            self._unsent.append(record)
        else:
            self.counts.dropped += 1
            log.error("committer watch: a review tombstone to %s/%s cannot be written (%s): "
                      "the hold will not rewrite what it may hide", record.topic,
                      record.partition, error)  # fmt: skip


class KafkaReviewWriter:
    """:class:`ReviewWriter` to Kafka: an idempotent producer of its own, made at the
    first review (most committers never write one)."""

    def __init__(self, bootstrap_servers: str) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._producer: Producer | None = None

    def send(self, record: OutgoingRecord, done: Callable[[str | None, bool], None]) -> bool:
        def delivered(error: KafkaError | None, _msg: object) -> None:
            if error is None:
                done(None, True)
            else:
                done(str(error), bool(error.retriable()) and not error.fatal())

        try:
            if self._producer is None:
                self._producer = Producer(
                    {**kafka_client_config(self._bootstrap_servers),
                     "enable.idempotence": True, "acks": "all"}
                )  # fmt: skip
            self._producer.produce(
                topic=record.topic, key=record.key, value=None,
                partition=-1 if record.partition is None else record.partition,
                headers=list(record.headers), on_delivery=delivered,
            )  # fmt: skip
        except BufferError:
            return False  # full: sent at the next look
        except KafkaException as exc:
            log.warning("committer watch: the review producer failed (%s); a new one at "
                        "the next look", exc)  # fmt: skip
            self._producer = None
            return False
        return True

    def serve(self) -> None:
        if self._producer is not None:
            self._producer.poll(0)

    def close(self, timeout_s: float) -> None:
        if self._producer is not None:
            left = self._producer.flush(timeout_s)
            if left:
                log.warning("committer watch: %d review tombstone(s) not acknowledged at "
                            "the close", left)  # fmt: skip
            self._producer = None
