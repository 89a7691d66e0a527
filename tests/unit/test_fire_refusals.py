"""Refused deliveries: found before producing or from a failed attempt, then dead-lettered."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException
from hypothesis import given
from hypothesis import strategies as st

from delayline.contract import ConsumedRecord, OutgoingRecord
from delayline.contract import events as r
from delayline.core.model import Schedule, SourceRef
from delayline.fire import transactional as tx
from delayline.fire.firing import Firing
from delayline.fire.partition import to_records
from delayline.fire.record_size import batch_size, size_bound
from delayline.fire.refusals import Failure, Sent, TopicFacts, classify, precheck
from delayline.fire.topic_catalog import TopicCatalog
from delayline.fire.transactional import Committed, FireConfig, FireError, TransactionalFirer
from delayline.kafka import transactions

MISSING = Failure(KafkaError.UNKNOWN_TOPIC_OR_PART, "UNKNOWN_TOPIC_OR_PART", "Broker: Unknown")
DENIED = Failure(
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    "TOPIC_AUTHORIZATION_FAILED",
    "Failed to add partition(s) to transaction: Broker: Topic authorization failed",
)
TOO_LARGE = Failure(KafkaError.MSG_SIZE_TOO_LARGE, "MSG_SIZE_TOO_LARGE", "Broker: too large")
PURGED = Failure(KafkaError._PURGE_QUEUE, "_PURGE_QUEUE", "Local: Purged in queue")
TIMED_OUT = Failure(KafkaError._MSG_TIMED_OUT, "_MSG_TIMED_OUT", "Local: Message timed out")


def schedule(sid: str, topic: str, payload: bytes = b"p", key: bytes | None = b"k") -> Schedule:
    headers = (("scheduler-epoch", b"1"), ("scheduler-target-topic", topic.encode()), ("x", b"y"))
    return Schedule(sid, 1_000, topic, key, payload, headers, SourceRef("sched", 1, 7, 500))


def rec(topic: str, value: bytes = b"v", key: bytes | None = b"k") -> OutgoingRecord:
    return OutgoingRecord(topic, key, value)


class FakeDescribe:
    """A cluster as facts by topic; counts what was asked."""

    def __init__(self, facts: dict[str, TopicFacts | None]) -> None:
        self.facts = facts
        self.asked: list[tuple[tuple[str, ...], bool]] = []

    def __call__(
        self, topics: Collection[str], authorization: bool
    ) -> Mapping[str, TopicFacts | None]:
        self.asked.append((tuple(sorted(topics)), authorization))
        facts = {t: self.facts.get(t) for t in topics}
        if authorization:
            return facts
        return {t: f and dataclasses.replace(f, writable=None) for t, f in facts.items()}


# --- sizes and the pre-check -------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "headers", "size"),
    [
        # Measured against Kafka 4.1: 1024 passes max.message.bytes=1024, 1025 fails.
        (None, b"v" * 954, (), 1024),
        (None, b"v" * 955, (), 1025),
        (b"k", b"v" * 953, (), 1024),
        (None, b"v" * 902, (("scheduler-epoch", b"1893456000.250"), ("x", None), ("scheduler-key", b"abc")), 1024),
        (b"k", b"v" * 902, (("scheduler-epoch", b"1893456000.250"), ("x", None), ("scheduler-key", b"abc")), 1025),
    ],
)  # fmt: skip
def test_batch_size_is_what_the_broker_compares_with_max_message_bytes(
    key: bytes | None, value: bytes, headers: tuple[tuple[str, bytes | None], ...], size: int
) -> None:
    assert batch_size(OutgoingRecord("t", key, value, headers)) == size


def test_precheck_refuses_internal_missing_too_large_and_keyless_on_compacted() -> None:
    deliveries = {
        0: rec("__consumer_offsets"),
        1: rec("gone"),
        2: rec("small", b"x" * 2000),
        3: rec("small", b"x" * 10),
        4: rec("compacted", key=None),
        5: rec("compacted"),
        6: rec("unknown"),
    }
    facts: dict[str, TopicFacts | None] = {
        "gone": TopicFacts(error=MISSING),
        "small": TopicFacts(max_message_bytes=1024),
        "compacted": TopicFacts(compacted=True),
        "unknown": None,
    }
    refused = precheck(deliveries, facts)
    assert set(refused) == {0, 1, 2, 4}
    assert "'__consumer_offsets'" in refused[0]
    assert "internal" in refused[0]
    assert refused[1] == "delivery to topic 'gone' refused: UNKNOWN_TOPIC_OR_PART: Broker: Unknown"
    assert refused[2].startswith("delivery to topic 'small' refused: MSG_SIZE_TOO_LARGE: ")
    assert "max.message.bytes of 1024" in refused[2]
    assert "INVALID_RECORD" in refused[4]
    assert "'compacted'" in refused[4]


def test_a_target_outside_the_allowed_pattern_is_refused_without_asking_the_cluster() -> None:
    cluster = FakeDescribe({"orders.eu": TopicFacts(), "payments": TopicFacts()})
    catalog = TopicCatalog(cluster, allowed=r"orders\..*|billing-.*")
    deliveries = {0: rec("orders.eu"), 1: rec("payments"), 2: rec("orders"), 3: rec("xorders.eu")}
    refused = catalog.check(deliveries)
    assert set(refused) == {1, 2, 3}  # matched against the whole name
    assert refused[1] == (
        "delivery to topic 'payments' refused: the target topic is not allowed: 'payments' "
        "does not match --allowed-target-topics 'orders\\..*|billing-.*'"
    )
    assert cluster.asked == [(("orders.eu",), True)]  # nothing about the refused ones
    assert TopicCatalog(cluster).check({1: rec("payments")}) == {}  # no pattern: any topic


def test_catalog_keeps_facts_that_allow_delivery_and_rereads_those_that_refuse() -> None:
    now = [0]
    cluster = FakeDescribe(
        {"ok": TopicFacts(max_message_bytes=1_000_000), "gone": TopicFacts(error=MISSING)}
    )
    catalog = TopicCatalog(cluster, ttl_ms=60_000, clock=lambda: now[0])
    assert set(catalog.check({0: rec("ok"), 1: rec("gone")})) == {1}
    assert cluster.asked == [(("gone", "ok"), True)]  # write authorisation asked up front
    now[0] = 59_000
    assert set(catalog.check({0: rec("ok"), 1: rec("gone")})) == {1}
    assert cluster.asked[1:] == [(("gone",), True)]  # "ok" from the cache
    cluster.facts["gone"] = TopicFacts()  # created meanwhile: delivered at once
    assert catalog.check({1: rec("gone")}) == {}
    now[0] = 61_000
    catalog.check({0: rec("ok")})
    assert cluster.asked[-1] == (("ok",), True)  # expired


def test_catalog_rereads_a_cached_limit_before_refusing_by_it() -> None:
    cluster = FakeDescribe({"t": TopicFacts(max_message_bytes=1024)})
    catalog = TopicCatalog(cluster, clock=lambda: 0)
    assert catalog.check({0: rec("t")}) == {}
    cluster.facts["t"] = TopicFacts(max_message_bytes=1_000_000)  # limit raised
    assert catalog.check({0: rec("t", b"x" * 4000)}) == {}
    assert len(cluster.asked) == 2
    assert set(catalog.check({0: rec("t", b"x" * 2_000_000)})) == {0}


# --- reading a failed attempt --------------------------------------------------------


def delivery(i: int, topic: str, error: Failure | None = None, **kw: Any) -> Sent:
    return Sent(rec(topic), i, f"s{i}", error=error, **kw)


def test_a_batch_error_is_a_records_own_only_when_it_was_alone_or_over_the_limit() -> None:
    catalog = TopicCatalog(FakeDescribe({}))
    verdict = classify(
        [
            delivery(0, "a", TOO_LARGE),
            delivery(1, "b", TOO_LARGE, alone=True),
            Sent(rec("history"), error=TOO_LARGE),
        ],
        Failure(KafkaError.MSG_SIZE_TOO_LARGE, "MSG_SIZE_TOO_LARGE", "current txn must abort"),
        catalog,
    )
    assert verdict.refused == {
        1: "delivery to topic 'b' refused: MSG_SIZE_TOO_LARGE: Broker: too large"
    }
    assert verdict.serial == {"a", "history"}
    assert verdict.problems == []
    # Over the known limit: refused at once.
    limits = TopicCatalog(FakeDescribe({"a": TopicFacts(max_message_bytes=20)}), clock=lambda: 0)
    limits.check({0: rec("a")})
    big = Sent(rec("a", b"x" * 100), 0, "s0", error=TOO_LARGE)
    assert set(classify([big], None, limits).refused) == {0}
    # delayline's own record alone and too large: not a refusal, a problem.
    own = classify([Sent(rec("dlq"), error=TOO_LARGE, alone=True)], None, catalog)
    assert own.problems == ["record to topic 'dlq': MSG_SIZE_TOO_LARGE: Broker: too large"]


def test_a_transaction_refused_for_a_topic_is_pinned_on_the_purged_topics_that_refuse() -> None:
    cluster = FakeDescribe(
        {"denied": TopicFacts(writable=False), "fine": TopicFacts(writable=True)}
    )
    sent = [
        delivery(0, "fine", PURGED),
        delivery(1, "denied", PURGED),
        delivery(2, "denied"),
        delivery(3, "fine"),
        Sent(rec("sched"), error=PURGED),
    ]
    verdict = classify(sent, DENIED, TopicCatalog(cluster))
    reason = f"delivery to topic 'denied' refused: TOPIC_AUTHORIZATION_FAILED: {DENIED.text}"
    assert verdict.refused == {1: reason, 2: reason}
    assert verdict.problems == []
    assert cluster.asked == [(("denied", "fine"), True)]  # fresh, with authorisation
    # Nothing confirmed: the batch fails, naming the transaction's error.
    cluster.facts["denied"] = TopicFacts(writable=True)
    verdict = classify(sent, DENIED, TopicCatalog(cluster))
    assert verdict.refused == {}
    assert verdict.problems == [f"transaction failed: TOPIC_AUTHORIZATION_FAILED: {DENIED.text}"]


def test_a_records_topic_error_counts_unless_fresh_facts_contradict_it() -> None:
    cluster = FakeDescribe({"gone": TopicFacts(error=MISSING), "back": TopicFacts()})
    verdict = classify(
        [delivery(0, "gone", MISSING), delivery(1, "back", MISSING), delivery(2, "gone")],
        None,
        TopicCatalog(cluster),
    )
    assert set(verdict.refused) == {0, 2}
    assert verdict.problems == ["topic 'back': UNKNOWN_TOPIC_OR_PART: Broker: Unknown"]


def test_any_other_error_is_a_problem_naming_the_schedule_and_topic() -> None:
    verdict = classify(
        [delivery(0, "t", TIMED_OUT), Sent(rec("sched"), error=MISSING)],
        None,
        TopicCatalog(FakeDescribe({})),
    )
    assert verdict.refused == {}
    assert verdict.problems == [
        "schedule 's0' to topic 't': _MSG_TIMED_OUT: Local: Message timed out",
        "record to topic 'sched': UNKNOWN_TOPIC_OR_PART: Broker: Unknown",
    ]


# --- firings and the transactional writer --------------------------------------------


def test_a_firing_writes_what_a_fire_event_always_wrote() -> None:
    s = schedule("id-1", "orders")
    row = r.schedule_event(r.Kind.RAISE, s, at_ms=2_000)

    class Config:
        class topology:  # noqa: N801 - stands in for the Topology attribute
            history_topic = "hist"
            dead_letter_topic = "dlq"

    assert Firing(s, "dlq", "hist").records() == to_records(row, Config)  # type: ignore[arg-type]
    assert Firing(s, "dlq").records() == to_records(row, Config)[:2]  # type: ignore[arg-type]


def test_a_refused_firing_is_its_dead_letter_and_tombstone() -> None:
    s = schedule("id-1", "orders", payload=b"pay")
    dead, tomb = Firing(s, "dlq", "hist").refused("why")
    assert (dead.topic, dead.key, dead.value) == ("dlq", b"id-1", b"pay")
    assert dead.headers == (
        *s.headers,
        ("delayline-error", b"why"),
        ("delayline-source", b"sched/1/7"),
    )
    assert (tomb.topic, tomb.partition, tomb.key, tomb.value) == ("sched", 1, b"id-1", None)


class Placement:
    """Where the toy broker put a record (a delivered message's partition and offset)."""

    def __init__(self, record: OutgoingRecord, offset: int) -> None:
        self._partition = record.partition or 0
        self._offset = offset

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


class FakeProducer:
    """A transactional producer over a toy broker: topics in ``denied`` fail the
    transaction (their records are purged, as when the coordinator refuses to add the
    partition); a batch (records of one topic between flushes) larger than ``limits``
    fails whole; ``broken`` topics time out."""

    denied: ClassVar[set[str]] = set()
    limits: ClassVar[dict[str, int]] = {}
    broken: ClassVar[set[str]] = set()
    eager: ClassVar[bool] = False  # the denial arrives while records are still produced

    def __init__(self, _config: dict[str, Any]) -> None:
        self.queue: list[tuple[OutgoingRecord, Any]] = []
        self.txn_error: KafkaError | None = None
        self.failed = 0
        self.committed: list[list[OutgoingRecord]] = []
        self.attempts = 0
        self.open: list[OutgoingRecord] = []
        self.reported = 0  # delivery reports asked for

    def list_topics(self, topic: str | None = None, *, timeout: float = -1) -> None:
        if topic in self.broken:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no answer"))

    def init_transactions(self, _timeout: float) -> None:
        pass

    def begin_transaction(self) -> None:
        self.attempts += 1
        self.txn_error, self.failed, self.open = None, 0, []

    def produce(  # confluent-kafka's: topic, value and key by position, the rest by name
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        headers: Any = (),
        on_delivery: Any = None,
        **kw: Any,
    ) -> None:
        if self.eager and self.txn_error is not None:
            raise KafkaException(KafkaError(KafkaError._STATE, "transaction in error state"))
        if self.eager and topic in self.denied:
            self.txn_error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied early")
        self.queue.append(
            (OutgoingRecord(topic, key, value, tuple(headers), _assigned(kw)), on_delivery)
        )

    def flush(self, _timeout: float = 0) -> int:
        by_topic: dict[str, list[tuple[OutgoingRecord, Any]]] = {}
        for item in self.queue:
            by_topic.setdefault(item[0].topic, []).append(item)
        self.queue = []
        for topic, items in by_topic.items():
            size = sum(batch_size(record) for record, _ in items)
            err = None
            if topic in self.denied:
                err = KafkaError(KafkaError._PURGE_QUEUE)
                self.txn_error = KafkaError(
                    KafkaError.TOPIC_AUTHORIZATION_FAILED,
                    "add partitions: Topic authorization failed",
                )
            elif topic in self.broken:
                err = KafkaError(KafkaError._MSG_TIMED_OUT)
            elif size > self.limits.get(topic, 10**9):
                err = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
            for record, callback in items:
                if err is None:
                    self.open.append(record)
                else:
                    self.failed += 1
                if callback is not None:  # librdkafka reports only where asked
                    self.reported += 1
                    callback(err, None if err else Placement(record, len(self.open) - 1))
        return 0

    def commit_transaction(self, _timeout: float) -> None:
        if self.txn_error is not None or self.failed:
            raise KafkaException(self.txn_error or KafkaError(KafkaError._INCONSISTENT))
        self.committed.append(self.open)

    def abort_transaction(self, _timeout: float) -> None:
        self.open = []

    def poll(self, _timeout: float) -> int:
        return 0


@pytest.fixture
def firer(monkeypatch: pytest.MonkeyPatch) -> TransactionalFirer:
    monkeypatch.setattr(transactions, "Producer", FakeProducer)
    monkeypatch.setattr(FakeProducer, "denied", {"denied"})
    monkeypatch.setattr(FakeProducer, "limits", {"small": 1024})
    monkeypatch.setattr(FakeProducer, "broken", {"broken"})
    facts: dict[str, TopicFacts | None] = {
        "denied": TopicFacts(writable=False), "small": TopicFacts(max_message_bytes=1024),
        "good": TopicFacts(), "broken": TopicFacts(), "gone": TopicFacts(error=MISSING),
    }  # fmt: skip
    firer = TransactionalFirer(FireConfig("kafka:9092", "commits", "tx"), FakeDescribe(facts))
    firer._committed["run"] = 4
    return firer


def committed(firer: TransactionalFirer) -> list[OutgoingRecord]:
    producer: FakeProducer = firer._producer.producer  # type: ignore[assignment]
    (records,) = producer.committed
    return records


def test_one_batch_with_refused_deliveries_commits_the_rest_once(
    firer: TransactionalFirer, caplog: pytest.LogCaptureFixture
) -> None:
    batch: list[OutgoingRecord | Firing] = [
        Firing(schedule("good-1", "good"), "dlq", "hist"),
        Firing(schedule("denied-1", "denied"), "dlq", "hist"),
        Firing(schedule("gone-1", "gone"), "dlq", "hist"),
        Firing(schedule("big-1", "small", b"x" * 3000), "dlq", "hist"),
        OutgoingRecord("dlq", b"bad", b"junk"),
        Firing(schedule("good-2", "good"), "dlq", "hist"),
    ]
    caplog.set_level("INFO", logger="delayline.fire.transactional")
    outcome = firer.commit_batch("run", 5, batch)
    assert not outcome.replay
    assert sorted(outcome.refused) == [1, 2, 3]  # positions of the refused firings
    assert "TOPIC_AUTHORIZATION_FAILED" in outcome.refused[1]
    assert "UNKNOWN_TOPIC_OR_PART" in outcome.refused[2]
    assert "MSG_SIZE_TOO_LARGE" in outcome.refused[3]
    # Every refusal is known before producing (write authorisation included): one attempt.
    assert firer._producer.producer.attempts == 1  # type: ignore[attr-defined]
    assert firer._producer.producer.reported == 0  # type: ignore[attr-defined]  # no Python per record
    out = committed(firer)
    assert [(o.topic, o.key) for o in out if o.topic == "good"] == [("good", b"k")] * 2
    assert {o.key for o in out if o.topic == "hist"} == {b"good-1", b"good-2"}
    dead = {
        o.key: (dict(o.headers)["delayline-error"] or b"").decode()
        for o in out
        if o.topic == "dlq" and o.key != b"bad"
    }
    assert set(dead) == {b"denied-1", b"gone-1", b"big-1"}
    for sid, error, topic in [
        (b"denied-1", "TOPIC_AUTHORIZATION_FAILED", "denied"),
        (b"gone-1", "UNKNOWN_TOPIC_OR_PART", "gone"),
        (b"big-1", "MSG_SIZE_TOO_LARGE", "small"),
    ]:
        assert error in dead[sid]
        assert f"delivery to topic {topic!r} refused" in dead[sid]
    tombstones = [o.key or b"" for o in out if o.topic == "sched" and o.value is None]
    assert sorted(tombstones) == sorted(
        f"{s}".encode() for s in ("good-1", "denied-1", "gone-1", "big-1", "good-2")
    )
    assert out[-1].topic == "commits"
    assert firer.commit_batch("run", 5, batch) == Committed(replay=True)  # writes nothing
    # The refusals are the caller's to log (the fire stage reports them to the driver).
    assert not any("xxx" in m for m in caplog.messages)  # never a payload


def test_small_records_batched_over_a_topics_limit_are_retried_one_per_batch(
    firer: TransactionalFirer,
) -> None:
    batch: list[OutgoingRecord | Firing] = [
        Firing(schedule(f"s{i}", "small", b"y" * 300), "dlq") for i in range(6)
    ]
    assert firer.commit_batch("run", 5, batch) == Committed(replay=False)
    # Written without delivery reports, again with them (which record failed), then one
    # record per batch.
    assert firer._producer.producer.attempts == 3  # type: ignore[attr-defined]
    assert len([o for o in committed(firer) if o.topic == "small"]) == 6
    assert not [o for o in committed(firer) if o.topic == "dlq"]


def test_a_transient_failure_fails_the_batch_naming_schedule_and_topic(
    firer: TransactionalFirer,
) -> None:
    batch: list[OutgoingRecord | Firing] = [
        Firing(schedule("ok", "good"), "dlq"),
        Firing(schedule("slow-1", "broken"), "dlq"),
    ]
    with pytest.raises(
        FireError, match=r"schedule 'slow-1' to topic 'broken': _MSG_TIMED_OUT"
    ) as err:
        firer.commit_batch("run", 5, batch)
    assert err.value.retriable
    assert firer._producer.producer.committed == []  # type: ignore[attr-defined]
    assert firer.last_committed("run") == 4


def test_a_denial_that_fails_later_produce_calls_is_still_found(
    firer: TransactionalFirer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FakeProducer, "eager", True)
    batch: list[OutgoingRecord | Firing] = [
        Firing(schedule("denied-1", "denied"), "dlq"),
        *(Firing(schedule(f"ok-{i}", "good"), "dlq") for i in range(3)),
    ]
    assert set(firer.commit_batch("run", 5, batch).refused) == {0}
    out = committed(firer)
    assert len([o for o in out if o.topic == "good"]) == 3
    assert [o.key for o in out if o.topic == "dlq"] == [b"denied-1"]


def test_a_new_writer_reads_the_markers_only_when_the_batch_may_be_a_replay(
    firer: TransactionalFirer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []

    def markers(_servers: str, topic: str, **_kw: Any) -> list[ConsumedRecord]:
        reads.append(topic)
        return [ConsumedRecord(topic, 0, 0, 0, b"other/p1", b'{"batch_id": 7}')]

    monkeypatch.setattr(tx, "read_topic", markers)
    batch: list[OutgoingRecord | Firing] = [Firing(schedule("a", "good"), "dlq")]
    # A new batch of a run this writer never wrote: nothing to read.
    assert firer.commit_batch("other/p0", 3, batch) == Committed(replay=False)
    assert reads == []
    # Perhaps a replay (first batch after a start, a retried task): read, and skip it.
    assert firer.commit_batch("other/p1", 7, batch, refresh=True) == Committed(replay=True)
    assert reads == ["commits"]


def _assigned(produced: dict[str, Any]) -> int | None:
    """The partition a record was produced to, as the client takes it (-1: the
    partitioner's choice)."""
    partition = produced.get("partition", -1)
    return None if partition < 0 else int(partition)


class OrderProducer(FakeProducer):
    """Notes, at each record produced, how many records were acknowledged before it."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.produced: list[tuple[str, int]] = []

    def produce(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> None:
        self.produced.append((topic, len(self.open)))
        super().produce(topic, value, key, **kw)


def test_records_to_the_last_topics_are_written_after_the_others_are_acknowledged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch's tombstones to the schedules topic go last, once every other record of
    the transaction is acknowledged: the transaction holds the schedules partition (its
    ``read_committed`` readers, the committers' watch) for its last moments only."""
    monkeypatch.setattr(transactions, "Producer", OrderProducer)
    facts: dict[str, TopicFacts | None] = {"good": TopicFacts()}
    config = FireConfig("kafka:9092", "commits", "tx", last_topics=frozenset({"sched"}))
    firer = TransactionalFirer(config, FakeDescribe(facts))
    firer._committed["run"] = 4
    batch: list[OutgoingRecord | Firing] = [
        Firing(schedule(f"s{i}", "good"), "dlq", "hist") for i in range(3)
    ]
    assert firer.commit_batch("run", 5, batch) == Committed(replay=False)
    producer: OrderProducer = firer._producer.producer  # type: ignore[assignment]
    topics = [topic for topic, _ in producer.produced]
    first_last = topics.index("sched")
    assert set(topics[first_last:]) == {"sched"}, topics
    assert len(topics) - first_last == 3  # each schedule's tombstone
    acknowledged = producer.produced[first_last][1]
    assert acknowledged == first_last, "a tombstone was written before the rest was acknowledged"
    out = committed(firer)
    assert [o.key for o in out if o.topic == "sched"] == [b"s0", b"s1", b"s2"]  # in order


def test_a_refusal_found_at_the_held_flush_is_retried_not_judged_before_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A target refused after its check (write rights revoked meanwhile), found only
    when the transaction is flushed before the input topics' records: the re-arm after
    it fails with the transaction's error, unplaced. Nothing waits for the commit time
    or checks re-arms in a doomed transaction; it is written again with reports and the
    refused firing dead-lettered."""
    monkeypatch.setattr(transactions, "Producer", FakeProducer)
    monkeypatch.setattr(FakeProducer, "denied", {"revoked"})
    monkeypatch.setattr(FakeProducer, "eager", True)
    cluster = FakeDescribe({"revoked": TopicFacts(), "good": TopicFacts()})
    config = FireConfig("kafka:9092", "commits", "tx", last_topics=frozenset({"sched"}))
    firer = TransactionalFirer(config, cluster)
    rearm = OutgoingRecord("sched", b"every-1", b"rearmed")
    calls: list[tuple[int, int]] = []

    def before_commit(placed: Mapping[OutgoingRecord, tuple[int, int]]) -> None:
        calls.append(placed[rearm])

    batch: list[OutgoingRecord | Firing] = [
        Firing(schedule("late-1", "good"), "dlq"),
        Firing(schedule("gone-1", "revoked"), "dlq"),
        rearm,
    ]
    revoke = FakeProducer.flush

    def flush_then_revoke(self: FakeProducer, timeout: float = 0) -> int:
        cluster.facts["revoked"] = TopicFacts(writable=False)  # found by the reread
        return revoke(self, timeout)

    monkeypatch.setattr(FakeProducer, "flush", flush_then_revoke)
    refused = firer.deliver(batch, label="group", before_commit=before_commit, track=[rearm])
    assert set(refused) == {1}
    assert "TOPIC_AUTHORIZATION_FAILED" in refused[1]
    assert len(calls) == 1, "before_commit ran in a doomed transaction"
    out = committed(firer)
    assert [o.key for o in out if o.topic == "dlq"] == [b"gone-1"]
    assert [o.key for o in out if o.topic == "good"] == [b"k"]
    assert rearm in out


@given(
    key=st.one_of(st.none(), st.binary(max_size=300)),
    value=st.one_of(st.none(), st.binary(max_size=70_000)),
    headers=st.lists(
        st.tuples(st.text(max_size=200), st.one_of(st.none(), st.binary(max_size=300))),
        max_size=12,
    ),
)
def test_the_quick_size_bound_is_never_below_the_record_batch_size(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]
) -> None:
    """A record under its topic's limit by the bound is under it by the exact size: the
    exact size is computed only for records near a limit."""
    record = OutgoingRecord("t", key, value, tuple(headers))
    assert (
        batch_size(record)
        <= size_bound(record)
        <= batch_size(record) + 100 + 18 * len(headers) + 3 * sum(len(n) for n, _ in headers)
    )


def test_the_topics_a_producer_looked_up_are_forgotten_with_the_producer(
    firer: TransactionalFirer,
) -> None:
    """What the committer's warming asks: which topics this writer's producer has not
    looked up; one that failed to answer, or a producer replaced after a fatal error,
    has not."""
    firer.load_metadata(["orders", "broken"])
    assert firer.unseen(["orders", "refunds", "broken"]) == {"refunds", "broken"}
    first = firer._producer.producer
    firer._producer.fatal = True
    firer._producer.abort()  # a new producer of the same transactional id
    assert firer._producer.producer is not first
    assert firer.unseen(["orders"]) == {"orders"}
