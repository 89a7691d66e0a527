"""The bucket hold's Kafka side on a real broker: its topics, what its source reads,
and the rewrite read back from a schedules topic."""

from __future__ import annotations

import logging
import time
import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from delayline.contract import OutgoingRecord
from delayline.contract.codec import encode_headers
from delayline.dev.testing import create_topic, unique_topic
from delayline.errors import TopicConfigError
from delayline.fire.rewrite import fill_rewrites
from delayline.holds.buckets.config import BucketsConfig
from delayline.holds.buckets.copy import decode_copy, encode_copy
from delayline.holds.buckets.source import BucketReader, layout_options
from delayline.holds.buckets.topics import ensure_bucket_topics
from delayline.kafka.config import kafka_client_config
from delayline.kafka.produce import produce_one
from delayline.kafka.reader import private_consumer, read_topic


def layout(partitions: int = 1) -> BucketsConfig:
    """Two buckets: waits under 10 s, and 10 s or more (read after 10 s)."""
    prefix = f"bk{uuid.uuid4().hex[:8]}"
    return BucketsConfig(boundaries_ms=(10_000,), topic_prefix=prefix, partitions=partitions)


def copy_of(sid: str, routed_at_ms: int) -> bytes:
    return encode_copy(
        {"src_topic": "s", "src_partition": 0, "src_offset": 1, "src_timestamp_ms": 1,
         "id": sid, "due_ms": routed_at_ms + 60_000, "at_ms": routed_at_ms,
         "target_topic": "t", "target_key": None, "headers": b"\x01", "value": b"p"}
    )  # fmt: skip


def test_bucket_topics_are_created_then_found_fit(kafka_bootstrap: str) -> None:
    buckets = layout(partitions=2)
    assert ensure_bucket_topics(kafka_bootstrap, buckets) == dict.fromkeys(
        buckets.topics, "created"
    )
    assert ensure_bucket_topics(kafka_bootstrap, buckets) == dict.fromkeys(buckets.topics, "exists")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"cleanup.policy": "compact"}, "is compacted"),
        ({"retention.ms": "5000"}, "keeps records 5s, but a copy can wait there up to 10s"),
        ({"retention.bytes": "1000000"}, "deletes by size"),
        ({"message.timestamp.type": "LogAppendTime"}, "stamps records on append"),
    ],
)
def test_a_bucket_topic_that_could_lose_copies_is_refused_with_the_fix(
    kafka_bootstrap: str, config: dict[str, str], message: str
) -> None:
    buckets = layout()
    create_topic(kafka_bootstrap, buckets.topic(0), config=config)
    with pytest.raises(TopicConfigError, match=message) as refused:
        ensure_bucket_topics(kafka_bootstrap, buckets)
    assert f"--entity-name {buckets.topic(0)}" in str(refused.value)


def test_a_retention_inside_the_margin_is_a_warning(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    buckets = layout()
    create_topic(kafka_bootstrap, buckets.topic(0), config={"retention.ms": "3600000"})
    with caplog.at_level(logging.WARNING):
        ensure_bucket_topics(kafka_bootstrap, buckets)
    assert "a pipeline down for more than 59m50s loses copies" in caplog.text


def test_the_source_reads_each_buckets_ready_prefix_and_nothing_uncommitted(
    kafka_bootstrap: str,
) -> None:
    buckets = layout()
    ensure_bucket_topics(kafka_bootstrap, buckets)
    now = time.time_ns() // 10**6
    small, large = buckets.topics
    # The 10 s+ bucket: ready once written 10 s ago. The copy stamped a minute ahead is
    # not, and neither is the one after it, whatever its time: a reader stops at the first.
    for sid, written in (("a", now - 20_000), ("b", now - 15_000), ("c", now + 60_000),
                         ("d", now - 12_000)):  # fmt: skip
        produce_one(kafka_bootstrap, OutgoingRecord(large, sid.encode(), copy_of(sid, written),
                                                    (), 0, written), 10_000)  # fmt: skip
    # The small bucket: everything committed is ready; an aborted copy never shows.
    producer = Producer(
        kafka_client_config(kafka_bootstrap, **{"transactional.id": f"t-{uuid.uuid4()}"})
    )
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(small, copy_of("gone", now), b"gone", partition=0, timestamp=now)
    producer.flush(10)
    producer.abort_transaction(10)
    producer.begin_transaction()
    for sid in ("e", "f"):
        producer.produce(small, copy_of(sid, now), sid.encode(), partition=0, timestamp=now)
    producer.commit_transaction(10)

    reader = BucketReader(layout_options(kafka_bootstrap, buckets, 0))
    start = reader.initialOffset()
    assert start == {f"{small}:0": 0, f"{large}:0": 0}
    end = reader.latestOffset(start, ReadAllAvailable())
    rows = [
        row
        for part in reader.partitions(start, end)
        for batch in reader.read(part)
        for row in batch.to_pylist()
    ]
    assert [r["id"] for r in rows] == ["e", "f", "a", "b"]
    assert {r["kind"] for r in rows} == {"copy"}
    assert reader.latestOffset(end, ReadAllAvailable()) == end, "nothing more is ready"
    # A read limit (in offsets: the small bucket's five hold an aborted copy and two
    # transaction markers) serves the smallest bucket first.
    assert end == {f"{small}:0": 5, f"{large}:0": 2}
    assert reader.latestOffset(start, ReadMaxRows(3)) == {f"{small}:0": 3, f"{large}:0": 0}
    assert reader.latestOffset(start, ReadMaxRows(6)) == {f"{small}:0": 5, f"{large}:0": 1}
    # Once the batch commits, what it read is deleted; the rest stays.
    reader.commit(end)
    consumer = private_consumer(kafka_bootstrap, "check")
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(large, 0), timeout=10)
    finally:
        consumer.close()
    assert low == end[f"{large}:0"] == 2
    assert [decode_copy(c.value or b"").id for c in read_topic(kafka_bootstrap, large)] == [
        "c", "d",
    ]  # fmt: skip


def test_a_rewrite_of_a_version_held_without_payload_is_read_from_its_topic(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic = create_topic(kafka_bootstrap, unique_topic("sched"))
    headers = (("scheduler-epoch", b"2000000000"), ("x", None))
    _, offset, _ = produce_one(
        kafka_bootstrap, OutgoingRecord(topic, b"id", b"payload", headers, 0), 10_000
    )
    produce_one(kafka_bootstrap, OutgoingRecord(topic, b"id", None, (), 0), 10_000)
    base = {"id": "id", "src_topic": topic, "src_partition": 0, "value": None, "headers": None}
    rows = [
        {**base, "kind": "rewrite", "src_offset": offset},
        {**base, "kind": "rewrite", "src_offset": offset + 5},  # not there
        {**base, "kind": "retire", "src_offset": offset},
    ]
    with caplog.at_level(logging.ERROR):
        out = fill_rewrites(rows, kafka_bootstrap)
    assert out[0] == {**rows[0], "value": b"payload", "headers": encode_headers(headers)}
    assert out[1:] == [rows[2]], "a version gone from its topic is not rewritten"
    assert "is gone from its topic" in caplog.text
