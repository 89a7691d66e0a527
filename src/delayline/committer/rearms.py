"""What lands among a group's re-arms: the committer's last look before it commits.

A group that re-arms recurring schedules (:mod:`delayline.committer.recurring`) writes each
re-arm into the schedules partition its version came from, in the group's open
transaction. A cancel or update written there before a re-arm would be overruled by it
(compaction and the hold keep the later record), so before the commit the committer
reads each such partition from where its watch has read up to its last re-arm, *read
uncommitted* (its own open transaction holds ``read_committed`` readers back before its
first record): a cancel or update of a re-armed schedule found there withholds it, and
the group is written again without it. Whatever lands after a re-arm ends the re-armed
version in the hold.

Read uncommitted, a record of another producer's transaction still open (or aborted)
counts as written: the series ends rather than risk overruling a cancel. delayline's
own re-arms (``delayline-rearm-of``), those of an aborted attempt included, end nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

from confluent_kafka import KafkaError, TopicPartition

from delayline.contract import ConsumedRecord, OutgoingRecord
from delayline.contract.headers import REARM_OF
from delayline.errors import KafkaUnavailableError
from delayline.kafka.reader import private_consumer, to_consumed_record

Place = tuple[str, int]
"""(topic, partition)."""


def rearm_ranges(
    rearms: Sequence[OutgoingRecord],
    placed: Mapping[OutgoingRecord, tuple[int, int]],
    read_to: Mapping[Place, int],
) -> tuple[dict[Place, tuple[int, int]], set[tuple[str, int, int]]]:
    """What to read before a group's commit: per place of its ``rearms`` (written at
    ``placed``: partition and offset), from where the watch has read (``read_to``) up to
    its last re-arm there; and the (topic, partition, offset) of each re-arm."""
    ranges: dict[Place, tuple[int, int]] = {}
    ours: set[tuple[str, int, int]] = set()
    for record in rearms:
        partition, offset = placed[record]
        place = (record.topic, partition)
        low, high = ranges.get(place, (read_to.get(place, 0), offset))
        ranges[place] = (min(low, offset), max(high, offset))
        ours.add((record.topic, partition, offset))
    return ranges, ours


class RangeReader:
    """Reads ranges of input partitions, uncommitted. Thread-safe (one read at a time).

    Args:
        bootstrap_servers: Kafka bootstrap list.
        timeout_s: Bound on one :meth:`read`.
    """

    def __init__(self, bootstrap_servers: str, timeout_s: float = 10.0) -> None:
        self._consumer = private_consumer(
            bootstrap_servers,
            "delayline-rearms",
            read_committed=False,
            overrides={"enable.partition.eof": True, "fetch.wait.max.ms": 10},
        )
        self._lock = threading.Lock()
        self.timeout_s = timeout_s

    def read(self, ranges: Mapping[Place, tuple[int, int]]) -> list[ConsumedRecord]:
        """The records of each place from its first offset up to its last (both
        included) that are not delayline's re-arms.

        Raises:
            KafkaUnavailableError: a range was not read within the timeout.
        """
        found: list[ConsumedRecord] = []
        with self._lock:
            todo = dict(ranges)
            self._consumer.assign([TopicPartition(t, p, lo) for (t, p), (lo, _) in todo.items()])
            deadline = time.monotonic() + self.timeout_s
            while todo:
                if time.monotonic() > deadline:
                    raise KafkaUnavailableError(
                        f"re-arm check: {len(todo)} partition(s) not read in {self.timeout_s:g} s"
                    )
                for msg in self._consumer.consume(500, 0.05):
                    place = (msg.topic() or "", msg.partition() or 0)
                    if place not in todo:
                        continue
                    error = msg.error()
                    if error is not None and error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaUnavailableError(f"re-arm check: {error}")
                    last = todo[place][1]
                    if error is None and (msg.offset() or 0) <= last:
                        record = to_consumed_record(msg)
                        if not any(name == REARM_OF for name, _ in record.headers):
                            found.append(record)
                    if (msg.offset() or 0) >= last:
                        del todo[place]
            self._consumer.unassign()
        return found

    def close(self) -> None:
        """Release the consumer."""
        self._consumer.close()
