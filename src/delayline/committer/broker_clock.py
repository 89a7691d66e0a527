"""The offset between this host's clock and the broker's, measured at start.

Due times are judged by the broker's clock: it stamps ``LogAppendTime`` records and
the times a ``read_committed`` reader compares against come from hosts that agree
with it. The committer never commits before a due time by the broker's clock: it waits
until ``host time + low_ms >= due``, ``low_ms`` being the smallest offset the
measurement allows. A skew over :data:`MAX_SKEW_MS` refuses to start (the clocks are
not synchronised); one over :data:`WARN_SKEW_MS` is logged.

The measurement: tombstones written to the in-flight topic, whose records the broker
stamps on append (``LogAppendTime``); the stamp falls between the send and the
acknowledgement, so each probe bounds the offset; the tightest of a few probes is kept.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Producer

from delayline.core.clock import Clock, SystemClock
from delayline.errors import ConfigError
from delayline.fire.inflight import CLOCK_PROBE_KEY
from delayline.kafka.config import kafka_client_config

log = logging.getLogger(__name__)

WARN_SKEW_MS = 20
MAX_SKEW_MS = 2_000
PROBES = 5


class ClockSkewError(ConfigError):
    """The host's clock and the broker's disagree by more than :data:`MAX_SKEW_MS`."""


@dataclass(frozen=True, slots=True)
class BrokerOffset:
    """Broker time minus host time lies in ``[low_ms, high_ms]``.

    Attributes:
        low_ms: The smallest offset the probes allow.
        high_ms: The largest.
    """

    low_ms: int
    high_ms: int

    @property
    def mid_ms(self) -> int:
        """The best single guess."""
        return (self.low_ms + self.high_ms) // 2


UNKNOWN = BrokerOffset(0, 0)
"""Assumed when the broker cannot be asked: the clocks agree."""


def bound(stamp_ms: int, sent_ms: int, acked_ms: int) -> BrokerOffset:
    """What one probe says: the broker stamped ``stamp_ms`` between ``sent_ms`` and
    ``acked_ms`` of the host (each rounded to the millisecond, hence the 1 ms slack)."""
    return BrokerOffset(stamp_ms - acked_ms - 1, stamp_ms - sent_ms + 1)


def judge(offset: BrokerOffset) -> BrokerOffset:
    """Log or refuse a large skew; returns ``offset``.

    Raises:
        ClockSkewError: the skew is over :data:`MAX_SKEW_MS`.
    """
    skew = offset.mid_ms
    if abs(skew) > MAX_SKEW_MS:
        raise ClockSkewError(
            f"this host's clock is {skew:+d} ms off the broker's (over {MAX_SKEW_MS} ms): "
            "deliveries would be early or late by that much; synchronise the clocks (NTP)"
        )
    if abs(skew) > WARN_SKEW_MS:
        log.warning(
            "this host's clock is %+d ms off the broker's; deliveries wait for the "
            "broker's due time",
            skew,
        )
    else:
        log.info("broker clock offset %d..%d ms", offset.low_ms, offset.high_ms)
    return offset


def measure(bootstrap_servers: str, topic: str, clock: Clock | None = None) -> BrokerOffset:
    """Probe the broker's clock through ``topic`` (which must stamp ``LogAppendTime``).

    Returns :data:`UNKNOWN` (with a warning) when no probe tells.

    Raises:
        ClockSkewError: see :func:`judge`.
    """
    clock = clock or SystemClock()
    producer = Producer(kafka_client_config(bootstrap_servers, **{"linger.ms": 0}))
    best: BrokerOffset | None = None
    for _ in range(PROBES):
        stamp: list[tuple[int, int]] = []

        def on_delivery(err: Any, msg: Any, stamp: list[tuple[int, int]] = stamp) -> None:
            if err is None:
                stamp.append(msg.timestamp())

        sent = clock.now_ms()
        producer.produce(topic, key=CLOCK_PROBE_KEY, value=None, on_delivery=on_delivery)
        producer.flush(5)
        acked = clock.now_ms()
        if not stamp or stamp[0][0] != TIMESTAMP_LOG_APPEND_TIME:
            continue
        probe = bound(stamp[0][1], sent, acked)
        if best is None or probe.high_ms - probe.low_ms < best.high_ms - best.low_ms:
            best = probe
    if best is None:
        log.warning(
            "could not measure the broker's clock through %s; assuming it agrees with this host's",
            topic,
        )
        return UNKNOWN
    return judge(best)


class BrokerTime:
    """The broker's time as this host tells it: the host's clock plus the smallest offset
    the last measurement allows (:func:`measure`), so a time judged passed here has
    passed on the broker.

    Args:
        bootstrap_servers: Kafka bootstrap list.
        topic: Where probes are written (stamped ``LogAppendTime``).
        clock: The host's time.
    """

    def __init__(self, bootstrap_servers: str, topic: str, clock: Clock) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._topic = topic
        self.clock = clock
        self.offset = UNKNOWN

    def measure(self) -> None:
        """Measure the offset (again after a restart: the host's clock may have been
        stepped).

        Raises:
            ClockSkewError: see :func:`judge`.
        """
        self.offset = measure(self._bootstrap_servers, self._topic)

    def host_ms(self, broker_ms: int) -> int:
        """The host time by which ``broker_ms`` has surely passed on the broker."""
        return broker_ms - self.offset.low_ms

    def broker_ms(self, host_ms: int) -> int:
        """The broker time surely passed at ``host_ms``."""
        return host_ms + self.offset.low_ms

    def wait_until(self, broker_ms: int) -> None:
        """Sleep until ``broker_ms`` has passed by the broker's clock."""
        remaining = self.host_ms(broker_ms) - self.clock.now_ms()
        if remaining > 0:
            time.sleep(remaining / 1000)
