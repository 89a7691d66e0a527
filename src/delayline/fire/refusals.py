"""Deliveries the cluster refuses: find them, so they become dead letters.

One refused record makes a whole Kafka transaction abortable: one bad target would
hold back its whole batch, and the batch's replay would fail alike after each restart.
So the fire stage checks each delivery before producing it
(:meth:`~delayline.fire.topic_catalog.TopicCatalog.check`:
internal or missing topic, record over ``max.message.bytes``, keyless delivery to a
compacted topic), and when the broker still fails the transaction it reads why
(:func:`classify`): permanent refusals become dead letters and the batch is tried
again; anything else stays an error, so the batch is replayed.

A delivery is dead-lettered only on evidence read while its batch commits: facts that
allow delivery are cached, facts that refuse it are read afresh
(:mod:`delayline.fire.topic_catalog`, the only part that talks to Kafka); this module is
pure logic.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError

from delayline.contract import OutgoingRecord
from delayline.contract.topics import target_not_allowed, target_topic_problem
from delayline.fire.record_size import batch_size, size_bound

if TYPE_CHECKING:
    from delayline.fire.topic_catalog import TopicCatalog

TOPIC_REFUSALS = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_ID}
    | {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.TOPIC_EXCEPTION}  # INVALID_TOPIC
)
"""Errors that refuse every record to the topic (confirmed by a fresh look at it)."""
BATCH_REFUSALS = frozenset(
    {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_RECORD}
)
"""Errors about a record batch: every record of a batch over ``max.message.bytes`` gets
one, so they are a record's own fault only when it was alone in its batch."""
COLLATERAL = frozenset(
    {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT, KafkaError._STATE}
    | {KafkaError._INVALID_DIFFERENT_RECORD}
)
"""A record dropped because its transaction or batch failed for another record."""


@dataclass(frozen=True, slots=True)
class Failure:
    """A Kafka error: ``code`` and ``name`` as librdkafka has them, ``text`` the broker's."""

    code: int
    name: str
    text: str

    @classmethod
    def of(cls, error: KafkaError) -> Failure:
        """Copy a librdkafka error."""
        return cls(error.code(), error.name(), error.str())

    def reason(self, topic: str) -> str:
        """The ``delayline-error`` of a delivery to ``topic`` refused for this."""
        return f"delivery to topic {topic!r} refused: {self.name}: {self.text}"


@dataclass(frozen=True, slots=True)
class TopicFacts:
    """What the cluster said about one topic; ``None`` fields were not told.

    Attributes:
        error: Why the topic could not be described (it does not exist, not authorised).
        max_message_bytes: The largest record batch the topic accepts.
        compacted: Whether ``cleanup.policy`` includes ``compact`` (keys required).
        writable: Whether this client may write to it (asked only to confirm a refusal).
        log_append_time: Whether the broker stamps records with the time it appends
            them (``message.timestamp.type=LogAppendTime``), whatever the producer says.
    """

    error: Failure | None = None
    max_message_bytes: int | None = None
    compacted: bool | None = None
    writable: bool | None = None
    log_append_time: bool | None = None

    def refusal(self) -> Failure | None:
        """Why every record to this topic is refused, or ``None`` if nothing says so."""
        if self.error is not None and self.error.code in TOPIC_REFUSALS:
            return self.error
        if self.writable is False:
            return Failure(
                KafkaError.TOPIC_AUTHORIZATION_FAILED,
                "TOPIC_AUTHORIZATION_FAILED",
                "not authorised to write to the topic",
            )
        return None

    def contradicts(self, failure: Failure) -> bool:
        """Whether these (fresh) facts show ``failure``, a topic-level error, was passing."""
        if failure.code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            return self.writable is True
        if failure.code == KafkaError.TOPIC_EXCEPTION:
            return False
        return self.error is None


def record_problem(record: OutgoingRecord, facts: TopicFacts) -> Failure | None:
    """Why the topic described by ``facts`` must refuse ``record`` on its own, or ``None``."""
    refusal = facts.refusal()
    if refusal is not None:
        return refusal
    limit = facts.max_message_bytes
    if limit is not None and size_bound(record) > limit:
        size = batch_size(record)
        if size > limit:
            return Failure(
                KafkaError.MSG_SIZE_TOO_LARGE,
                "MSG_SIZE_TOO_LARGE",
                f"the record takes {size} bytes, over the topic's max.message.bytes of {limit}",
            )
    if facts.compacted and record.key is None:
        return Failure(
            KafkaError.INVALID_RECORD,
            "INVALID_RECORD",
            "the topic is compacted and the delivery has no key (set scheduler-target-key)",
        )
    return None


@functools.lru_cache(maxsize=4_096)
def name_problem(topic: str, allowed: str | None) -> str | None:
    """Why a delivery to ``topic`` is refused by its name alone (no need to ask the
    cluster): not a valid target, or outside ``--allowed-target-topics``. Remembered
    (pure, and asked for every delivery of every batch)."""
    return target_topic_problem(topic) or target_not_allowed(topic, allowed)


