"""Own tombstones the hold must read after all: the committer's watch asks for them.

A hold that drops before the shuffle the tombstones its start handed over
(:attr:`delayline.holds.hold.Hold.tombstone_mark`) misses one thing they can do: a
version of the same id that lands between the version a tombstone names and the
tombstone (written while the batch that raised the older one ran, or a copy of the
older one) is hidden by it from compaction, and the hold never rewrites it. The watch
reads every input record, so for each such tombstone it looks whether a valid version
of its id landed in its partition between the version it names and it (what
:class:`~delayline.committer.later.LaterRecords` keeps; a cancel there leaves nothing
to hide), or whether that span begins before the watch began reading the partition (it
cannot tell: a rebuild or a pipeline catching up hands over versions older than the
watch). Then it writes the tombstone again after itself, marked for review
(:func:`~delayline.contract.records.review_tombstone`): the hold reads that one as it
read every own tombstone before. A review written twice (by two committers, or again
after a restart) is read twice, to the same effect.

Reviews are written by a producer of their own, without waiting: the watch runs on the
committer's thread, whose deliveries wait for it (a write that waited for Kafka there
held up the read barrier). One that fails is written again at the next look. Pure but
for the producer, which is passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Protocol

from confluent_kafka import KafkaException, Producer

from delayline.committer.later import LaterRecords
from delayline.contract import OutgoingRecord
from delayline.contract.records import review_tombstone
from delayline.core.model import Headers
from delayline.kafka.config import kafka_client_config

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 5.0
"""How long closing waits for the reviews written but not yet acknowledged."""


class ReviewWriter(Protocol):
    """Writes review tombstones without waiting for Kafka."""

    def send(self, record: OutgoingRecord, done: Callable[[str | None], None]) -> bool:
        """Queue ``record``; ``done`` is called later (from :meth:`serve`) with ``None``
        once Kafka acknowledged it, or the error. False: not queued now (full)."""

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
        since: Where the watch began reading each input partition (topic, partition):
            what lies before, it never read.
    """

    def __init__(
        self,
        later: LaterRecords,
        writer: ReviewWriter,
        since: Callable[[], Mapping[tuple[str, int], int]],
    ) -> None:
        self.later = later
        self.writer = writer
        self.since = since
        self.written = 0
        """Review tombstones Kafka acknowledged."""
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
            since = self.since()
            spans = [(topic, sid, partition, fired, offset)
                     for topic, partition, offset, _, _, sid, fired in read]  # fmt: skip
            landed = self.later.versions_between_each(spans)
            for (topic, partition, offset, key, headers, sid, fired), found in zip(
                read, landed, strict=True
            ):
                unseen = fired < since.get((topic, partition), 0)
                if found or unseen:
                    log.debug(
                        "committer watch: %s between the version of %r at %s/%d:%d and "
                        "its tombstone at %d: asking the hold to read that",
                        "a newer version" if found else "records it did not read",
                        sid, topic, partition, fired, offset,
                    )  # fmt: skip
                    self._unsent.append(review_tombstone(topic, partition, key, headers))
        self.flush()

    def flush(self) -> None:
        """Send the reviews waiting, and take what Kafka answered; never waits."""
        self.writer.serve()
        while self._unsent:
            record = self._unsent[0]
            if not self.writer.send(record, partial(self._done, record)):
                break
            del self._unsent[0]
            self._sent += 1

    def close(self) -> None:
        """Wait a little for what was sent, then let go (what is left, a restarted
        watch's re-read finds again while its hand-overs are pending)."""
        self.writer.close(CLOSE_TIMEOUT_S)

    @property
    def waiting(self) -> bool:
        """Whether tombstones wait to be looked at, or reviews to be sent or answered."""
        return bool(self._read or self._unsent or self._sent)

    def _done(self, record: OutgoingRecord, error: str | None) -> None:
        self._sent -= 1
        if error is None:
            self.written += 1
            return
        log.warning("committer watch: a review tombstone was not written (%s); again at "
                    "the next read", error)  # fmt: skip
        self._unsent.append(record)


class KafkaReviewWriter:
    """:class:`ReviewWriter` to Kafka: an idempotent producer of its own, made at the
    first review (most committers never write one)."""

    def __init__(self, bootstrap_servers: str) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._producer: Producer | None = None

    def send(self, record: OutgoingRecord, done: Callable[[str | None], None]) -> bool:
        if self._producer is None:
            self._producer = Producer(
                {**kafka_client_config(self._bootstrap_servers), "enable.idempotence": True}
            )
        try:
            self._producer.produce(
                topic=record.topic, key=record.key, value=None,
                partition=-1 if record.partition is None else record.partition,
                headers=list(record.headers),
                on_delivery=lambda error, _msg: done(None if error is None else str(error)),
            )  # fmt: skip
        except (BufferError, KafkaException) as exc:
            log.debug("committer watch: a review tombstone not queued now: %s", exc)
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
