"""How far the pipeline is behind its input: ``delayline_input_lag_records{topic}``.

At each scrape (at most once every ``every_ms``), the records of each input topic that
lie between where the last micro-batch stopped reading (Spark's progress) and the end of
the partition now (the high watermark: transaction markers and delayline's own
tombstones count too, so a pipeline that is caught up shows a few, not zero). With
batching on need a few thousand wait by design (up to ``--batch-records``, or
``--batch-wait``); a figure that keeps growing is a pipeline that cannot keep up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from delayline.committer.checkpoint_log import kafka_offsets
from delayline.core.cached import Cached
from delayline.core.clock import Clock
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
        if isinstance(source, Mapping):
            out.update(kafka_offsets(source.get("endOffset")))
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
        self._lag = Cached(self._measure, every_ms, clock, keep=lambda lag: lag is not None)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "delayline_input_lag_records",
            "Records of an input topic after where the last micro-batch stopped reading.",
            labels=["topic"],
        )
        for topic, n in sorted((self._lag() or {}).items()):
            family.add_metric([topic], n)
        yield family

    def _measure(self) -> dict[str, int] | None:
        """The lag by topic; ``None`` before the first batch (nothing to ask Kafka yet,
        and nothing kept: the next scrape asks again)."""
        read = self.read()
        if not read:
            return None
        try:
            return lag_by_topic(read, self.ends(sorted(read)))
        except KafkaUnavailableError as exc:
            log.debug("input lag not measured: %s", exc)
            return {}
