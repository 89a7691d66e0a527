"""The bucket hold end to end: real broker, real pipeline, copies travelling the bucket
topics, a SIGKILL mid-run, every delivery counted (nothing lost, duplicated or early).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from delayline.client import ClientConfig, Scheduler
from delayline.dev.harness import DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.holds.buckets.config import BucketsConfig
from delayline.kafka.reader import private_consumer
from tests.counts import check_counts, report, schedule_spread
from tests.support import ARTIFACTS, eventually, make_topics, pipeline_args


@pytest.mark.long  # minutes: `make test-long` (docs/testing.md)
def test_sigkill_mid_run_with_copies_travelling_and_cancels_chasing_them(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """1,000 schedules due over 40 s, with updates and cancels of those 15 s or more
    out (their copies are in the 8-16 s and 16-32 s buckets when the cancel arrives);
    the pipeline is SIGKILLed once mid-run and restarted: every live schedule delivered
    once and not early, no cancelled one delivered, every bucket drained."""
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("target"), partitions=2)
    prefix = f"b{uuid.uuid4().hex[:8]}"
    args = pipeline_args(
        topics, tmp_path / "cp", "--hold", "buckets", "--bucket-topic-prefix", prefix
    )
    config = ClientConfig(bootstrap_servers=kafka_bootstrap, schedules_topic=topics.schedules)
    process = PipelineProcess(kafka_bootstrap, args, ARTIFACTS / f"buckets-{prefix}.log")
    with process as running, DeliveryCollector(kafka_bootstrap, [target]) as seen:
        running.start()
        running.wait_ready()
        due = schedule_spread(config, target, "b", 1_000, time.time_ns() // 10**6, 40_000)
        seen.wait_for(lambda d: len(d) >= 300, timeout_s=120)
        running.kill()
        running.start()
        running.wait_ready()
        seen.wait_for(lambda d: len({x.schedule_id for x in d}) >= len(due), timeout_s=180)
        time.sleep(5)  # anything duplicated late would show up now
        # Spark commits a batch's input (the copies it read are deleted) when it starts
        # the next batch: the last one to read the 16-32 s bucket may have been the last
        # (in CI once, after a 28 s restart). One more schedule starts another.
        with Scheduler(config) as client:
            client.schedule("b-after", b"x", target, delay=1.0)
        seen.wait_for(lambda d: any(x.schedule_id == "b-after" for x in d), timeout_s=60)
        deliveries = [d for d in seen.snapshot() if d.schedule_id != "b-after"]
        eventually(lambda: bucket_marks(kafka_bootstrap, prefix)[0] > 0, 30, "a read copy deleted")
        assert running.terminate() == 0, running.tail()
    check_counts(deliveries, due)
    report("bucket hold, pipeline SIGKILLed", deliveries, due)
    text = process.log_since_start()
    assert "Traceback" not in text, text[-3000:]
    # The copies went down through the buckets: the 16-32 s one had some, and those
    # read by a committed batch were deleted from it.
    low, high = bucket_marks(kafka_bootstrap, prefix)
    assert high > 0, "no copy waited in the 16-32 s bucket"
    assert low > 0, "no read copy was deleted"


def bucket_marks(bootstrap: str, prefix: str) -> tuple[int, int]:
    """The 16-32 s bucket's low and high watermarks, summed over its partitions."""
    layout = BucketsConfig(topic_prefix=prefix)
    consumer = private_consumer(bootstrap, "check")
    try:
        marks = [
            consumer.get_watermark_offsets(TopicPartition(layout.topic(5), p), timeout=10)
            for p in range(layout.partitions)
        ]
    finally:
        consumer.close()
    return sum(low for low, _ in marks), sum(high for _, high in marks)
