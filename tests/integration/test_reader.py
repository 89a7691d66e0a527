"""Reading a topic to its ends (:func:`delayline.kafka.reader.read_topic`) on a real broker."""

from __future__ import annotations

from confluent_kafka import Producer
from tests.support import ends_now

from delayline.dev.testing import create_topic, unique_topic
from delayline.kafka.reader import read_topic


def _write(bootstrap: str, topic: str, values: list[tuple[int, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, value in values:
        producer.produce(topic, key=b"k", value=value, partition=partition)
    assert producer.flush(10) == 0


def test_since_reads_only_what_was_written_after_each_partitions_start(
    kafka_bootstrap: str,
) -> None:
    topic = create_topic(kafka_bootstrap, unique_topic("read-since"), partitions=3)
    _write(kafka_bootstrap, topic, [(0, b"a0"), (0, b"a1"), (1, b"b0"), (2, b"c0")])
    ends = ends_now(kafka_bootstrap, topic)
    assert ends == {0: 2, 1: 1, 2: 1}
    _write(kafka_bootstrap, topic, [(0, b"a2"), (2, b"c1")])

    after = read_topic(kafka_bootstrap, topic, since=ends)
    assert [(r.partition, r.offset, r.value) for r in after] == [(0, 2, b"a2"), (2, 1, b"c1")]
    # A partition left out of ``since`` is read from its beginning.
    partly = read_topic(kafka_bootstrap, topic, since={0: 2})
    assert [(r.partition, r.value) for r in partly] == [(0, b"a2"), (1, b"b0"), (2, b"c0"),
                                                       (2, b"c1")]  # fmt: skip
    assert len(read_topic(kafka_bootstrap, topic)) == 6
    assert read_topic(kafka_bootstrap, topic, since=ends_now(kafka_bootstrap, topic)) == []
