"""How :func:`delayline.kafka.transactions.transactional_producer` asks for a producer id
(a fake producer: the real one is in ``tests/integration/test_transactions.py``): short
asks; after the broker's "busy" answers a new producer asks at once (librdkafka itself
would ask again only 500 ms later), the old one destroyed first; an ask not answered yet
resumed; anything else raised at once."""

from __future__ import annotations

import weakref
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from delayline.kafka import transactions
from delayline.kafka.transactions import ASKS_S, transactional_producer


class FakeProducer:
    """Answers each ``init_transactions`` with the next of ``answers`` (an error or
    None); an error comes once the time it was given passed on :data:`CLOCK`."""

    made: ClassVar[list[weakref.ref[FakeProducer]]] = []
    answers: ClassVar[list[KafkaError | None]] = []
    asked: ClassVar[list[tuple[int, float]]] = []
    """(which producer, how long) of each ask."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.number = len(FakeProducer.made)
        self.metadata_read = False
        FakeProducer.made.append(weakref.ref(self))

    def list_topics(self, timeout: float) -> None:
        self.metadata_read = True

    def init_transactions(self, timeout: float) -> None:
        assert self.metadata_read, "asked before a connection was up"
        FakeProducer.asked.append((self.number, timeout))
        error = FakeProducer.answers.pop(0)
        if error is not None:
            CLOCK[0] += timeout
            raise KafkaException(error)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeProducer]:
    FakeProducer.made, FakeProducer.asked = [], []
    monkeypatch.setattr(transactions, "Producer", FakeProducer)
    return FakeProducer


SETTINGS = {"bootstrap.servers": "b:9092", "transactional.id": "t"}
CLOCK = [1000.0]
TIMED_OUT = KafkaError(KafkaError._TIMED_OUT)
"""An ask the broker has not answered yet."""
ABORTING = KafkaError(KafkaError.CONCURRENT_TRANSACTIONS, retriable=True)
"""What ``init_transactions`` raises when its time is up while the broker aborts an
open transaction: the broker's last answer, retriable."""
NO_COORDINATOR = KafkaError(KafkaError.NOT_COORDINATOR, retriable=True)


def clock_s() -> float:
    return CLOCK[0]


def alive(fake: type[FakeProducer]) -> list[int]:
    return [p.number for ref in fake.made if (p := ref()) is not None]


def test_the_first_ask_that_answers_gives_the_producer(fake: type[FakeProducer]) -> None:
    fake.answers = [None]
    producer: Any = transactional_producer(SETTINGS, 30, clock_s=clock_s)
    assert fake.asked == [(0, ASKS_S[0])]
    assert alive(fake) == [0]
    assert producer.settings == SETTINGS


def test_after_a_busy_answer_a_new_producer_asks_and_the_old_is_gone_first(
    fake: type[FakeProducer],
) -> None:
    fake.answers = [ABORTING, None]
    producer: Any = transactional_producer(SETTINGS, 30, clock_s=clock_s)
    assert fake.asked == [(0, ASKS_S[0]), (1, ASKS_S[1])]
    assert producer.number == 1
    assert alive(fake) == [1]


def test_an_ask_not_answered_yet_is_resumed_by_the_same_producer(
    fake: type[FakeProducer],
) -> None:
    fake.answers = [TIMED_OUT, NO_COORDINATOR, None]
    transactional_producer(SETTINGS, 30, clock_s=clock_s)
    assert fake.asked == [(0, ASKS_S[0]), (0, ASKS_S[1]), (0, ASKS_S[2])]


def test_after_the_early_asks_the_last_waits_for_the_rest_of_the_timeout(
    fake: type[FakeProducer],
) -> None:
    fake.answers = [*[ABORTING] * len(ASKS_S), None]
    producer: Any = transactional_producer(SETTINGS, 30, clock_s=clock_s)
    assert [n for n, _ in fake.asked] == [0, 1, 2, 3]
    assert fake.asked[-1][1] == pytest.approx(30 - sum(ASKS_S))
    assert alive(fake) == [producer.number] == [3]


def test_anything_else_is_raised_at_once_and_the_producer_destroyed(
    fake: type[FakeProducer],
) -> None:
    fake.answers = [KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    with pytest.raises(KafkaException) as raised:
        transactional_producer(SETTINGS, 30, clock_s=clock_s)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert len(fake.asked) == 1
    del raised  # its traceback holds the frame
    assert alive(fake) == []


def test_the_timeout_bounds_the_asks(fake: type[FakeProducer]) -> None:
    fake.answers = [ABORTING]
    with pytest.raises(KafkaException):
        transactional_producer(SETTINGS, 0.01, clock_s=clock_s)
    ((number, asked_s),) = fake.asked
    assert number == 0
    assert asked_s == pytest.approx(0.01)


def test_a_last_ask_that_fails_destroys_its_producer(fake: type[FakeProducer]) -> None:
    fake.answers = [TIMED_OUT] * (len(ASKS_S) + 1)
    with pytest.raises(KafkaException):
        transactional_producer(SETTINGS, 30, clock_s=clock_s)
    assert len(fake.asked) == len(ASKS_S) + 1
    assert alive(fake) == []
