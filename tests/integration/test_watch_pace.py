"""The relaxed watch (:mod:`delayline.committer.watch_pace`) pauses its consumer's
partitions between looks: a pause drops what the client fetched and the watch had not
read yet, and a resume fetches it again from the last record read. Checked here against
the broker, with records fetched ahead when the pause comes."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from delayline.dev.testing import unique_topic
from delayline.kafka.config import kafka_client_config
from delayline.kafka.topics import create_topic


def test_a_paused_and_resumed_partition_is_read_on_from_the_last_record_read(
    kafka_bootstrap: str,
) -> None:
    topic = unique_topic("paced")
    create_topic(kafka_bootstrap, topic)
    producer = Producer(kafka_client_config(kafka_bootstrap))
    for i in range(5_000):
        producer.produce(topic, b"%d" % i, partition=0)
    producer.flush(30)
    consumer = Consumer(
        kafka_client_config(
            kafka_bootstrap,
            **{
                "group.id": unique_topic("group"),
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            },
        )
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read: list[int] = []
        while len(read) < 10:
            read += [m.offset() or 0 for m in consumer.consume(10, 1) if m.error() is None]
        time.sleep(0.5)  # the client fetches far ahead meanwhile
        consumer.pause(consumer.assignment())
        for _ in range(100):
            producer.produce(topic, b"later", partition=0)
        producer.flush(30)
        consumer.resume(consumer.assignment())
        deadline = time.monotonic() + 30
        while len(read) < 5_100 and time.monotonic() < deadline:
            read += [m.offset() or 0 for m in consumer.consume(1_000, 0.2) if m.error() is None]
        assert read == list(range(5_100))
    finally:
        consumer.close()
