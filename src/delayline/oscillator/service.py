"""``delayline oscillator``: tick a topic once per Unix second (:mod:`.ticks`).

Kafka being away is not fatal once started: the ticks not written are retried every
second and caught up, oldest first, as soon as Kafka takes them again (each failure is
logged, with how many seconds are behind). At start an unreachable Kafka is a clear
error, so a mistyped address fails at once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, KafkaError, Producer, TopicPartition

from delayline.contract import OutgoingRecord
from delayline.core.clock import Clock, SystemClock
from delayline.core.http_server import LoggingHTTPServer
from delayline.errors import KafkaUnavailableError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.produce import produce
from delayline.kafka.reader import private_consumer, watermarks
from delayline.kafka.topics import ensure_oscillator_topic
from delayline.oscillator.ticks import TICK_VALUE, TickPlan, tick_key, tick_second

log = logging.getLogger(__name__)

DEFAULT_TOPIC = "oscillator"
MAX_TICKS_PER_WRITE = 10_000
"""A long pause is caught up this many seconds at a time (librdkafka's queue holds
100,000 records by default)."""
WRITE_TIMEOUT_MS = 5_000
"""How long a second's ticks may wait for Kafka's acknowledgement before the next try."""


@dataclass(frozen=True, slots=True)
class OscillatorConfig:
    """What ``delayline oscillator`` runs.

    Attributes:
        bootstrap_servers: Kafka bootstrap list.
        topic: The topic ticked (created with one partition when missing).
        metrics_port: Serve ``/metrics`` (Prometheus text) here; ``None``: off.
        metrics_host: Address the metrics server listens on.
        timeout_ms: How long to wait for Kafka at start.
    """

    bootstrap_servers: str
    topic: str = DEFAULT_TOPIC
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    timeout_ms: int = 10_000


@dataclass(slots=True)
class OscillatorStats:
    """What ``/metrics`` shows."""

    last_tick_s: int = 0
    ticks_written: int = 0
    ticks_seen: int = 0
    caught_up: int = 0
    write_failures: int = 0
    behind_s: int = 0

    def prometheus(self) -> str:
        """The figures in Prometheus' text format."""
        rows = [
            ("last_tick_seconds", "gauge", "The newest second ticked (Unix seconds).",
             self.last_tick_s),
            ("ticks_written_total", "counter", "Ticks this oscillator wrote.", self.ticks_written),
            ("ticks_seen_total", "counter", "Ticks read from the topic (any oscillator's).",
             self.ticks_seen),
            ("ticks_caught_up_total", "counter", "Ticks written late, after a pause.",
             self.caught_up),
            ("write_failures_total", "counter", "Writes Kafka did not acknowledge (retried).",
             self.write_failures),
            ("behind_seconds", "gauge", "Seconds due but not yet written.", self.behind_s),
        ]  # fmt: skip
        out = []
        for name, kind, help_text, value in rows:
            full = f"delayline_oscillator_{name}"
            out += [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}", f"{full} {value}"]
        return "\n".join(out) + "\n"


