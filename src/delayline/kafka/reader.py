"""Read a topic from the beginning up to its current end, as ConsumedRecords.

For inspection (``demo``, tests, listing), not for the pipeline: it assigns
partitions directly, commits nothing, and stops at the end offsets it saw first.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from delayline.contract import ConsumedRecord
from delayline.core.model import Headers
from delayline.errors import KafkaUnavailableError, TopicConfigError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.errors import kafka_error


def private_consumer(
    bootstrap_servers: str,
    name: str,
    *,
    read_committed: bool = True,
    overrides: Mapping[str, Any] | None = None,
) -> Consumer:
    """A consumer in a group of its own that never commits offsets: for readers that
    assign partitions or read from the start, and must leave no trace in Kafka.

    Args:
        bootstrap_servers: Kafka bootstrap list.
        name: Prefix of the throwaway group id (shows up in broker logs).
        read_committed: Skip records of aborted or open transactions.
        overrides: Further librdkafka settings.
    """
    return Consumer(
        kafka_client_config(
            bootstrap_servers,
            **{
                "group.id": f"{name}-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                **(overrides or {}),
            },
        )
    )


def read_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    timeout_ms: int = 10_000,
    read_committed: bool = True,
    since: Mapping[int, int] | None = None,
) -> list[ConsumedRecord]:
    """Every record of ``topic`` up to the end offsets at call time, in partition order.

    Args:
        bootstrap_servers: Kafka bootstrap list.
        topic: Topic to read.
        timeout_ms: Bound on the whole read.
        read_committed: Skip records of aborted or open transactions.
        since: Per partition, the offset to start at (the others from their beginning).

    Raises:
        TopicConfigError: the topic does not exist.
        KafkaUnavailableError: Kafka did not answer, or the read did not finish in time.
    """
    consumer = private_consumer(
        bootstrap_servers,
        "delayline-reader",
        read_committed=read_committed,
        overrides={"enable.partition.eof": True},
    )
    deadline = time.monotonic() + timeout_ms / 1000
    try:
        pending = _end_offsets(consumer, bootstrap_servers, topic, timeout_ms, deadline)
        start = {} if since is None else since
        pending = {p: end for p, end in pending.items() if end > start.get(p, 0)}
        consumer.assign([TopicPartition(topic, p, start.get(p, OFFSET_BEGINNING)) for p in pending])
        out = _read_to_ends(consumer, topic, pending, timeout_ms, deadline)
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def _end_offsets(
    consumer: Consumer, bootstrap_servers: str, topic: str, timeout_ms: int, deadline: float
) -> dict[int, int]:
    """The end offset of each partition of ``topic`` that holds records."""
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_ms / 1000)
    except KafkaException as exc:
        raise KafkaUnavailableError(f"Kafka at {bootstrap_servers} did not answer: {exc}") from exc
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        raise TopicConfigError(f"topic {topic!r} does not exist")
    ends: dict[int, int] = {}
    for p in info.partitions:
        low, high = watermarks(consumer, TopicPartition(topic, p), deadline)
        if high > low:
            ends[p] = high
    return ends


def _read_to_ends(
    consumer: Consumer, topic: str, pending: dict[int, int], timeout_ms: int, deadline: float
) -> list[ConsumedRecord]:
    """Poll until each partition in ``pending`` (partition -> end offset, emptied on
    the way) is read to its end."""
    out: list[ConsumedRecord] = []
    while pending:
        if time.monotonic() > deadline:
            raise KafkaUnavailableError(f"reading {topic} did not finish in {timeout_ms} ms")
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        error = msg.error()
        if error is not None:
            # EOF is reached early when the tail holds only transaction markers.
            if error.code() == KafkaError._PARTITION_EOF:
                pending.pop(msg.partition() or 0, None)
                continue
            raise KafkaUnavailableError(f"reading {topic}: {error}")
        record = to_consumed_record(msg)
        out.append(record)
        if record.offset + 1 >= pending.get(record.partition, 0):
            pending.pop(record.partition, None)
    return out


_NO_LEADER_YET = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)


def watermarks(consumer: Consumer, tp: TopicPartition, deadline: float) -> tuple[int, int]:
    """Low and high offsets, retrying while a just-created partition has no leader yet."""
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                tp, timeout=max(0.1, deadline - time.monotonic())
            )
            return int(low), int(high)
        except KafkaException as exc:
            error = kafka_error(exc)
            retriable = error is not None and (error.retriable() or error.code() in _NO_LEADER_YET)
            if not retriable or time.monotonic() > deadline:
                raise KafkaUnavailableError(
                    f"offsets of {tp.topic}[{tp.partition}] unavailable: {exc}"
                ) from exc
            time.sleep(0.1)


def stable_ends(
    admin: AdminClient, partitions: Iterable[tuple[str, int]], timeout_s: float
) -> dict[tuple[str, int], int]:
    """The end of each (topic, partition) for a ``read_committed`` reader, asked now: the
    last stable offset (a transaction open at this moment ends it). Retries what may
    pass (no leader yet, a broker away) until ``timeout_s``.

    Raises:
        KafkaUnavailableError: the offsets could not be read in time.
    """
    return _ends(admin, partitions, timeout_s, IsolationLevel.READ_COMMITTED)


def acknowledged_ends(
    admin: AdminClient, partitions: Iterable[tuple[str, int]], timeout_s: float
) -> dict[tuple[str, int], int]:
    """The end of each (topic, partition) asked now, open transactions included (the
    high watermark): every record Kafka acknowledged by now lies before it. A
    ``read_committed`` reader reaches it once every transaction open at this moment in
    the partition has ended. Retries as :func:`stable_ends` does.

    Raises:
        KafkaUnavailableError: the offsets could not be read in time.
    """
    return _ends(admin, partitions, timeout_s, IsolationLevel.READ_UNCOMMITTED)


def earliest_offsets(
    admin: AdminClient, partitions: Iterable[tuple[str, int]], timeout_s: float
) -> dict[tuple[str, int], int]:
    """The first offset still kept in each (topic, partition), asked through an admin
    client (see :func:`offsets_at_times`). Retries as :func:`stable_ends` does.

    Raises:
        KafkaUnavailableError: the offsets could not be read in time.
    """
    earliest = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
    return _ends(admin, partitions, timeout_s, IsolationLevel.READ_UNCOMMITTED, earliest)


def starts_at(
    admin: AdminClient,
    topics: Iterable[str],
    since_ms: int,
    positions: Mapping[tuple[str, int], int] | None,
    timeout_s: float,
) -> list[TopicPartition]:
    """Where to read each partition of ``topics`` from: its first offset whose record
    timestamp is at or after ``since_ms``, or its offset in ``positions`` where earlier
    (-1: no record that recent and no position). Topics not found are left out.

    Raises:
        KafkaUnavailableError: Kafka did not answer in time.
    """
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaUnavailableError(f"Kafka did not answer: {exc}") from exc
    wanted = {
        (topic, p): since_ms
        for topic in topics
        if (found := metadata.topics.get(topic)) is not None and found.error is None
        for p in sorted(found.partitions)
    }
    found_at = offsets_at_times(admin, wanted, timeout_s)
    known = positions or {}
    out = []
    for topic, p in wanted:
        at_time, position = found_at[(topic, p)], known.get((topic, p))
        if position is not None and not 0 <= at_time <= position:
            at_time = position  # earlier than the time's offset, or the time found none
        out.append(TopicPartition(topic, p, at_time))
    return out


def offsets_at_times(
    admin: AdminClient, times: Mapping[tuple[str, int], int], timeout_s: float
) -> dict[tuple[str, int], int]:
    """Each (topic, partition)'s first offset whose record timestamp is at or after its
    time in ``times`` (-1: none that recent), asked through an admin client: a consumer's
    own ``offsets_for_times`` waits behind the fetch it holds open on the same
    connection. Retries as :func:`stable_ends` does.

    Raises:
        KafkaUnavailableError: the offsets could not be read in time.
    """
    specs = {
        TopicPartition(topic, p): OffsetSpec.for_timestamp(ms) for (topic, p), ms in times.items()
    }
    return _list_offsets(admin, specs, timeout_s, IsolationLevel.READ_COMMITTED)


def _ends(
    admin: AdminClient,
    partitions: Iterable[tuple[str, int]],
    timeout_s: float,
    isolation: IsolationLevel,
    spec: OffsetSpec | None = None,
) -> dict[tuple[str, int], int]:
    """One ``spec`` (default: the latest offset) asked of each partition."""
    spec = spec or OffsetSpec.latest()  # type: ignore[no-untyped-call]
    return _list_offsets(
        admin, {TopicPartition(t, p): spec for t, p in partitions}, timeout_s, isolation
    )


def _list_offsets(
    admin: AdminClient,
    specs: Mapping[TopicPartition, OffsetSpec],
    timeout_s: float,
    isolation: IsolationLevel,
) -> dict[tuple[str, int], int]:
    if not specs:
        return {}
    deadline = time.monotonic() + timeout_s
    while True:
        futures = admin.list_offsets(
            dict(specs),
            isolation_level=isolation,
            request_timeout=max(0.1, deadline - time.monotonic()),
        )
        try:
            return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in futures.items()}
        except KafkaException as exc:
            error = kafka_error(exc)
            retriable = error is not None and (error.retriable() or error.code() in _NO_LEADER_YET)
            if not retriable or time.monotonic() > deadline:
                raise KafkaUnavailableError(f"offsets unavailable: {exc}") from exc
            time.sleep(0.1)


def message_headers(msg: Message) -> Headers:
    """A consumed confluent-kafka message's headers, in order."""
    raw = msg.headers() or []
    if isinstance(raw, list):
        # A consumed message's are (str, bytes | None) pairs already (confluent-kafka's
        # documented return; its stubs allow str values, which only a producer sets):
        # 80 ns against 970 per record with three headers, copied pair by pair.
        return tuple(raw)  # type: ignore[arg-type]  # no cast(): a call per record
    return tuple((name, _as_bytes(value)) for name, value in raw.items())  # a mapping


def to_consumed_record(msg: Message) -> ConsumedRecord:
    """Copy a confluent-kafka message into the library-neutral record type."""
    return ConsumedRecord(  # positional: once per record read
        msg.topic() or "",
        msg.partition() or 0,
        msg.offset() or 0,
        msg.timestamp()[1],
        _as_bytes(msg.key()),
        _as_bytes(msg.value()),
        message_headers(msg),
    )


def _as_bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value
