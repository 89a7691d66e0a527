"""A transactional producer from :func:`delayline.kafka.transactions.transactional_producer`
on a real broker: it fences the producer it replaces and aborts what that one left open,
asking again with a new producer while the broker aborts it."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaException

from delayline.dev.testing import create_topic, unique_topic
from delayline.kafka.config import kafka_client_config
from delayline.kafka.reader import read_topic
from delayline.kafka.transactions import transactional_producer


def test_a_new_producer_fences_the_old_and_aborts_its_open_transaction(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = create_topic(kafka_bootstrap, unique_topic("txn"), partitions=1)
    settings = kafka_client_config(kafka_bootstrap, **{"transactional.id": unique_topic("tid")})
    old = transactional_producer(settings, 30)
    old.begin_transaction()
    old.produce(topic, value=b"left open", partition=0)
    assert old.flush(10) == 0

    with caplog.at_level(logging.DEBUG, logger="delayline.kafka.transactions"):
        new = transactional_producer(settings, 30)
    # The broker refuses the first ask while it aborts the open transaction: a new
    # producer asked again.
    assert "asking again" in caplog.text
    new.begin_transaction()
    new.produce(topic, value=b"committed", partition=0)
    new.commit_transaction(10)

    with pytest.raises(KafkaException):
        old.commit_transaction(10)  # fenced
    assert [r.value for r in read_topic(kafka_bootstrap, topic)] == [b"committed"]
    # A read_uncommitted reader sees the aborted record too, and it is over: no open
    # transaction holds the partition back.
    raw = read_topic(kafka_bootstrap, topic, read_committed=False)
    assert [r.value for r in raw] == [b"left open", b"committed"]
    new.close()


def test_a_fresh_id_is_ready_and_writes(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, unique_topic("txn"), partitions=1)
    settings = kafka_client_config(kafka_bootstrap, **{"transactional.id": unique_topic("tid")})
    producer = transactional_producer(settings, 30)
    producer.begin_transaction()
    producer.produce(topic, value=b"one", partition=0)
    producer.commit_transaction(10)
    assert [r.value for r in read_topic(kafka_bootstrap, topic)] == [b"one"]
    producer.close()
