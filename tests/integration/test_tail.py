"""``delayline tail`` as a user runs it: a real process reading a real broker."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
from confluent_kafka import Producer

from delayline.contract.headers import format_epoch
from delayline.core.clock import SystemClock
from delayline.dev.testing import create_topic, unique_topic
from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.infra.ports import free_port
from delayline.kafka.config import kafka_client_config

READY = "delayline: tailing "


class TailProcess:
    """``delayline tail`` in a child process, its output read line by line."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "delayline", "tail", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        self._err_lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(
                target=self._read, args=(self.proc.stderr, self._err_lines), daemon=True
            ),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str], into: queue.Queue[str]) -> None:
        for line in stream:
            into.put(line.rstrip("\n"))

    def wait_err(self, text: str, timeout_s: float = 30) -> str:
        """The first stderr line (not seen before) containing ``text``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._err_lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} on stderr; saw {self.err}") from None
            self.err.append(line)
            if text in line:
                return line

    def next_out(self, timeout_s: float = 30) -> str:
        try:
            return self.out.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"no line on stdout; stderr {self.err}") from None

    def finish(self, timeout_s: float = 30) -> int:
        """Wait for the exit code; stderr is read to its end."""
        code = self.proc.wait(timeout_s)
        for reader in self._readers:
            reader.join(5)
        while not self._err_lines.empty():
            self.err.append(self._err_lines.get())
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.finish()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def tail(*args: str) -> Iterator[TailProcess]:
    process = TailProcess(*args)
    try:
        yield process
    finally:
        process.close()


def produce(bootstrap: str, topic: str, *records: dict[str, Any]) -> None:
    producer = Producer(kafka_client_config(bootstrap))
    for record in records:
        producer.produce(topic, **record)
    assert producer.flush(10) == 0


def test_tail_starts_at_the_end_and_prints_committed_records_as_json(
    kafka_bootstrap: str,
) -> None:
    topic = create_topic(kafka_bootstrap, unique_topic("tail"), partitions=2)
    produce(kafka_bootstrap, topic, {"key": b"old", "value": b"before tail"})
    due_ms = SystemClock().now_ms() - 1500
    with tail(topic, "-b", kafka_bootstrap, "--json", "--max-messages", "2") as t:
        assert "from the end" in t.wait_err(READY)
        # An aborted transaction is never shown (read_committed).
        aborted = Producer(kafka_client_config(kafka_bootstrap, **{"transactional.id": topic}))
        aborted.init_transactions(10)
        aborted.begin_transaction()
        aborted.produce(topic, key=b"aborted", value=b"never", partition=0)
        aborted.flush(10)
        aborted.abort_transaction(10)
        produce(
            kafka_bootstrap,
            topic,
            {
                "key": b"order-1",
                "value": b'{"n": 1}',
                "partition": 0,
                "headers": [("scheduler-epoch", format_epoch(due_ms).encode()), ("t", b"x")],
            },
            {"key": None, "value": b"\x00\xff", "partition": 0},
        )
        first, second = json.loads(t.next_out()), json.loads(t.next_out())
        assert t.finish() == 0
    assert (first["topic"], first["partition"], first["key"], first["value"]) == (
        topic,
        0,
        "order-1",
        '{"n": 1}',
    )
    assert first["headers"][1] == {"name": "t", "value": "x", "encoding": "utf-8"}
    assert first["due_ms"] == due_ms
    assert first["lateness_ms"] == first["received_ms"] - due_ms
    assert 1500 <= first["lateness_ms"] < 60_000
    assert first["encodings"] == {"key": "utf-8", "value": "utf-8"}
    assert (second["key"], second["value"], second["encodings"]) == (
        None,
        "AP8=",
        {"key": None, "value": "base64"},
    )
    assert (second["due_ms"], second["lateness_ms"]) == (None, None)
    assert second["offset"] > first["offset"]


def test_tail_from_the_beginning_for_people_stops_after_the_idle_timeout(
    kafka_bootstrap: str,
) -> None:
    topic = create_topic(kafka_bootstrap, unique_topic("tail"), partitions=1)
    produce(kafka_bootstrap, topic, {"key": b"k", "value": b"line one\nline two"})
    began = time.monotonic()
    with tail(topic, "-b", kafka_bootstrap, "--from-beginning", "--timeout", "2s") as t:
        line = t.next_out()
        assert t.finish() == 0
    assert time.monotonic() - began < 30
    assert f"  {topic}/0@0  key k  value line one\\nline two" in line
    assert line[:24].endswith("Z")  # received at, UTC to the millisecond
    assert any("from the beginning" in e for e in t.err)


def test_tail_of_a_missing_topic_is_one_clear_line(kafka_bootstrap: str) -> None:
    with tail("no-such-topic-here", "-b", kafka_bootstrap, "--timeout", "1s") as t:
        assert t.finish() == 1
    assert t.err == [
        f"delayline: error: topic 'no-such-topic-here' does not exist on {kafka_bootstrap}"
    ]


@pytest.mark.slow
def test_tail_survives_a_broker_restart_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path / "b", port=free_port(), controller_port=free_port())
    broker = LocalBroker(config)
    broker.start()
    bootstrap = config.bootstrap_servers
    try:
        topic = create_topic(bootstrap, unique_topic("tail"), partitions=1)
        with tail(topic, "-b", bootstrap) as t:
            t.wait_err(READY)
            produce(bootstrap, topic, {"key": b"a", "value": b"before"})
            assert t.next_out().endswith("key a  value before")
            broker.stop()
            assert t.wait_err("unreachable") == (
                f"delayline: warning: Kafka at {bootstrap} is unreachable; "
                "still trying (Ctrl-C stops)"
            )
            broker.start()
            produce(bootstrap, topic, {"key": b"b", "value": b"after"})
            assert t.next_out().endswith("key b  value after")
            t.wait_err("reachable again")
            t.proc.send_signal(signal.SIGINT)
            assert t.finish() == 0
        assert not any("Traceback" in e for e in t.err), t.err
        assert sum("unreachable" in e for e in t.err) == 1
    finally:
        if broker.status().running:
            broker.stop()
