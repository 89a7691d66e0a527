"""How far the pipeline is behind its input: ``delayline_input_lag_records{topic}``.

At each scrape (at most once every ``every_ms``), the records of each input topic that
lie between where the last micro-batch stopped reading (Spark's progress) and the end of
the partition now (the high watermark: transaction markers and delayline's own
tombstones count too, so a pipeline that is caught up shows a few, not zero). With
batching on need a few thousand wait by design (up to ``--batch-records``, or
``--batch-wait``); a figure that keeps growing is a pipeline that cannot keep up.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from delayline.core.clock import Clock, SystemClock
from delayline.errors import KafkaUnavailableError

log = logging.getLogger(__name__)

Positions = dict[tuple[str, int], int]


def batch_ends(progress: Mapping[str, Any]) -> Positions:
    """Where a Spark progress report's Kafka sources stopped reading, by partition.

    Spark gives each source's ``endOffset`` as JSON text (or already parsed), the Kafka
    source's shape being ``{"topic": {"partition": offset}}``; other sources are skipped.
    """
    out: Positions = {}
    for source in progress.get("sources") or []:
        end = source.get("endOffset") if isinstance(source, Mapping) else None
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if not isinstance(end, Mapping):
            continue
        for topic, parts in end.items():
            if not isinstance(parts, Mapping):
                continue
            for part, offset in parts.items():
                if isinstance(offset, int) and str(part).isdigit():
                    out[(str(topic), int(part))] = offset
    return out


def lag_by_topic(read: Positions, ends: Positions) -> dict[str, int]:
    """Records between ``read`` and ``ends``, summed per topic (never negative)."""
    lag: dict[str, int] = {}
    for (topic, part), end in ends.items():
        position = read.get((topic, part))
        if position is not None:
            lag[topic] = lag.get(topic, 0) + max(0, end - position)
    return lag


class InputLag(Collector):
    """``delayline_input_lag_records{topic}`` at scrape time.

    Args:
        read: Where the last micro-batch stopped, by partition (empty before the first).
        ends: The end of each given partition now; raises ``KafkaUnavailableError``.
        clock: "Now".
        every_ms: How long an answer stands (a scrape every second asks Kafka once).
    """

    def __init__(
        self,
        read: Callable[[], Positions],
        ends: Callable[[list[tuple[str, int]]], Positions],
        clock: Clock | None = None,
        every_ms: int = 5_000,
    ) -> None:
        self.read = read
        self.ends = ends
        self.clock = clock or SystemClock()
        self.every_ms = every_ms
        self._lock = threading.Lock()
        self._asked: tuple[int, dict[str, int]] | None = None

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "delayline_input_lag_records",
            "Records of an input topic after where the last micro-batch stopped reading.",
            labels=["topic"],
        )
        for topic, n in sorted(self._lag().items()):
            family.add_metric([topic], n)
        yield family

    def _lag(self) -> dict[str, int]:
        now_ms = self.clock.now_ms()
        with self._lock:
            if self._asked is not None and now_ms - self._asked[0] < self.every_ms:
                return self._asked[1]
            read = self.read()
            if not read:  # no batch yet: nothing to ask Kafka
                return {}
            try:
                lag = lag_by_topic(read, self.ends(sorted(read)))
            except KafkaUnavailableError as exc:
                log.debug("input lag not measured: %s", exc)
                lag = {}
            self._asked = (now_ms, lag)
            return lag