class Oscillator:
    """Ticks ``config.topic`` once per second until stopped.

    Args:
        config: What to tick and where.
        clock: The time (Unix seconds are read from it).
    """

    def __init__(self, config: OscillatorConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.stats = OscillatorStats()
        self._plan = TickPlan()
        self._producer: Producer | None = None
        self._tail: Consumer | None = None
        self._metrics: ThreadingHTTPServer | None = None
        self._failed = False

    def start(self) -> None:
        """Create the topic if needed, read its newest tick, start serving metrics.

        Raises:
            KafkaUnavailableError: Kafka did not answer within ``timeout_ms``.
            TopicConfigError: the topic could not be created.
        """
        config = self.config
        ensure_oscillator_topic(config.bootstrap_servers, config.topic, config.timeout_ms / 1000)
        self._tail = private_consumer(config.bootstrap_servers, "delayline-oscillator")
        self._plan = TickPlan(self._newest_tick(self._tail))
        self._producer = Producer(
            kafka_client_config(config.bootstrap_servers, **{
                "enable.idempotence": True,
                "linger.ms": 0,
                "delivery.timeout.ms": WRITE_TIMEOUT_MS,
            })
        )  # fmt: skip
        if self._plan.newest is not None:
            self.stats.last_tick_s = self._plan.newest
        if config.metrics_port is not None:
            self._metrics = _serve_metrics(self.stats, config.metrics_host, config.metrics_port)
        log.info(
            "oscillator ticking %s; newest tick in it: %s",
            config.topic,
            "none" if self._plan.newest is None else self._plan.newest,
        )

    @property
    def metrics_port(self) -> int | None:
        """The port ``/metrics`` is served on, once started."""
        return None if self._metrics is None else int(self._metrics.server_address[1])

    def run_until(self, stop: threading.Event) -> None:
        """Tick each second (catching up missed ones) until ``stop`` is set."""
        while not stop.is_set():
            self._read_others()
            now_ms = self.clock.now_ms()
            due = self._plan.due(now_ms)
            if due:
                self._write(due[:MAX_TICKS_PER_WRITE], now_ms)
            wait_ms = self._plan.next_ms(self.clock.now_ms()) - self.clock.now_ms()
            failing = self.stats.behind_s > 0 and self._failed
            stop.wait(1.0 if failing else max(wait_ms, 0) / 1000)

    def close(self) -> None:
        """Flush what is written and release everything."""
        if self._producer is not None:
            self._producer.flush(WRITE_TIMEOUT_MS / 1000)
        if self._tail is not None:
            self._tail.close()
        if self._metrics is not None:
            self._metrics.shutdown()
            self._metrics.server_close()

    def _newest_tick(self, consumer: Consumer) -> int | None:
        """The newest second among the last record of each partition; then the
        consumer tails every partition from its end."""
        topic, deadline = self.config.topic, time.monotonic() + self.config.timeout_ms / 1000
        partitions: list[int] = []
        while not partitions:  # a topic just created may not show its partitions yet
            metadata = consumer.list_topics(topic, timeout=self.config.timeout_ms / 1000)
            partitions = list(metadata.topics[topic].partitions)
            if not partitions and time.monotonic() > deadline:
                raise KafkaUnavailableError(f"topic {topic} shows no partitions")
            time.sleep(0 if partitions else 0.1)
        plan = TickPlan()
        for p in partitions:
            low, high = watermarks(consumer, TopicPartition(topic, p), deadline)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, high - 1)])
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                second = tick_second(msg.key())
                if second is not None:
                    self._believe(plan, second)
                break
        consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in partitions])
        return plan.newest

    def _read_others(self) -> None:
        """Ticks another oscillator wrote meanwhile: not written again by this one."""
        assert self._tail is not None
        for msg in self._tail.consume(1000, timeout=0):
            error = msg.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    log.debug("oscillator tail: %s", error)
                continue
            second = tick_second(msg.key())
            if second is not None:
                self.stats.ticks_seen += 1
                self._believe(self._plan, second)

    def _believe(self, plan: TickPlan, second: int) -> None:
        """Take a tick read from the topic into ``plan``, unless it is from the future."""
        if not plan.seen(second, self.clock.now_ms()):
            log.warning(
                "oscillator: ignored tick %d in %s, %d s ahead of this host's clock",
                second,
                self.config.topic,
                second - self.clock.now_ms() // 1000,
            )

    def _write(self, seconds: range, now_ms: int) -> None:
        """Write ``seconds`` in order and wait for them; on a failure, what was not
        acknowledged is written again on the next round."""
        assert self._producer is not None
        acked: list[int] = []
        failed: list[str] = []

        def report(err: Any, msg: Any) -> None:
            if err is None:
                acked.append(int(msg.key()))
            else:
                failed.append(str(err))

        for second in seconds:
            tick = OutgoingRecord(self.config.topic, tick_key(second), TICK_VALUE)
            produce(self._producer, tick, report)
        self._producer.flush(WRITE_TIMEOUT_MS / 1000 + 1)
        taken = set(acked)
        for second in seconds:  # up to the first one not taken: that one is written again
            if second not in taken:
                break
            self._plan.seen(second, self.clock.now_ms())
        written = len(acked)
        self.stats.ticks_written += written
        self.stats.caught_up += sum(1 for s in acked if s < now_ms // 1000)
        self.stats.last_tick_s = self._plan.newest or 0
        self.stats.behind_s = len(self._plan.due(self.clock.now_ms()))
        if len(seconds) > 1 and written:  # catching up (the rest, if any, next round)
            log.info("oscillator caught up %d second(s) up to %d", written, seconds[-1])
        self._failed = bool(failed) or written < len(seconds)
        if self._failed:
            self.stats.write_failures += 1
            log.warning(
                "oscillator: Kafka at %s did not take %d tick(s) (%s); %d second(s) behind, "
                "retrying every second",
                self.config.bootstrap_servers,
                len(seconds) - written,
                failed[0] if failed else "no acknowledgement in time",
                self.stats.behind_s,
            )


def _serve_metrics(stats: OscillatorStats, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = stats.prometheus().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # no line per scrape

    server = LoggingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="oscillator-metrics", daemon=True).start()
    log.info("oscillator metrics on http://%s:%d/metrics", host, server.server_address[1])
    return server
