"""Write each micro-batch's output in one Kafka transaction with a commit marker.

Exactly once rests on two facts. Spark replays a micro-batch after a crash with
the same input and batch timestamp, so it produces the same records. And the
records of a batch are committed atomically together with a marker
``(run, batch id)`` on the commits topic, so a replay finds the marker and
writes nothing. A fixed ``transactional.id`` per run fences a stalled earlier
instance: its open transaction is aborted when the new one initialises.
Readers must use ``isolation.level=read_committed``.

A delivery the cluster refuses (see :mod:`delayline.fire.refusals`) becomes a dead
letter instead, so one bad target never holds back the rest of its batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import KafkaException

from delayline.contract import (
    OutgoingRecord,
)
from delayline.core.timing import warn_if_slow
from delayline.errors import DelaylineError
from delayline.fire.attempts import record_unknown, sent_plan
from delayline.fire.firing import Firing
from delayline.fire.markers import marker_batch, render_marker
from delayline.fire.producer import FireProducer
from delayline.fire.refusals import classify
from delayline.fire.topic_catalog import AdminDescriber, Describe, TopicCatalog
from delayline.fire.write_attempt import Placed, write_attempt
from delayline.kafka.reader import read_topic

log = logging.getLogger(__name__)


class FireError(DelaylineError):
    """A batch could not be committed; the pipeline stops and its replay retries it."""

    retriable = True


@dataclass(frozen=True, slots=True)
class Committed:
    """What :meth:`TransactionalFirer.commit_batch` did with a batch.

    Attributes:
        replay: The batch was committed before (a replay): nothing was written.
        refused: Position in the batch's records of each :class:`Firing` whose delivery
            the cluster refused, to the reason; each went to the dead-letter topic
            instead. Empty for a replay (its refusals are not judged again).
    """

    replay: bool
    refused: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FireConfig:
    """Settings of the transactional writer.

    Attributes:
        bootstrap_servers: Kafka bootstrap list.
        commits_topic: Compacted topic of commit markers, keyed by run.
        transactional_id: Stable per pipeline; a restarted pipeline must reuse it.
        transaction_timeout_ms: Broker aborts a transaction left open this long.
        timeout_ms: Bound on init, commit and marker reads.
        linger_ms: How long the producer gathers records before sending them.
        allowed_targets: ``--allowed-target-topics``: deliveries to other topics are
            dead-lettered (with the topic catalog this writer makes).
        last_topics: Topics written to last in each transaction, once everything else
            in it is acknowledged (the input topics: delayline's tombstones and re-arms).
            A ``read_committed`` reader of a partition cannot read past a transaction
            open in it, and the committers' watch waits for such a reader to have read
            every input record acknowledged before a commit: written last, a batch's
            transaction holds an input partition for its last milliseconds only, not
            for the whole batch.
    """

    bootstrap_servers: str
    commits_topic: str
    transactional_id: str
    transaction_timeout_ms: int = 60_000
    timeout_ms: int = 30_000
    linger_ms: int = 5
    allowed_targets: str | None = None
    last_topics: frozenset[str] = frozenset()


class TransactionalFirer:
    """Commits batches of records exactly once per ``(run, batch id)``.

    Args:
        config: The writer's settings.
        describe: How target topics are looked up; an admin client by default.
        topics: What is known of target topics, when shared with other writers (then
            ``describe`` is not used).
    """

    def __init__(
        self,
        config: FireConfig,
        describe: Describe | None = None,
        topics: TopicCatalog | None = None,
    ) -> None:
        self.config = config
        self._topics = topics or TopicCatalog(
            describe or AdminDescriber(config.bootstrap_servers, config.timeout_ms),
            allowed=config.allowed_targets,
        )
        self._producer = FireProducer(
            config.bootstrap_servers,
            config.transactional_id,
            transaction_timeout_ms=config.transaction_timeout_ms,
            timeout_ms=config.timeout_ms,
            linger_ms=config.linger_ms,
        )
        self._committed: dict[str, int] = {}

    def last_committed(self, *runs: str, refresh: bool = False) -> int:
        """Highest batch id committed for any of ``runs`` (-1 if none).

        The commits topic is read once (every run's markers at once) and then tracked;
        ``refresh`` reads it again, for when another process may have committed since.
        """
        if refresh or any(run not in self._committed for run in runs):
            latest: dict[str, int] = dict.fromkeys(runs, -1)
            for record in read_topic(
                self.config.bootstrap_servers,
                self.config.commits_topic,
                timeout_ms=self.config.timeout_ms,
            ):
                if record.key is not None and record.value:
                    key = record.key.decode("utf-8", "replace")
                    where = f"{self.config.commits_topic}[{record.partition}]@{record.offset}"
                    batch = marker_batch(record.value, where, required=key in runs)
                    if batch is not None:
                        latest[key] = max(latest.get(key, -1), batch)
            self._committed.update(latest)
        return max(self._committed[run] for run in runs)

    def commit_batch(
        self,
        run: str,
        batch_id: int,
        records: Sequence[OutgoingRecord | Firing],
        *,
        refresh: bool = False,
        also: str | None = None,
    ) -> Committed:
        """Write ``records`` and the marker of ``(run, batch_id)`` in one transaction.

        ``refresh`` reads the markers afresh first (see :meth:`last_committed`).
        Without it, the caller promises that no other process can have committed this
        batch (it is not a replay or a retry): the markers this writer knows are
        checked, and none are read. A marker of ``also`` (the run-wide key written
        before markers were per partition) counts as one of ``run``.

        Refused deliveries become dead letters (see :meth:`deliver`). Only the attempt
        that commits is visible, together with its marker, so the batch is written
        exactly once; a replay judges the refusals afresh.

        Returns:
            Whether the batch was a replay, and which firings were refused (by their
            position in ``records``) with the reasons.

        Raises:
            FireError: the transaction failed for another reason (or delayline's own
                topics refused a record) and was aborted; nothing is visible. The
                message names the schedules and topics involved.
        """
        runs = (run,) if also is None else (run, also)
        if refresh or all(r in self._committed for r in runs):
            done = self.last_committed(*runs, refresh=refresh)
        else:
            # Without ``refresh`` the caller knows the batch is new (not the first
            # batch after a start, not a retried task), so a producer new to this run
            # need not read the commits topic: that read cost every new producer of a
            # partition up to a second.
            done = -1
        if batch_id <= done:
            log.info("batch %d of run %s already committed; skipping its replay", batch_id, run)
            return Committed(replay=True)
        marker = render_marker(self.config.commits_topic, run, batch_id, len(records))
        refused = self.deliver(records, extra=[marker], label=f"batch {batch_id} of run {run}")
        self._committed[run] = batch_id
        return Committed(replay=False, refused=refused)

    def deliver(
        self,
        records: Sequence[OutgoingRecord | Firing],
        *,
        extra: Sequence[OutgoingRecord] = (),
        label: str,
        before_commit: Callable[[Placed], None] | None = None,
        track: Collection[OutgoingRecord] = (),
    ) -> dict[int, str]:
        """Write ``records`` and ``extra`` in one transaction, refusals dead-lettered.

        A :class:`Firing` whose delivery the cluster refuses (internal, missing or
        unauthorised topic, record too large...) is written as its dead letter and
        tombstone instead. Such refusals are found before producing where topic facts
        tell, or else from the errors of an attempt, which is then aborted and tried
        again without them. Every new attempt dead-letters at least one more firing or
        writes one more topic a record per batch, so attempts end. Only the attempt that
        commits is visible.

        Args:
            records: What to write, in order.
            extra: delayline's own records written last (markers, tombstones).
            label: Names the transaction in logs and errors.
            before_commit: Called once everything is written and acknowledged, right
                before the commit (the committer waits for the due time there), with
                the partition and offset of each record of ``track`` written. Not
                called for an attempt a record is known to have failed.
            track: Records whose place ``before_commit`` is told.

        Returns:
            Each refused firing's position in ``records``, to the reason.

        Raises:
            FireError: the transaction failed for another reason (or delayline's own
                topics refused a record) and was aborted; nothing is visible.
        """
        firings = {i: item for i, item in enumerate(records) if isinstance(item, Firing)}
        deliveries = {i: f.delivery for i, f in firings.items()}
        with warn_if_slow(log, f"{label}: checking target topics"):
            refused = self._topics.check(deliveries) if firings else {}
        serial: set[str] = set()
        reports = False  # the usual way: no delivery report per record (see write_attempt)
        while True:
            plan, owners = sent_plan(records, refused, deliveries)
            plan.extend(extra)
            failed = write_attempt(
                self._producer,
                label,
                plan,
                owners,
                serial,
                before_commit,
                frozenset(track),
                reports,
                self.config.last_topics,
            )
            if failed is None:
                return dict(refused)
            sent, txn_error = failed
            fatal = self._producer.fatal
            self._producer.abort()
            if not reports and not fatal and record_unknown(sent, txn_error):
                # Which record failed is not known without reports: written again with them.
                log.debug("%s: transaction aborted; written again with delivery reports", label)
                reports = True
                continue
            verdict = classify(sent, txn_error, self._topics)
            new_serial = verdict.serial - serial
            if verdict.problems or not (verdict.refused or new_serial):
                problems = verdict.problems or ["no record reported an error"]
                more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
                raise FireError(f"{label} not committed: {'; '.join(problems[:3])}{more}")
            log.info(
                "%s: transaction aborted, %d delivery(ies) refused%s; trying again",
                label,
                len(verdict.refused),
                f", writing {', '.join(sorted(new_serial))} one record per batch"
                if new_serial
                else "",
            )
            refused.update(verdict.refused)
            serial |= new_serial

    def load_metadata(self, topics: Collection[str]) -> None:
        """Have the producer look ``topics`` up now, so a delivery to them waits for no
        lookup. Safe to call from another thread than the one delivering."""
        producer = self._producer
        for topic in topics:
            try:
                producer.producer.list_topics(topic, timeout=self.config.timeout_ms / 1000)
            except KafkaException as exc:  # the delivery looks again and judges
                log.debug("no metadata of topic %s: %s", topic, exc)
            else:
                producer.looked_up.add(topic)

    def unseen(self, topics: Collection[str]) -> set[str]:
        """Which of ``topics`` the producer (the one now: a new one after a fatal error)
        has not looked up through :meth:`load_metadata`."""
        return set(topics).difference(self._producer.looked_up)

    @property
    def topics(self) -> TopicCatalog:
        """What this writer knows about target topics."""
        return self._topics

    def close(self) -> None:
        """Release the producer (nothing is left open between batches)."""
        self._producer.close()
