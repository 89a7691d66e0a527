"""How :func:`delayline.kafka.transactions.transactional_producer` asks for a producer id:
a short ask, then a new producer (librdkafka itself would ask again only 500 ms later);
anything but a timeout raised at once (a fake producer: the real one is in
``tests/integration/test_transactions.py``)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from delayline.kafka import transactions
from delayline.kafka.transactions import ASKS_S, transactional_producer


class FakeProducer:
    """Answers ``init_transactions`` with the next of ``answers`` (an error or None); an
    error comes once the time it was given passed on :data:`CLOCK`."""

    made: ClassVar[list[FakeProducer]] = []
    answers: ClassVar[list[KafkaError | None]] = []

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.asked: list[float] = []
        self.closed = False
        self.metadata_read = False
        FakeProducer.made.append(self)

    def list_topics(self, timeout: float) -> None:
        self.metadata_read = True

    def init_transactions(self, timeout: float) -> None:
        self.asked.append(timeout)
        error = FakeProducer.answers.pop(0)
        if error is not None:
            CLOCK[0] += timeout
            raise KafkaException(error)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeProducer]:
    FakeProducer.made = []
    monkeypatch.setattr(transactions, "Producer", FakeProducer)
    return FakeProducer


SETTINGS = {"bootstrap.servers": "b:9092", "transactional.id": "t"}
TIMED_OUT = KafkaError(KafkaError._TIMED_OUT)
ABORTING = KafkaError(KafkaError.CONCURRENT_TRANSACTIONS, retriable=True)
"""What ``init_transactions`` raises on a timeout while the broker aborts an open
transaction: the broker's last answer, retriable."""
CLOCK = [1000.0]


def clock_s() -> float:
    return CLOCK[0]


def test_the_first_ask_that_answers_gives_the_producer(fake: type[FakeProducer]) -> None:
    fake.answers = [None]
    producer: Any = transactional_producer(SETTINGS, 30, clock_s=clock_s)
    assert fake.made == [producer]
    assert producer.asked == [ASKS_S[0]]
    assert producer.metadata_read
    assert not producer.closed
    assert producer.settings == SETTINGS


def test_a_timed_out_ask_closes_its_producer_and_a_new_one_asks(
    fake: type[FakeProducer],
) -> None:
    fake.answers = [ABORTING, TIMED_OUT, None]
    producer: Any = transactional_producer(SETTINGS, 30, clock_s=clock_s)
    assert [p.asked for p in fake.made] == [[ASKS_S[0]], [ASKS_S[1]], [ASKS_S[2]]]
    assert [p.closed for p in fake.made] == [True, True, False]
    assert producer is fake.made[-1]


def test_after_the_early_asks_the_last_waits_for_the_rest_of_the_timeout(
    fake: type[FakeProducer],
) -> None:
    fake.answers = [TIMED_OUT] * len(ASKS_S) + [None]
    transactional_producer(SETTINGS, 30, clock_s=clock_s)
    assert len(fake.made) == len(ASKS_S) + 1
    assert fake.made[-1].asked == [pytest.approx(30 - sum(ASKS_S))]


def test_anything_but_a_timeout_is_raised_at_once(fake: type[FakeProducer]) -> None:
    fake.answers = [KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    with pytest.raises(KafkaException) as raised:
        transactional_producer(SETTINGS, 30, clock_s=clock_s)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert len(fake.made) == 1
    assert fake.made[0].closed


def test_the_timeout_bounds_the_asks(fake: type[FakeProducer]) -> None:
    fake.answers = [ABORTING]
    with pytest.raises(KafkaException):
        transactional_producer(SETTINGS, 0.01, clock_s=clock_s)
    assert fake.made[0].asked == [pytest.approx(0.01)]
    assert fake.made[0].closed
