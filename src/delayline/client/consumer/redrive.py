"""Redrive: send chosen dead letters of a consumer group back for another attempt, once.

A dead letter (:mod:`delayline.client.consumer.retries`) is read from the group's
dead-letter topic and written to the group's retry topic (its ``retry-group`` header
names the group) as it is, without its ``retry-dead-reason``, with
``retry-redriven-from`` saying which dead letter it was. Its ``retry-attempt`` stays: a
record that exhausted its retries and fails again is a dead letter again at once.

Once: each redriven letter is marked in ``<dead-letter topic>-redriven`` (compacted,
keyed by the letter's place), in the same transaction as its copy, and a redrive skips
marked letters. One transactional id per dead-letter topic, taken before the marks are
read: a redrive of the same topic running at once is fenced and aborts, and never both
redrive one letter.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from delayline.client.consumer.topics import ensure_topics
from delayline.client.retry import (
    DEAD_REASON,
    ERROR_CLASS,
    ERROR_MESSAGE,
    GROUP,
    RETRY_TOPIC,
    SOURCE_TOPIC,
    header_value,
)
from delayline.contract import ConsumedRecord, OutgoingRecord
from delayline.contract.topics import topic_name_problem
from delayline.errors import (
    ConfigError,
    DeliveryError,
    KafkaUnavailableError,
    NoSuchTopicError,
    TopicConfigError,
)
from delayline.kafka.config import kafka_client_config
from delayline.kafka.produce import produce
from delayline.kafka.reader import private_consumer, read_topic

log = logging.getLogger(__name__)

REDRIVEN_FROM = "retry-redriven-from"
"""On a redriven record: ``<dead-letter topic>/<partition>/<offset>`` it was."""
MARKS_SUFFIX = "-redriven"
READ_TIMEOUT_MS = 60_000


@dataclass(frozen=True, slots=True)
class Choice:
    """Which dead letters to redrive: all of these that are given must hold.

    Attributes:
        ids: Dead-letter ids, ``<partition>/<offset>`` in the dead-letter topic.
        source_topic: Read first from this topic (``retry-source-topic``).
        since_ms, until_ms: Dead-lettered in [since, until) (the record's timestamp).
        error: Contained in the error's class or message.
    """

    ids: frozenset[str] = field(default_factory=frozenset)
    source_topic: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if not (self.ids or self.source_topic or self.error) and (
            self.since_ms is None and self.until_ms is None
        ):
            raise ConfigError(
                "choose the dead letters to redrive: by id, source topic, time or error"
            )

    def holds(self, letter: ConsumedRecord) -> bool:
        """Whether ``letter`` is chosen."""
        if self.ids and letter_id(letter) not in self.ids:
            return False
        headers = letter.headers
        if self.source_topic is not None and header_value(headers, SOURCE_TOPIC) != (
            self.source_topic.encode()
        ):
            return False
        if self.since_ms is not None and letter.timestamp_ms < self.since_ms:
            return False
        if self.until_ms is not None and letter.timestamp_ms >= self.until_ms:
            return False
        if self.error is not None:
            said = b" ".join(
                header_value(headers, name) or b"" for name in (ERROR_CLASS, ERROR_MESSAGE)
            )
            return self.error.encode() in said
        return True


@dataclass(frozen=True, slots=True)
class Redriven:
    """What a redrive did.

    Attributes:
        redriven: The ids sent back (none with ``dry_run``: those it would send).
        already: Chosen ids redriven before, skipped.
        dry_run: Nothing was written.
    """

    redriven: tuple[str, ...]
    already: tuple[str, ...]
    dry_run: bool


def letter_id(letter: ConsumedRecord) -> str:
    """A dead letter's id: ``<partition>/<offset>`` in its topic."""
    return f"{letter.partition}/{letter.offset}"


def dead_letters(
    bootstrap_servers: str, dead_letter_topic: str
) -> list[tuple[ConsumedRecord, bool]]:
    """Every letter of ``dead_letter_topic``, oldest first, each with whether it was
    redriven.

    Raises:
        ConfigError: not a valid topic name.
        NoSuchTopicError: the topic does not exist.
        KafkaUnavailableError: Kafka did not answer in time.
    """
    require_topic(bootstrap_servers, dead_letter_topic)
    done = _marked(bootstrap_servers, dead_letter_topic + MARKS_SUFFIX, missing_ok=True)
    letters = read_topic(bootstrap_servers, dead_letter_topic, timeout_ms=READ_TIMEOUT_MS)
    letters.sort(key=lambda r: (r.timestamp_ms, r.partition, r.offset))
    return [(letter, letter_id(letter) in done) for letter in letters]


def redrive(
    bootstrap_servers: str, dead_letter_topic: str, choice: Choice, *, dry_run: bool = False
) -> Redriven:
    """Send the dead letters of ``dead_letter_topic`` that ``choice`` holds back to
    their groups' retry topics, each once (see the module).

    Raises:
        ConfigError: not a valid topic name, or a chosen letter names no group (not a
            consumer's dead letter).
        NoSuchTopicError: the dead-letter topic does not exist.
        TopicConfigError: the marks topic cannot be made.
        KafkaUnavailableError: Kafka did not answer in time.
        DeliveryError: the transaction failed; nothing was redriven.
    """
    marks = dead_letter_topic + MARKS_SUFFIX
    require_topic(bootstrap_servers, dead_letter_topic)
    producer = None
    if not dry_run:
        compact = {"cleanup.policy": "compact"}
        ensure_topics(bootstrap_servers, [NewTopic(marks, num_partitions=1, config=compact)])
        producer = Producer(
            kafka_client_config(
                bootstrap_servers,
                **{"transactional.id": f"delayline-redrive-{dead_letter_topic}"},
            )
        )
        producer.init_transactions(30)  # before the marks are read: see the module
    done = _marked(bootstrap_servers, marks, missing_ok=dry_run)
    chosen = [
        letter
        for letter in read_topic(bootstrap_servers, dead_letter_topic, timeout_ms=READ_TIMEOUT_MS)
        if choice.holds(letter)
    ]
    already = tuple(letter_id(c) for c in chosen if letter_id(c) in done)
    fresh = [c for c in chosen if letter_id(c) not in done]
    copies = [_copy(dead_letter_topic, letter) for letter in fresh]
    if producer is not None and copies:
        _write(producer, marks, fresh, copies)
    ids = tuple(letter_id(c) for c in fresh)
    log.info("redrive of %s: %d sent back, %d redriven before%s", dead_letter_topic,
             len(ids), len(already), " (dry run)" if dry_run else "")  # fmt: skip
    return Redriven(ids, already, dry_run)


def require_topic(bootstrap_servers: str, topic: str) -> None:
    """Check that ``topic`` is a valid name and exists.

    Raises:
        ConfigError: not a valid topic name.
        NoSuchTopicError: no such topic.
        KafkaUnavailableError: Kafka did not answer in time.
    """
    problem = topic_name_problem(topic)
    if problem is not None:
        raise ConfigError(f"dead-letter topic name {topic!r} is invalid: {problem}")
    # A consumer's lookup: it never creates the topic (an admin client's may).
    consumer = private_consumer(bootstrap_servers, "delayline-redrive")
    try:
        found = consumer.list_topics(topic, timeout=10).topics.get(topic)
    except KafkaException as exc:
        raise KafkaUnavailableError(f"Kafka did not answer: {exc.args[0].str()}") from exc
    finally:
        consumer.close()
    if found is None or found.error is not None:
        raise NoSuchTopicError(f"no topic {topic!r}: not a dead-letter topic here")


def _copy(dead_letter_topic: str, letter: ConsumedRecord) -> OutgoingRecord:
    group = header_value(letter.headers, GROUP)
    if not group:
        raise ConfigError(
            f"dead letter {letter_id(letter)} of {dead_letter_topic} has no {GROUP} header: "
            "not a retrying consumer's"
        )
    place = f"{dead_letter_topic}/{letter_id(letter)}".encode()
    headers = tuple((n, v) for n, v in letter.headers if n not in (DEAD_REASON, REDRIVEN_FROM))
    named = header_value(letter.headers, RETRY_TOPIC)  # absent: a writer of the default
    target = named.decode() if named else f"{group.decode()}-retry"
    return OutgoingRecord(target, letter.key, letter.value, (*headers, (REDRIVEN_FROM, place)))


def _write(
    producer: Producer,
    marks: str,
    letters: list[ConsumedRecord],
    copies: list[OutgoingRecord],
) -> None:
    failures: list[tuple[str, str]] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(("redrive", str(err)))

    producer.begin_transaction()
    try:
        for letter, copy in zip(letters, copies, strict=True):
            produce(producer, copy, on_delivery)
            mark = OutgoingRecord(marks, letter_id(letter).encode(), b"")
            produce(producer, mark, on_delivery)
        producer.commit_transaction(60)
    except KafkaException as exc:
        try:
            producer.abort_transaction(30)
        except KafkaException as again:  # fenced: another redrive of the topic began
            log.warning("redrive not aborted: %s", again.args[0].str())
        raise DeliveryError([("redrive", exc.args[0].str())]) from exc
    if failures:
        raise DeliveryError(failures)


def _marked(bootstrap_servers: str, marks: str, *, missing_ok: bool) -> set[str]:
    """The ids of letters redriven before."""
    try:
        records: Iterable[ConsumedRecord] = read_topic(
            bootstrap_servers, marks, timeout_ms=READ_TIMEOUT_MS
        )
    except TopicConfigError:
        if not missing_ok:
            raise
        return set()  # none made yet: nothing redriven
    return {r.key.decode() for r in records if r.key is not None}
