"""Queueing a record: what reaches the client, for confluent-kafka's producer and others."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer, SerializingProducer

from delayline.contract import OutgoingRecord
from delayline.kafka.produce import produce

NO_BROKER = {"bootstrap.servers": "127.0.0.1:9", "log_level": 0}


class Recording:
    """Not confluent-kafka's producer: notes each call's arguments."""

    def __init__(self, full: int = 0) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.full = full  # calls answered "queue full" first
        self.polls = 0

    def produce(self, *args: Any, **kwargs: Any) -> None:
        if self.full:
            self.full -= 1
            raise BufferError("queue full")
        self.calls.append((args, kwargs))

    def poll(self, _timeout: float) -> int:
        self.polls += 1
        return 0


def _callback(_err: Any, _msg: Any) -> None:
    pass


@pytest.mark.parametrize(
    ("partition", "timestamp", "headers", "on_delivery"),
    list(itertools.product((None, 0, 3), (None, 0, 1234), ((), (("h", b"v"),)), (None, _callback))),
)
def test_another_producer_gets_every_argument_by_name(
    partition: int | None, timestamp: int | None, headers: Any, on_delivery: Any
) -> None:
    client = Recording()
    record = OutgoingRecord("t", b"key", b"value", headers, partition, timestamp)
    produce(client, record, on_delivery)  # type: ignore[arg-type]
    assert client.calls == [
        (
            (),
            {
                "topic": "t",
                "value": b"value",
                "key": b"key",
                "partition": -1 if partition is None else partition,
                "on_delivery": on_delivery,
                "timestamp": timestamp or 0,
                "headers": list(headers),
            },
        )
    ]


def test_a_full_queue_is_waited_for() -> None:
    client = Recording(full=2)
    produce(client, OutgoingRecord("t", None, None), None)  # type: ignore[arg-type]
    assert client.polls == 2
    assert len(client.calls) == 1


@pytest.mark.parametrize("kind", [Producer, SerializingProducer])
def test_key_value_and_partition_reach_the_client_in_place(kind: type[Producer]) -> None:
    """confluent-kafka's producer takes them by position, a subclass by name (its
    ``SerializingProducer`` takes the key first): the message queued has each in place.
    Purged unsent, each reports back what was queued."""
    client = kind(NO_BROKER)
    seen: list[tuple[str | None, bytes | None, bytes | None, int | None]] = []

    def report(err: Any, msg: Any) -> None:
        assert err.code() == KafkaError._PURGE_QUEUE
        seen.append((msg.topic(), msg.key(), msg.value(), msg.partition()))

    produce(client, OutgoingRecord("t", b"key", b"value", (("h", b"v"),), 3, 1234), report)
    produce(client, OutgoingRecord("t", b"tomb", None, (), 1), report)
    client.purge()
    client.poll(0)
    assert seen == [("t", b"key", b"value", 3), ("t", b"tomb", None, 1)]