def precheck(
    deliveries: Mapping[int, OutgoingRecord],
    facts: Mapping[str, TopicFacts | None],
    allowed: str | None = None,
) -> dict[int, str]:
    """The deliveries known to be refused, with the reason.

    Args:
        deliveries: Deliveries by the position of their firing in the batch.
        facts: Facts about their topics; a topic missing here is not judged.
        allowed: ``--allowed-target-topics``: deliveries to other topics are refused.
    """
    refused: dict[int, str] = {}
    for i, delivery in deliveries.items():
        topic = delivery.topic
        problem = name_problem(topic, allowed)
        if problem is not None:
            refused[i] = f"delivery to topic {topic!r} refused: the target topic is {problem}"
            continue
        fact = facts.get(topic)
        failure = None if fact is None else record_problem(delivery, fact)
        if failure is not None:
            refused[i] = failure.reason(topic)
    return refused


@dataclass(frozen=True, slots=True)
class Sent:
    """One record of a failed attempt and what became of it.

    Attributes:
        record: The record.
        firing: Position of the firing whose delivery it is; ``None`` for delayline's
            own records (tombstones, history, dead letters, the marker).
        schedule_id: That firing's schedule id.
        alone: Produced alone in its batch (nothing else queued for its topic).
        error: Its delivery error, or ``None`` if it was written (then aborted).
    """

    record: OutgoingRecord
    firing: int | None = None
    schedule_id: str | None = None
    alone: bool = False
    error: Failure | None = None

    def describe(self) -> str:
        """Which record this is, for error messages (ids and topics, never payloads)."""
        if self.schedule_id is not None:
            return f"schedule {self.schedule_id!r} to topic {self.record.topic!r}"
        return f"record to topic {self.record.topic!r}"


@dataclass(slots=True)
class Verdict:
    """What a failed attempt teaches.

    Attributes:
        refused: Firings now known to be refused, with the reason.
        serial: Topics whose records must be produced one per batch from now on.
        problems: Failures that are no refusal: the batch must fail and be replayed.
    """

    refused: dict[int, str] = field(default_factory=dict)
    serial: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def classify(sent: Sequence[Sent], txn_error: Failure | None, catalog: TopicCatalog) -> Verdict:
    """Read why an attempt failed.

    A batch-level error (size) is a record's own when it was alone in its batch or is
    over the topic's known limit; otherwise its topic goes serial. A topic-level error
    on a record refuses every delivery to that topic unless fresh facts contradict it.
    A topic-level error of the transaction itself (as when the coordinator refuses to
    add a partition, which only purges the record) refuses the topics of purged
    deliveries that fresh facts confirm refused. Errors on delayline's own records, and
    any other error, are problems.
    """
    verdict = Verdict()
    suspects = _judge_records(sent, catalog, verdict)
    if txn_error is not None and txn_error.code in TOPIC_REFUSALS:
        for s in sent:
            if s.firing is not None and s.error is not None and s.error.code in COLLATERAL:
                suspects.setdefault(s.record.topic, (txn_error, False))
    refused_topics = _judge_topics(suspects, catalog, verdict)
    for s in sent:
        if s.firing is not None and s.record.topic in refused_topics:
            verdict.refused[s.firing] = refused_topics[s.record.topic]
    if txn_error is not None and not (verdict.refused or verdict.serial or verdict.problems):
        verdict.problems.append(f"transaction failed: {txn_error.name}: {txn_error.text}")
    return verdict


def _judge_records(
    sent: Sequence[Sent], catalog: TopicCatalog, verdict: Verdict
) -> dict[str, tuple[Failure, bool]]:
    """Judge each record's own error; return topic-level errors of deliveries to confirm
    (``topic -> (failure, True)``: seen on a record)."""
    suspects: dict[str, tuple[Failure, bool]] = {}
    for s in sent:
        error = s.error
        if error is None or error.code in COLLATERAL:
            continue
        topic = s.record.topic
        if error.code in BATCH_REFUSALS:
            cached = catalog.cached(topic)
            own = s.alone or (cached is not None and record_problem(s.record, cached) is not None)
            if not own:
                verdict.serial.add(topic)
            elif s.firing is not None:
                verdict.refused[s.firing] = error.reason(topic)
            else:
                verdict.problems.append(f"{s.describe()}: {error.name}: {error.text}")
        elif error.code in TOPIC_REFUSALS and s.firing is not None:
            suspects[topic] = (error, True)
        else:
            verdict.problems.append(f"{s.describe()}: {error.name}: {error.text}")
    return suspects


def _judge_topics(
    suspects: Mapping[str, tuple[Failure, bool]], catalog: TopicCatalog, verdict: Verdict
) -> dict[str, str]:
    """The suspect topics that refuse every delivery, with the reason, on fresh facts."""
    fresh = catalog.confirm(suspects) if suspects else {}
    refused: dict[str, str] = {}
    for topic, (failure, on_record) in suspects.items():
        fact = fresh.get(topic)
        if on_record:
            if fact is not None and fact.contradicts(failure):
                verdict.problems.append(f"topic {topic!r}: {failure.name}: {failure.text}")
            else:
                refused[topic] = failure.reason(topic)
        elif fact is not None and (confirmed := fact.refusal()) is not None:
            # The transaction's error names no topic; these facts name this one.
            shown = failure if confirmed.code == failure.code else confirmed
            refused[topic] = shown.reason(topic)
    return refused
