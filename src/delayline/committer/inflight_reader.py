"""The committer's reader of the in-flight topic (:mod:`delayline.fire.inflight`).

A ``read_committed`` consumer in the committers' group
(:func:`delayline.core.identifiers.committer_group`): the group splits the topic's
partitions between its committers (cooperative-sticky, so a committer joining or
leaving moves only the partitions that change hands), and a committer's static member
id (:func:`delayline.core.identifiers.committer_instance_id`) gives it its partitions
back at once when it restarts within the session timeout. Each partition is read from
the group's committed offset (committed after the delivery transactions). Everything it
reads goes into a :class:`DuePlan`.

A partition assigned is first *caught up*: its owner fences the producers of the one
before (:meth:`Ownership.assigned`, in the background: the partitions already owned keep
being delivered), then the partition is read to its end as of the fence
(:meth:`InflightReader.fenced`), tombstones included, before anything of it is
delivered. Where each partition is read to, and the ends it must reach, are kept by
:class:`~delayline.committer.read_progress.ReadProgress`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from delayline.committer.due_plan import DuePlan
from delayline.committer.ownership import Ownership
from delayline.committer.pending import Pending
from delayline.committer.read_progress import ReadProgress
from delayline.core.clock import Clock
from delayline.errors import CommitterNameTakenError, KafkaUnavailableError
from delayline.fire.inflight import InflightRecordError, decode_inflight
from delayline.kafka.config import kafka_client_config
from delayline.kafka.reader import message_headers

log = logging.getLogger(__name__)

READ_SLICE = 2_000
"""The most records one :meth:`InflightReader.poll` reads: in a burst of hand-overs the
committer takes the groups already due between slices instead of after reading all."""
READ_SLICE_MS = 20
"""The longest one :meth:`InflightReader.poll` reads (checked every :data:`READ_CHECK`
records): while a hand-over of 10,000 was read, the groups due meanwhile were up to
501 ms late before this bound and 114-161 ms after it (the pacing e2e test, here)."""
READ_CHECK = 64
"""How many records :meth:`InflightReader.poll` takes from its consumer at once (and reads
between two looks at the clock)."""
METADATA_REFRESH_MS = 10_000
"""How soon a committer sees partitions added to the in-flight topic (a pipeline started
with more ``--inflight-partitions``): until then nobody delivers what is handed to them."""


class InflightReader:
    """Reads handed-over schedules of the partitions this committer owns into ``plan``.

    Args:
        bootstrap_servers: Kafka bootstrap list.
        topic: The in-flight topic.
        group_id: The committers' consumer group (its offsets say where to resume).
        instance_id: This committer's static member id.
        session_timeout_ms: How long a committer that died keeps its partitions.
        plan: Where what is read goes.
        clock: The host's time (when each schedule was read).
        owner: Told when partitions are assigned and revoked.

    Raises:
        InflightRecordError: the topic does not exist.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        group_id: str,
        instance_id: str,
        session_timeout_ms: int,
        plan: DuePlan,
        clock: Clock,
        owner: Ownership,
    ) -> None:
        self.topic = topic
        self.plan = plan
        self.clock = clock
        self.owner = owner
        self.instance_id = instance_id
        self.targets: dict[str, int] = {}
        """Target topics of the schedules read since the caller last emptied this, each
        to the latest due time among them (broker time)."""
        self._progress = ReadProgress(bootstrap_servers, topic, plan)
        self.owned = self._progress.owned
        """The partitions assigned to this committer."""
        self.rebalanced = False
        """Whether the group has assigned this committer its partitions (none, maybe)."""
        self.metadata_of: Callable[[int], str | None] | None = None
        """The metadata committed with an in-flight partition's offset (the short-notice
        read positions: :mod:`delayline.committer.short_intake`; ``None`` for one: not
        known yet, its offset is not committed); ``None``: none."""
        self._stop_ends: dict[int, int] | None = None
        self._dropped = 0
        self._consumer = Consumer(
            kafka_client_config(
                bootstrap_servers,
                **{
                    "group.id": group_id,
                    "group.instance.id": instance_id,
                    "partition.assignment.strategy": "cooperative-sticky",
                    "session.timeout.ms": session_timeout_ms,
                    "heartbeat.interval.ms": max(session_timeout_ms // 10, 100),
                    "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
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
            self.partitions = len(found.partitions)
            """How many partitions the topic had at the start."""
            self._consumer.subscribe(
                [topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
        except Exception:
            self._consumer.close()
            raise

    def caught_up(self, partition: int) -> bool:
        """Whether ``partition`` is ours and read to its end as of its assignment (its
        schedules may be delivered)."""
        return self._progress.caught_up(partition)

    def wait_for_partitions(
        self, give_up: Callable[[], bool], timeout_s: float, step: Callable[[], None]
    ) -> bool:
        """Poll (and call ``step``, which takes the fences done) until the group has
        assigned this committer its partitions and each is caught up, at most
        ``timeout_s`` (a committer that gets none waits that long); False when
        ``give_up()`` cut it short (then nothing may be delivered)."""
        deadline = time.monotonic() + timeout_s
        progress = self._progress
        while not give_up():
            if self.rebalanced and progress.all_caught_up():
                break
            if time.monotonic() >= deadline and progress.all_caught_up():
                break
            self.poll(0.05)
            step()
        if self._dropped:
            log.info("committer: %d schedule(s) were delivered before the restart", self._dropped)
        return not give_up()

    def poll(self, timeout_s: float) -> None:
        """Read what arrived (at most :data:`READ_SLICE` records, in batches of
        :data:`READ_CHECK`), waiting up to ``timeout_s`` for the first record."""
        first = self._consumer.poll(timeout_s)
        msgs = [] if first is None else [first, *self._consumer.consume(READ_CHECK - 1, 0)]
        taken = 0
        until = time.monotonic() + READ_SLICE_MS / 1000
        while msgs:
            self._read(msgs)
            taken += len(msgs)
            if taken >= READ_SLICE or time.monotonic() > until:
                break
            msgs = self._consumer.consume(READ_CHECK, 0)
        self._take_positions()

    def read_to_stop(self) -> bool:
        """Whether everything written before the first call has been read (so a stop
        can drain what was handed over until then)."""
        if self._stop_ends is None:
            self._stop_ends = {
                p: self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=5)[1]
                for p in self.owned
            }
        return self._progress.has_read(self._stop_ends)

    def stable_ends(self, timeout_s: float = 10.0) -> dict[int, int]:
        """Each owned partition's last stable offset now: every hand-over committed by
        now is before it (see :meth:`has_read`).

        Raises:
            KafkaUnavailableError: the offsets could not be read in time.
        """
        return self._progress.stable_ends(timeout_s)

    def has_read(self, ends: dict[int, int]) -> bool:
        """Whether every partition of ``ends`` still owned is read (into the plan) up to
        its offset there."""
        return self._progress.has_read(ends)

    def offsets(self, partitions: set[int] | None = None) -> list[TopicPartition]:
        """The offsets a restart may resume from, as of now (see :meth:`commit`), of
        ``partitions`` (default: those owned), each with its :attr:`metadata_of` if
        set (then every partition read from is named, its position where nothing of it
        is pending: the metadata must go with it; one without is left out)."""
        chosen = self.owned if partitions is None else partitions
        safe = self.plan.offsets(chosen)
        describe = self.metadata_of
        if describe is None:
            return [TopicPartition(self.topic, p, offset) for p, offset in sorted(safe.items())]
        missing = [TopicPartition(self.topic, p) for p in sorted(chosen) if p not in safe]
        for tp in self._consumer.position(missing) if missing else ():
            if tp.error is None and tp.offset >= 0:
                safe[tp.partition] = tp.offset
        described = ((p, offset, describe(p)) for p, offset in sorted(safe.items()))
        return [
            TopicPartition(self.topic, p, offset, metadata=metadata)
            for p, offset, metadata in described
            if metadata is not None
        ]

    def committed_metadata(
        self, partitions: Iterable[int], timeout_s: float = 10.0
    ) -> dict[int, str]:
        """The metadata committed with each of ``partitions``' offsets (none: left out).

        Raises:
            KafkaUnavailableError: Kafka did not answer in time.
        """
        asked = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        if not asked:
            return {}
        try:
            found = self._consumer.committed(asked, timeout=timeout_s)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"committed offsets of {self.topic}: {exc}") from exc
        return {tp.partition: tp.metadata for tp in found if tp.error is None and tp.metadata}

    def commit(self, positions: list[TopicPartition], *, wait: bool = False) -> None:
        """Commit ``positions`` (from :meth:`offsets`), without waiting unless ``wait``.

        Call only once every group taken before ``positions`` was read has committed:
        they pass no schedule still pending then. A commit that is lost (Kafka away)
        or lands out of order only makes a restart read more; the tombstones it reads
        show what was delivered. Safe to call from another thread than the one reading.
        """
        if not positions:
            return
        try:
            if wait:
                self._consumer.commit(offsets=positions, asynchronous=False)
            else:
                self._consumer.commit(offsets=positions, asynchronous=True)
        except KafkaException as exc:
            log.warning("committer offsets of %s not committed: %s", self.topic, exc)

    def close(self) -> None:
        """Release the consumer."""
        self._consumer.close()

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Note the partitions (not deliverable until fenced and caught up) and have the
        owner fence their earlier owners; the client assigns them after this returns,
        from the committed offsets."""
        self.rebalanced = True
        mine = sorted(tp.partition for tp in partitions if tp.topic == self.topic)
        if not mine:
            return
        self._progress.assigned(mine)
        self._stop_ends = None
        log.info("committer: assigned in-flight partition(s) %s", ",".join(map(str, mine)))
        self.owner.assigned(mine)

    def fenced(self, partition: int) -> None:
        """``partition``'s earlier owners are fenced: read it to its end as of now, open
        transactions included, before delivering from it (why:
        :meth:`~delayline.committer.read_progress.ReadProgress.fenced`)."""
        self._progress.fenced(partition)

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up(partitions, lost=False)

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up(partitions, lost=True)

    def _give_up(self, partitions: list[TopicPartition], *, lost: bool) -> None:
        mine = sorted(tp.partition for tp in partitions if tp.partition in self.owned)
        if not mine:
            return
        if self.owner.revoked(mine, lost=lost):
            self.commit(self.offsets(set(mine)), wait=True)
        for p in mine:
            self._progress.released(p)
            self.plan.drop_partition(p)
        # Released at every stop too: worth a line only when the group took them away.
        log.log(
            logging.WARNING if lost else logging.DEBUG,
            "committer: in-flight partition(s) %s %s",
            ",".join(map(str, mine)),
            "lost (the group moved them on)" if lost else "released",
        )

    def _eof(self, msg: Message) -> bool:
        """Whether ``msg`` is no record: the end of a partition (noted), or an error
        (a fatal one raises; others, a broker away for a moment, are logged)."""
        error = msg.error()
        if error is None:
            return False
        if error.code() == KafkaError._PARTITION_EOF:
            self._progress.at_end(msg.partition() or 0, msg.offset() or 0)
        elif error.code() == KafkaError._FATAL or error.fatal():
            if "group.instance.id" in error.str():
                raise CommitterNameTakenError(
                    f"the group fenced this committer: a member joined under its name "
                    f"({self.instance_id})"
                )
            raise InflightRecordError(f"reading {self.topic}: {error}")
        else:
            log.warning("reading %s: %s", self.topic, error)
        return True

    def _read(self, msgs: list[Message]) -> None:
        """Take a batch of what the consumer returned into the plan: each record of an
        owned partition a schedule (:meth:`DuePlan.add`) or a tombstone
        (:meth:`DuePlan.tombstone`); ends of partitions and errors noted."""
        plan, owned, targets, settle = self.plan, self.owned, self.targets, self._progress.settle
        now = self.clock.now_ms()
        touched: dict[int, int] = {}  # partition: the next offset to read
        for msg in msgs:
            if msg.error() is not None:
                settle(touched)  # what was read before this end
                touched = {}
                self._eof(msg)
                continue
            partition = msg.partition() or 0
            if partition not in owned:
                continue
            offset = msg.offset() or 0
            touched[partition] = offset + 1
            value = msg.value()
            if value is None:
                self._dropped += plan.tombstone(partition, offset, msg.key())
                continue
            try:
                schedule, batch, missed = decode_inflight(value, message_headers(msg), offset)
            except InflightRecordError as exc:
                log.warning("committer skips a record: %s", exc)
                plan.passed(partition, offset)
                continue
            key = msg.key() or b""
            handed_ms = msg.timestamp()[1]
            plan.add(Pending(partition, offset, key, schedule, now, batch, missed, handed_ms))
            target, due = schedule.target_topic, schedule.due_ms
            if targets.get(target, -1) < due:
                targets[target] = due
        settle(touched)

    def _take_positions(self) -> None:
        """Note where the consumer stands in each owned partition: past what was taken,
        and past the transaction markers and aborted records after it, which the end of
        the partition reports only a fetch (the broker's hold, 500 ms) later."""
        if not self.owned:
            return
        progress = self._progress
        ahead: dict[int, int] = {}
        for tp in self._consumer.position([TopicPartition(self.topic, p) for p in self.owned]):
            if tp.error is None and tp.offset > progress.read_to(tp.partition):
                ahead[tp.partition] = tp.offset
        if ahead:
            progress.settle(ahead)
