"""The client against a real broker: exact headers, partitions, compatibility."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer

from delayline.client import AsyncScheduler, ClientConfig, Scheduler, Written, partition_for
from delayline.client.retry import ATTEMPT, ORIGINAL_TIMESTAMP
from delayline.contract import parse_record
from delayline.core.clock import ManualClock
from delayline.core.model import Cancel, Invalid, Schedule
from delayline.dev.testing import create_topic
from delayline.errors import InvalidScheduleError, KafkaUnavailableError, TopicConfigError
from delayline.infra.ports import free_port
from delayline.kafka.reader import read_topic

PARTITIONS = 6


@pytest.fixture
def schedules(kafka_bootstrap: str, topic_name: str) -> str:
    return create_topic(
        kafka_bootstrap, topic_name, partitions=PARTITIONS, config={"cleanup.policy": "compact"}
    )


def config(bootstrap: str, topic: str) -> ClientConfig:
    return ClientConfig(bootstrap_servers=bootstrap, schedules_topic=topic)


def test_records_carry_exactly_the_contract_headers(kafka_bootstrap: str, schedules: str) -> None:
    at = datetime(2031, 5, 6, 7, 8, 9, 250_000, tzinfo=UTC)
    with Scheduler(config(kafka_bootstrap, schedules)) as client:
        written = client.schedule(
            "order-42",
            b'{"n": 42}',
            "reminders",
            at=at,
            target_key="cust-7",
            headers={"trace": "t-1"},
        )
        client.schedule("no-key", "text payload", "reminders", at=at)
    records = {r.key: r for r in read_topic(kafka_bootstrap, schedules)}
    first = records[b"order-42"]
    assert first.value == b'{"n": 42}'
    assert list(first.headers) == [
        ("scheduler-epoch", b"1935817689.250"),
        ("scheduler-target-topic", b"reminders"),
        ("scheduler-target-key", b"cust-7"),
        ("trace", b"t-1"),
    ]
    assert first.partition == partition_for(b"order-42", PARTITIONS)
    assert parse_record(first) == written
    second = records[b"no-key"]
    assert second.value == b"text payload"
    assert list(second.headers) == [
        ("scheduler-epoch", b"1935817689.250"),
        ("scheduler-target-topic", b"reminders"),
    ]


def test_cancel_shares_the_partition_of_its_schedule_on_every_partition(
    kafka_bootstrap: str, schedules: str
) -> None:
    ids: dict[int, str] = {}
    n = 0
    while len(ids) < PARTITIONS:
        ids.setdefault(partition_for(f"id-{n}".encode(), PARTITIONS), f"id-{n}")
        n += 1
    with Scheduler(config(kafka_bootstrap, schedules)) as client:
        for schedule_id in ids.values():
            client.schedule(schedule_id, b"p", "target", delay=3600)
            client.cancel(schedule_id)
    by_id: dict[str, list[tuple[int, type]]] = {}
    for record in read_topic(kafka_bootstrap, schedules):
        parsed = parse_record(record)
        assert isinstance(parsed, Schedule | Cancel)
        by_id.setdefault(parsed.id, []).append((record.partition, type(parsed)))
    assert {p for seen in by_id.values() for p, _ in seen} == set(range(PARTITIONS))
    for schedule_id, seen in by_id.items():
        assert [kind for _, kind in seen] == [Schedule, Cancel], schedule_id
        assert seen[0][0] == seen[1][0] == partition_for(schedule_id.encode(), PARTITIONS)


def test_plain_producer_records_parse_identically_and_partition_alike(
    kafka_bootstrap: str, schedules: str
) -> None:
    """A producer that knows only the header contract (librdkafka's Java-compatible
    partitioner) writes what the delayline client writes."""
    plain = Producer({"bootstrap.servers": kafka_bootstrap, "partitioner": "murmur2_random"})
    headers: list[tuple[str, str | bytes | None]] = [
        ("scheduler-epoch", b"1935817689.250"),
        ("scheduler-target-topic", b"reminders"),
        ("scheduler-target-key", b"cust-7"),
        ("trace", b"t-1"),
    ]
    for i in range(20):
        plain.produce(schedules, key=f"plain-{i}".encode(), value=b"payload", headers=headers)
    assert plain.flush(10) == 0
    at = datetime(2031, 5, 6, 7, 8, 9, 250_000, tzinfo=UTC)
    with Scheduler(config(kafka_bootstrap, schedules)) as client:
        mine = [
            client.schedule(
                f"mine-{i}",
                b"payload",
                "reminders",
                at=at,
                target_key=b"cust-7",
                headers=[("trace", "t-1")],
            )
            for i in range(20)
        ]
    records = {r.key.decode(): r for r in read_topic(kafka_bootstrap, schedules) if r.key}
    for i in range(20):
        theirs, ours = records[f"plain-{i}"], records[f"mine-{i}"]
        parsed_theirs, parsed_ours = parse_record(theirs), parse_record(ours)
        assert isinstance(parsed_theirs, Schedule)
        assert parsed_ours == mine[i]
        # Same schedule but for the id.
        assert parsed_theirs.headers == parsed_ours.headers
        assert (parsed_theirs.due_ms, parsed_theirs.payload) == (
            parsed_ours.due_ms,
            parsed_ours.payload,
        )
        assert theirs.partition == partition_for(theirs.key or b"", PARTITIONS)
        assert ours.partition == partition_for(ours.key or b"", PARTITIONS)


def test_delay_send_later_and_retry_use_the_injected_clock(
    kafka_bootstrap: str, schedules: str
) -> None:
    clock = ManualClock(1_900_000_000_000)
    with Scheduler(config(kafka_bootstrap, schedules), clock=clock) as client:
        delayed = client.schedule("d", b"p", "t", delay=timedelta(seconds=90))
        later_id = client.send_later("k", b"v", "t", timedelta(minutes=5))
        retry = client.schedule_retry("r", b"p", "t", previous_headers={ATTEMPT: "1", "x": "y"})
    assert delayed.due_ms == 1_900_000_090_000
    assert retry.due_ms == 1_900_000_010_000
    parsed: dict[str, Schedule | Cancel] = {}
    for p in map(parse_record, read_topic(kafka_bootstrap, schedules)):
        assert not isinstance(p, Invalid), p
        parsed[p.id] = p
    later = parsed[later_id]
    assert isinstance(later, Schedule)
    assert (later.due_ms, later.target_key, later.payload) == (1_900_000_300_000, b"k", b"v")
    retried = parsed["r"]
    assert isinstance(retried, Schedule)
    assert dict(retried.headers)[ATTEMPT] == b"2"
    assert dict(retried.headers)[ORIGINAL_TIMESTAMP] == b"1900000000000"
    assert dict(retried.headers)["x"] == b"y"


def test_async_client_reports_where_each_record_landed(
    kafka_bootstrap: str, schedules: str
) -> None:
    async def write() -> list[Written]:
        async with AsyncScheduler(config(kafka_bootstrap, schedules)) as client:
            return list(
                await asyncio.gather(
                    client.schedule("a1", b"p", "t", delay=60, target_key="k"),
                    client.schedule("a2", b"p", "t", at=datetime(2031, 1, 1, tzinfo=UTC)),
                    client.send_later(None, b"v", "t", timedelta(seconds=30)),
                    client.cancel("a1"),
                )
            )

    written = asyncio.run(write())
    records = {(r.partition, r.offset): r for r in read_topic(kafka_bootstrap, schedules)}
    for w in written:
        record = records[(w.partition, w.offset)]
        assert record.key == w.id.encode()
        assert w.partition == partition_for(w.id.encode(), PARTITIONS)
        if w.schedule is None:
            assert record.value is None
        else:
            assert parse_record(record) == w.schedule


def test_a_cancel_returns_once_kafka_holds_it(kafka_bootstrap: str, schedules: str) -> None:
    """The blocking client's cancel is durable when it returns: read back before
    anything else is flushed, the tombstone is at the offset it answered, after its
    schedule (queued before it, in the same partition)."""
    with Scheduler(config(kafka_bootstrap, schedules)) as client:
        client.schedule("durable", b"p", "t", delay=3600)
        written = client.cancel("durable")
        records = [r for r in read_topic(kafka_bootstrap, schedules) if r.key == b"durable"]
        assert client.cancel("queued", wait=False) is None
    own = partition_for(b"durable", PARTITIONS)
    assert written == Written("durable", schedules, own, written.offset, None)
    assert [(r.partition, type(parse_record(r))) for r in records] == [
        (own, Schedule),
        (own, Cancel),
    ]
    assert records[1].offset == written.offset
    assert b"queued" in {r.key for r in read_topic(kafka_bootstrap, schedules)}  # flushed


def test_missing_schedules_topic_is_a_clear_error(kafka_bootstrap: str, topic_name: str) -> None:
    client = Scheduler(config(kafka_bootstrap, topic_name))
    with pytest.raises(TopicConfigError, match=f"topic '{topic_name}' does not exist"):
        client.schedule("a", b"p", "t", delay=1)


def test_unreachable_broker_fails_within_the_timeout() -> None:
    dead = f"127.0.0.1:{free_port()}"
    client = Scheduler(ClientConfig(bootstrap_servers=dead, metadata_timeout_ms=2000))
    began = time.monotonic()
    with pytest.raises(KafkaUnavailableError, match="did not answer within 2 s") as info:
        client.cancel("a")
    assert info.value.retriable
    # Gave up after 2.00 s in three runs here; the bound leaves room for a loaded box.
    assert time.monotonic() - began < 5


def test_bad_arguments_fail_before_anything_is_written(
    kafka_bootstrap: str, schedules: str
) -> None:
    with Scheduler(config(kafka_bootstrap, schedules)) as client:
        with pytest.raises(InvalidScheduleError, match="exactly one"):
            client.schedule("a", b"p", "t")
        with pytest.raises(InvalidScheduleError, match="reserved"):
            client.schedule("a", b"p", "t", delay=1, headers={"scheduler-epoch": "1"})
        with pytest.raises(InvalidScheduleError, match="not a valid topic name"):
            client.schedule("a", b"p", "bad topic", delay=1)
    assert read_topic(kafka_bootstrap, schedules) == []


PAST_DUE_LOGGER = "delayline.client._core"


def test_a_due_time_already_past_is_written_with_a_warning_naming_the_id(
    kafka_bootstrap: str, schedules: str, caplog: pytest.LogCaptureFixture
) -> None:
    now = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    clock = ManualClock(1_893_499_200_000)  # = now
    caplog.set_level(logging.WARNING, logger=PAST_DUE_LOGGER)
    with Scheduler(config(kafka_bootstrap, schedules), clock=clock) as client:
        client.schedule("past-1", b"secret payload", "t", at=now - timedelta(minutes=5))
        client.send_later("k", b"secret payload", "t", now - timedelta(milliseconds=250))
        # Not past: due now, a delay (never negative), a retry.
        client.schedule("now-1", b"p", "t", at=now)
        client.schedule("delay-0", b"p", "t", delay=0)
        client.send_later("k", b"p", "t", timedelta(0))
        client.schedule_retry("retry-1", b"p", "t")

    async def write_async() -> None:
        async with AsyncScheduler(config(kafka_bootstrap, schedules), clock=clock) as client:
            await client.schedule("past-2", b"secret payload", "t", at=now - timedelta(hours=1))

    asyncio.run(write_async())
    messages = [r.getMessage() for r in caplog.records if r.name == PAST_DUE_LOGGER]
    assert len(messages) == 3, messages
    assert messages[0] == (
        "schedule 'past-1' is due 5m in the past (2030-01-01T11:55:00+00:00); it fires at once"
    )
    assert "is due 250ms in the past (2030-01-01T11:59:59.750000+00:00)" in messages[1]
    assert messages[2].startswith("schedule 'past-2' is due 1h in the past")
    assert not any("secret" in m for m in messages)
    ids = {r.key for r in read_topic(kafka_bootstrap, schedules)}
    assert {b"past-1", b"past-2", b"now-1"} <= ids  # written all the same
