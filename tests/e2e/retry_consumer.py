"""A consumer of ``tests/e2e/test_retry_later.py``, run as its own process so that the
test can SIGKILL it: :class:`RetryingConsumer` in exactly-once mode with a handler that
fails some records for a while and some for good.

Record ``i`` (its value) is handled on its attempt ``a`` (its ``retry-attempt`` + 1):
- ``i % 100 < 30``: fails until ``a == 2 + i % 3`` (transient);
- ``30 <= i % 100 < 35``: always fails (exhausts its retries: the dead-letter topic);
- any other: succeeds at once.
Every try writes ``a,now_ms,written_ms`` (the record's timestamp) keyed ``i`` to the tries topic, every success ``i`` to the
done topic, with the consumer's producer: they commit with the batch's offsets.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time

from confluent_kafka import Message

from delayline.client import ClientConfig, RetryPolicy
from delayline.client.consumer import LoopConfig, RetryConfig, RetryingConsumer
from delayline.client.retry import ATTEMPT, header_value
from delayline.kafka.reader import message_headers

POLICY = RetryPolicy(initial_delay_ms=1_000, multiplier=2, max_attempts=3, jitter=0.2)
"""Retries after 1, 2 and 4 s (each up to 20% shorter): four tries at most."""


class TransientError(Exception):
    """Fails a try; the record succeeds on a later one (or never)."""


def kind(i: int) -> str:
    """``transient``, ``permanent`` or ``ok``: how record ``i`` fares."""
    if i % 100 < 30:
        return "transient"
    return "permanent" if i % 100 < 35 else "ok"


def succeeds_on(i: int) -> int | None:
    """The attempt record ``i`` succeeds on (``None``: never)."""
    return {"transient": 2 + i % 3, "permanent": None, "ok": 1}[kind(i)]


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("bootstrap", "schedules", "topic", "group", "done", "tries", "instance"):
        parser.add_argument(f"--{flag}", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    client = ClientConfig(bootstrap_servers=args.bootstrap, schedules_topic=args.schedules)
    retry = RetryConfig(args.group, policy=POLICY)
    loop = LoopConfig((args.topic,), transactional=True, instance=args.instance)
    consumer: RetryingConsumer

    def handle(record: Message) -> None:
        i = int(record.value() or b"")
        attempt = int(header_value(message_headers(record), ATTEMPT) or b"0") + 1
        key = str(i).encode()
        now_ms, written_ms = time.time_ns() // 1_000_000, record.timestamp()[1]
        consumer.producer.produce(args.tries, key=key, value=f"{attempt},{now_ms},{written_ms}")
        wins = succeeds_on(i)
        if wins is None or attempt < wins:
            raise TransientError(f"record {i} failed on attempt {attempt}")
        consumer.producer.produce(args.done, key=key, value=key)

    consumer = RetryingConsumer(client, retry, loop, handle)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("consuming", flush=True)
    consumer.run(stop)


if __name__ == "__main__":
    main()
