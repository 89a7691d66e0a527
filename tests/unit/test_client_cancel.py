"""The blocking client's cancel waits for Kafka's acknowledgement of its record by
default, bounded by ``delivery_timeout_ms``; ``wait=False`` only queues it. A stand-in
producer answers (or not) as a broker would."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from delayline.client import ClientConfig, Scheduler, Written
from delayline.client.aio import Written as AioWritten
from delayline.errors import DeliveryError, KafkaUnavailableError

TOPIC = "delayline-schedules"


@dataclass
class Message:
    partition_: int
    offset_: int

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return self.partition_

    def offset(self) -> int:
        return self.offset_


@dataclass
class Producer:
    """Answers each record on ``poll``/``flush``: acknowledged at the next offset, or
    refused with ``refuse``; ``silent`` answers nothing until it is cleared."""

    refuse: str | None = None
    silent: bool = False
    queued: list[tuple[dict[str, Any], Callable[[Any, Any], None]]] = field(default_factory=list)
    offset: int = 41

    def produce(self, topic: str, value: Any = None, key: Any = None, **record: Any) -> None:
        record.update(topic=topic, value=value, key=key)
        self.queued.append((record, record["on_delivery"]))

    def poll(self, timeout: float = 0) -> int:
        if self.silent:
            time.sleep(timeout)
            return 0
        served, self.queued = self.queued, []
        for record, on_delivery in served:
            self.offset += 1
            on_delivery(self.refuse, Message(record["partition"], self.offset))
        return len(served)

    def flush(self, timeout: float = 0) -> int:
        self.poll(0)
        return len(self.queued)


@pytest.fixture
def producer() -> Producer:
    return Producer()


@pytest.fixture
def scheduler(producer: Producer) -> Iterator[Scheduler]:
    made = Scheduler(ClientConfig(bootstrap_servers="127.0.0.1:9", delivery_timeout_ms=300))
    made._core.producer = producer  # type: ignore[assignment]
    made._core._partitions = 3  # the schedules topic's, as if looked up
    yield made
    producer.silent = False
    made.close()


def test_a_cancel_returns_where_kafka_stored_it(scheduler: Scheduler, producer: Producer) -> None:
    written = scheduler.cancel("order-7")
    assert written == Written("order-7", TOPIC, written.partition, 42, None)
    assert producer.queued == []  # answered before it returned
    assert Written is AioWritten  # one class, importable from either place


def test_a_refused_cancel_raises_once(scheduler: Scheduler, producer: Producer) -> None:
    producer.refuse = "Broker: Topic authorization failed"
    with pytest.raises(DeliveryError) as refused:
        scheduler.cancel("order-7", partition=2)
    assert refused.value.failures == [("order-7", "Broker: Topic authorization failed")]
    scheduler.flush()  # reported by the cancel, not again


def test_an_unacknowledged_cancel_raises_within_the_delivery_timeout(
    scheduler: Scheduler, producer: Producer
) -> None:
    producer.silent = True
    began = time.monotonic()
    with pytest.raises(KafkaUnavailableError, match="not acknowledged within 300 ms"):
        scheduler.cancel("order-7")
    assert time.monotonic() - began < 2
    producer.silent, producer.refuse = False, "Local: Message timed out"
    with pytest.raises(DeliveryError, match="order-7"):  # its late failure, at the flush
        scheduler.flush()


def test_wait_false_only_queues(scheduler: Scheduler, producer: Producer) -> None:
    producer.silent = True
    assert scheduler.cancel("order-7", wait=False) is None
    assert len(producer.queued) == 1
    producer.silent = False
    scheduler.flush()
