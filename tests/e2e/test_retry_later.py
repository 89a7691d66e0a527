"""Retry later through the shared pipeline: a consumer (``retry_consumer.py``, its own
process) reads 20,000 records as they are written, fails 30% of them for one to three
tries and 5% for good, in exactly-once mode; it is SIGKILLed mid-run and started again.
In the end every record is handled once, the 5% are dead letters after four tries, no
retry came back before its backoff, and first tries were not held up by the retries."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path
from statistics import quantiles
from typing import IO

from confluent_kafka import Producer

from delayline.client.retry import ATTEMPT, DEAD_REASON, SOURCE_OFFSET, SOURCE_TOPIC, header_value
from delayline.contract.headers import EPOCH, parse_epoch_ms
from delayline.dev.harness import Delivery, DeliveryCollector
from delayline.dev.testing import create_topic, unique_topic
from tests.e2e.retry_consumer import POLICY, kind, succeeds_on
from tests.support import ARTIFACTS, RunningPipeline

RECORDS = 20_000
RATE = 2_000
"""Records written per second, while the consumer reads them."""
KILL_AFTER = 8_000
"""Records handled (done) when the consumer is SIGKILLed."""
FIRST_TRY_P99_MS = 3_000
"""First tries, before the kill: the record's timestamp to its try, p99 at most this
(measured here: see the printed figures)."""
ROOT = Path(__file__).resolve().parents[2]


def test_retries_come_back_after_their_backoff_exactly_once_across_a_sigkill(
    pipeline: RunningPipeline,
) -> None:
    bootstrap = pipeline.bootstrap
    source = create_topic(bootstrap, unique_topic("orders"), partitions=2)
    done = create_topic(bootstrap, unique_topic("done"), partitions=2)
    tries = create_topic(bootstrap, unique_topic("tries"), partitions=2)
    group = unique_topic("billing")
    log = ARTIFACTS / f"retry-consumer-{group}.log"
    command = [
        sys.executable, "-m", "tests.e2e.retry_consumer", "--bootstrap", bootstrap,
        "--schedules", pipeline.topics.schedules, "--topic", source, "--group", group,
        "--done", done, "--tries", tries, "--instance", "one",
    ]  # fmt: skip
    with (
        DeliveryCollector(bootstrap, [done]) as handled,
        DeliveryCollector(bootstrap, [tries]) as tried,
        DeliveryCollector(bootstrap, [f"{group}-dlt"]) as dead,
        DeliveryCollector(bootstrap, [f"{group}-retry"], read_committed=False) as retried,
        log.open("a") as out,
    ):
        consumer = _start(command, out)
        try:
            _write(bootstrap, source)
            handled.wait_for(lambda ds: len(ds) >= KILL_AFTER, timeout_s=120)
            consumer.send_signal(signal.SIGKILL)
            consumer.wait()
            killed_ms = int(time.time() * 1000)
            consumer = _start(command, out)
            permanent = sum(kind(i) == "permanent" for i in range(RECORDS))
            handled.wait_for(lambda ds: len({d.key for d in ds}) >= RECORDS - permanent, 240)
            dead.wait_for(lambda ds: len(ds) >= permanent, timeout_s=120)
            time.sleep(3)  # a duplicate would show now
        finally:
            consumer.terminate()
            consumer.wait(30)
        _handled_once(handled.snapshot())
        _dead_after_four_tries(dead.snapshot(), source)
        _tries_after_their_backoff(tried.snapshot(), killed_ms)
        _nothing_early_to_any_reader(retried.snapshot())


def _start(command: list[str], out: IO[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)


def _write(bootstrap: str, topic: str) -> None:
    """Records 0..RECORDS-1 at :data:`RATE` a second, keyed by their number."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    start = time.monotonic()
    for i in range(RECORDS):
        producer.produce(topic, key=str(i).encode(), value=str(i).encode())
        if i % 200 == 199:
            producer.poll(0)
            time.sleep(max(0.0, start + (i + 1) / RATE - time.monotonic()))
    assert producer.flush(30) == 0


def _handled_once(done: list[Delivery]) -> None:
    keys = Counter(int(d.key or b"") for d in done)
    twice = [k for k, n in keys.items() if n > 1]
    assert not twice, f"handled twice: {twice[:5]}"
    expected = {i for i in range(RECORDS) if kind(i) != "permanent"}
    assert set(keys) == expected, f"missing {sorted(expected - set(keys))[:5]}"


def _dead_after_four_tries(dead: list[Delivery], source: str) -> None:
    keys = Counter(int(d.key or b"") for d in dead)
    assert set(keys) == {i for i in range(RECORDS) if kind(i) == "permanent"}
    assert max(keys.values()) == 1, "a dead letter twice"
    for letter in dead:
        assert header_value(letter.headers, ATTEMPT) == str(POLICY.max_attempts).encode()
        assert header_value(letter.headers, DEAD_REASON) == b"exhausted"
        assert header_value(letter.headers, SOURCE_TOPIC) == source.encode()
        assert int(header_value(letter.headers, SOURCE_OFFSET) or b"-1") >= 0
    places = {
        (header_value(d.headers, "retry-source-partition"), header_value(d.headers, SOURCE_OFFSET))
        for d in dead
    }
    assert len(places) == len(dead), "two dead letters name the same source record"


def _tries_after_their_backoff(tries: list[Delivery], killed_ms: int) -> None:
    """Each record tried as often as it fails plus once, each try once; each retry at
    least its backoff (less at most the jitter) after the try before it; first tries
    before the kill within :data:`FIRST_TRY_P99_MS` of the record's writing."""
    by_record: dict[int, list[tuple[int, int]]] = defaultdict(list)
    first_ms = []
    for t in tries:
        attempt, at_ms, written_ms = (int(x) for x in (t.value or b"").split(b","))
        by_record[int(t.key or b"")].append((attempt, at_ms))
        if attempt == 1 and at_ms < killed_ms - 5_000:
            first_ms.append(at_ms - written_ms)
    assert len(by_record) == RECORDS
    over_ms = []
    for i, seen in by_record.items():
        seen.sort()
        last = succeeds_on(i) or 1 + POLICY.max_attempts
        assert [a for a, _ in seen] == list(range(1, last + 1)), f"record {i}: {seen}"
        for (attempt, before), (_, after) in pairwise(seen):
            full = POLICY.delay_ms(attempt)
            assert after - before >= full * (1 - POLICY.jitter) - 1, f"record {i} early: {seen}"
            over_ms.append(after - before - full)
    cuts = quantiles(over_ms, n=100)
    print(
        f"\n{len(over_ms)} retries: past their full backoff p50 {cuts[49]:.0f} ms, p99 {cuts[98]:.0f}"
    )
    assert cuts[98] <= 20_000, "retries stuck"
    firsts = quantiles(first_ms, n=100)
    print(
        f"first tries before the kill: p50 {firsts[49]:.0f} ms, p99 {firsts[98]:.0f} after written"
    )
    assert firsts[98] <= FIRST_TRY_P99_MS


def _nothing_early_to_any_reader(retried: list[Delivery]) -> None:
    """A read_uncommitted reader of the retry topic sees no retry before its due time."""
    early = [
        d
        for d in retried
        if min(d.timestamp_ms, d.arrival_ms)
        < parse_epoch_ms((header_value(d.headers, EPOCH) or b"").decode())
    ]
    assert not early, f"{len(early)} retries seen before they were due"
    ids = Counter(d.schedule_id for d in retried)
    assert max(ids.values()) == 1, "a retry delivered twice"
