"""The waker writes wake records to a real broker: at once, when due, and not otherwise."""

from __future__ import annotations

import time

from delayline.core.clock import GRANULARITY_MS, SystemClock, wake_slot
from delayline.dev.testing import unique_topic
from delayline.kafka.reader import read_topic
from delayline.kafka.topics import ensure_wake_topic
from delayline.pipeline.wake import Waker

# Measured here (20 wakes, idle machine): a wake record carries a time 0-1 ms after its
# step's end. The margin is for a machine busy with Spark.
WRITE_TOLERANCE_MS = 1_000


def wake_times(bootstrap: str, topic: str) -> list[int]:
    return [int(record.value or b"0") for record in read_topic(bootstrap, topic)]


def test_wakes_at_once_then_when_due_then_only_on_heartbeat(kafka_bootstrap: str) -> None:
    topic = unique_topic("wake")
    assert ensure_wake_topic(kafka_bootstrap, topic) == "created"
    assert ensure_wake_topic(kafka_bootstrap, topic) == "exists"
    waker = Waker(kafka_bootstrap, topic, heartbeat_ms=60_000, poll_ms=200)
    waker.start()
    try:
        time.sleep(1.0)  # not loaded yet: wakes every poll interval
        polled = wake_times(kafka_bootstrap, topic)
        assert len(polled) >= 3, polled
        waker.add([], complete=True)
        time.sleep(0.5)
        settled = len(wake_times(kafka_bootstrap, topic))
        step_end = wake_slot(SystemClock().now_ms() + 1_500)
        due = step_end - GRANULARITY_MS // 2
        waker.add([due, due + 10])  # the same step: one wake, at its end
        time.sleep(1.5 + (GRANULARITY_MS + WRITE_TOLERANCE_MS) / 1000)
        after = wake_times(kafka_bootstrap, topic)[settled:]
        assert len(after) == 1, after
        assert step_end <= after[0] <= step_end + WRITE_TOLERANCE_MS
        time.sleep(1.0)
        assert len(wake_times(kafka_bootstrap, topic)) == settled + 1  # nothing due, no wake
    finally:
        waker.stop()
    assert waker.wakes_written == settled + 1
