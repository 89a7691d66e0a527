"""``delayline oscillator`` against a real broker: a tick per second, catch-up after a
pause, no second written twice by one oscillator, redundancy, metrics, a clear error."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from tests.integration.test_cli_api import delayline

from delayline.dev.testing import unique_topic
from delayline.kafka.reader import read_topic
from delayline.oscillator.service import Oscillator, OscillatorConfig


@contextmanager
def ticking(bootstrap: str, topic: str, metrics: bool = False) -> Iterator[Oscillator]:
    oscillator = Oscillator(OscillatorConfig(bootstrap, topic, metrics_port=0 if metrics else None))
    oscillator.start()
    stop = threading.Event()
    thread = threading.Thread(target=oscillator.run_until, args=(stop,), daemon=True)
    thread.start()
    try:
        yield oscillator
    finally:
        stop.set()
        thread.join(10)
        oscillator.close()


def seconds(bootstrap: str, topic: str) -> list[int]:
    records = read_topic(bootstrap, topic)
    assert all(r.value == b"1" for r in records)
    return [int(r.key or b"") for r in records]


def test_ticks_every_second_and_catches_up_after_a_pause(kafka_bootstrap: str) -> None:
    topic = unique_topic("oscillator")
    with ticking(kafka_bootstrap, topic, metrics=True) as oscillator:
        time.sleep(2.5)
        port = oscillator.metrics_port
        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    first = seconds(kafka_bootstrap, topic)
    assert len(first) >= 2
    assert first == list(range(first[0], first[-1] + 1))
    # The metrics were read before the stop: one more second may have ticked since.
    (shown,) = re.findall(r"^delayline_oscillator_last_tick_seconds (\d+)$", text, re.MULTILINE)
    assert int(shown) in first[-2:], (shown, first)
    time.sleep(3)  # paused: these seconds are caught up on the next start
    with ticking(kafka_bootstrap, topic) as again:
        time.sleep(1.5)
        caught_up = again.stats.caught_up
    ticks = seconds(kafka_bootstrap, topic)
    assert ticks == list(range(ticks[0], ticks[-1] + 1)), "a second missing or written twice"
    assert caught_up >= 2
    assert ticks[-1] >= time.time() - 2


def test_two_oscillators_leave_no_second_out(kafka_bootstrap: str) -> None:
    topic = unique_topic("oscillator")
    with ticking(kafka_bootstrap, topic), ticking(kafka_bootstrap, topic):
        time.sleep(3.5)
    ticks = seconds(kafka_bootstrap, topic)
    assert sorted(set(ticks)) == list(range(min(ticks), max(ticks) + 1))
    # Each one skips the seconds it already read from the other; a few races remain.
    assert max(Counter(ticks).values()) <= 2


def test_kafka_away_is_a_clear_error() -> None:
    done = delayline("oscillator", "--bootstrap-servers", "127.0.0.1:1", "--timeout", "2s")
    assert done.returncode != 0
    assert "127.0.0.1:1" in done.stderr
