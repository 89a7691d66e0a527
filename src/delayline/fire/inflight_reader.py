"""The committer's reader of the in-flight topic (:mod:`delayline.fire.inflight`).

A ``read_committed`` consumer in the committer's own group, assigned every partition
from the group's committed offsets (which the committer commits after its delivery
transactions). Everything it reads goes into a :class:`DuePlan`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from delayline.core.clock import Clock
from delayline.fire.due_plan import DuePlan
from delayline.fire.inflight import InflightRecordError, read_inflight
from delayline.kafka.config import kafka_client_config
from delayline.kafka.reader import to_consumed_record, watermarks

log = logging.getLogger(__name__)

READ_SLICE = 2_000
"""The most records one :meth:`InflightReader.poll` reads: in a burst of hand-overs the
committer takes the groups already due between slices instead of after reading all."""


class InflightReader:
    """Reads handed-over schedules into ``plan``.

    Args:
        bootstrap_servers: Kafka bootstrap list.
        topic: The in-flight topic.
        group_id: The committer's consumer group (its offsets say where to resume).
        plan: Where what is read goes.
        clock: The host's time (when each schedule was read).

    Raises:
        InflightRecordError: the topic does not exist.
    """

    def __init__(
        self, bootstrap_servers: str, topic: str, group_id: str, plan: DuePlan, clock: Clock
    ) -> None:
        self.topic = topic
        self.plan = plan
        self.clock = clock
        self.targets: set[str] = set()
        """Target topics of the schedules read since the caller last emptied this."""
        self._at_end: dict[int, int] = {}  # partition: the end offset it was read to
        self._stop_ends: dict[int, int] | None = None
        self._consumer = Consumer(
            kafka_client_config(
                bootstrap_servers,
                **{
                    "group.id": group_id,
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "enable.partition.eof": True,
                    # A committed offset gone (the topic recreated): tombstones dedupe.
                    "auto.offset.reset": "earliest",
                },
            )
        )
        try:
            metadata = self._consumer.list_topics(topic, timeout=30)
            found = metadata.topics.get(topic)
            if found is None or found.error is not None:
                raise InflightRecordError(f"in-flight topic {topic!r} is missing")
            parts = [TopicPartition(topic, p) for p in sorted(found.partitions)]
            committed = self._consumer.committed(parts, timeout=30)
            self._consumer.assign(
                [TopicPartition(topic, tp.partition, _start(tp.offset)) for tp in committed]
            )
        except Exception:
            self._consumer.close()
            raise

    def catch_up(self, give_up: Callable[[], bool]) -> bool:
        """Read to the end offsets as of now; False when ``give_up()`` cut it short (then
        nothing may be delivered: a delivery's tombstone may not have been read yet).

        Called after the committer's producers fenced every earlier one, so every
        delivery an earlier committer made is known (by its tombstone) before anything
        is delivered again."""
        ends: dict[int, int] = {}
        deadline = time.monotonic() + 30
        for tp in self._consumer.assignment():
            # Retried while a just-created partition has no leader yet.
            low, high = watermarks(self._consumer, tp, deadline)
            if high > low:
                ends[tp.partition] = high
        dropped = 0
        while ends and not give_up():
            msg = self._consumer.poll(0.2)
            if msg is None:
                continue
            partition = msg.partition() or 0
            if self._eof(msg):
                ends.pop(partition, None)
                continue
            dropped += self._read(msg)
            if (msg.offset() or 0) + 1 >= ends.get(partition, 0):
                ends.pop(partition, None)
        if dropped:
            log.info("committer: %d schedule(s) were delivered before the restart", dropped)
        return not ends

    def poll(self, timeout_s: float) -> None:
        """Read what arrived (at most :data:`READ_SLICE` records), waiting up to
        ``timeout_s`` for the first record."""
        msg = self._consumer.poll(timeout_s)
        taken = 0
        while msg is not None:
            if not self._eof(msg):
                self._read(msg)
                self._at_end.pop(msg.partition() or 0, None)
            taken += 1
            if taken >= READ_SLICE:
                return
            msg = self._consumer.poll(0)

    def read_to_stop(self) -> bool:
        """Whether everything written before the first call has been read (so a stop
        can drain what was handed over until then)."""
        if self._stop_ends is None:
            self._stop_ends = {
                tp.partition: self._consumer.get_watermark_offsets(tp, timeout=5)[1]
                for tp in self._consumer.assignment()
            }
        return all(self._at_end.get(p, -1) >= end for p, end in self._stop_ends.items())

    def offsets(self) -> list[TopicPartition]:
        """The offsets a restart may resume from, as of now (see :meth:`commit`)."""
        return [
            TopicPartition(self.topic, partition, offset)
            for partition, offset in sorted(self.plan.offsets().items())
        ]

    def commit(self, positions: list[TopicPartition]) -> None:
        """Commit ``positions`` (from :meth:`offsets`), without waiting.

        Call only once every group taken before ``positions`` was read has committed:
        they pass no schedule still pending then. A commit that is lost (Kafka away)
        or lands out of order only makes a restart read more; the tombstones it reads
        show what was delivered. Safe to call from another thread than the one reading.
        """
        try:
            self._consumer.commit(offsets=positions, asynchronous=True)
        except KafkaException as exc:
            log.warning("committer offsets of %s not committed: %s", self.topic, exc)

    def close(self) -> None:
        """Release the consumer."""
        self._consumer.close()

    def _eof(self, msg: Message) -> bool:
        """Whether ``msg`` is no record: the end of a partition (noted), or an error
        (a fatal one raises; others, a broker away for a moment, are logged)."""
        error = msg.error()
        if error is None:
            return False
        if error.code() == KafkaError._PARTITION_EOF:
            self._at_end[msg.partition() or 0] = msg.offset() or 0
        elif error.fatal():
            raise InflightRecordError(f"reading {self.topic}: {error}")
        else:
            log.warning("reading %s: %s", self.topic, error)
        return True

    def _read(self, msg: Message) -> int:
        record = to_consumed_record(msg)
        handed = None
        if record.value is not None:
            try:
                handed = read_inflight(record)
            except InflightRecordError as exc:
                log.warning("committer skips a record: %s", exc)
        if handed is not None:
            self.targets.add(handed.schedule.target_topic)
        return int(self.plan.read(record, handed, self.clock.now_ms()))


def _start(committed: int) -> int:
    """Where to start reading a partition: its committed offset, or the beginning."""
    return committed if committed >= 0 else OFFSET_BEGINNING
