"""The collectors of :class:`delayline.pipeline.metrics.PipelineMetrics` that read their
figures at scrape time: pacing, the waker, readiness and garbage collections."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from delayline.committer.config import CommitterStatus
from delayline.core.cached import Cached
from delayline.core.clock import Clock
from delayline.core.heap import PAUSE_BUCKETS_S, GcPauses
from delayline.pipeline.wake import WakerStats


class InflightCollector(Collector):
    """``delayline_inflight_partitions{topic}``: the in-flight topic's partitions, asked
    of ``count`` at most every ``every_ms`` (the last answer stands while Kafka does not
    give one)."""

    def __init__(
        self,
        topic: str,
        count: Callable[[], int | None],
        clock: Clock | None = None,
        every_ms: int = 60_000,
    ) -> None:
        self.topic = topic
        self._count = Cached(count, every_ms, clock)
        # An answer of None (Kafka did not give one): the last one stands.
        self._last: int | None = None

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "delayline_inflight_partitions",
            "Partitions of the in-flight topic: the committers of its group should own "
            "them all between them.",
            labels=["topic"],
        )
        found = self._count()
        self._last = self._last if found is None else found
        if self._last is not None:
            family.add_metric([self.topic], self._last)
        yield family


class PacingCollector(Collector):
    """Per target topic paced by a committer: deliveries held back by its rate, the delay
    that added (in total and the longest), the queue waiting for a slot, and the rate."""

    def __init__(self, status: Callable[[], CommitterStatus]) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        status = self._status()
        labels = ["committer", "target"]
        held = CounterMetricFamily(
            "delayline_paced_held", "Deliveries a target's rate held back.", labels=labels
        )
        delay = CounterMetricFamily(
            "delayline_paced_delay_seconds",
            "Delay a target's rate added to the deliveries it held back, in total.",
            labels=labels,
        )
        longest = GaugeMetricFamily(
            "delayline_paced_delay_max_seconds",
            "The longest delay a target's rate added to a delivery.",
            labels=labels,
        )
        queued = GaugeMetricFamily(
            "delayline_paced_queued",
            "Deliveries to a target waiting for a slot of its rate.",
            labels=labels,
        )
        rate = GaugeMetricFamily(
            "delayline_target_rate", "A target's delivery rate, per second.", labels=labels
        )
        for topic, pacing in status.pacing:
            at = [status.name, topic]
            held.add_metric(at, pacing.held)
            delay.add_metric(at, pacing.delay_ms / 1000)
            longest.add_metric(at, pacing.max_delay_ms / 1000)
            queued.add_metric(at, pacing.queued)
            if pacing.rate_per_s is not None:
                rate.add_metric(at, pacing.rate_per_s)
        yield from (held, delay, longest, queued, rate)


class ReviewsCollector(Collector):
    """What became of the review tombstones a committer's watch sent
    (:mod:`delayline.committer.reviews`): written, or dropped (refused for good)."""

    def __init__(self, status: Callable[[], CommitterStatus]) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        status = self._status()
        family = CounterMetricFamily(
            "delayline_committer_reviews",
            "Own tombstones a committer's watch wrote again for the hold to read, by "
            "outcome (dropped: refused by Kafka for good, the hold will not rewrite what "
            "the tombstone may hide from compaction).",
            labels=["committer", "outcome"],
        )
        family.add_metric([status.name, "written"], status.reviews_written)
        family.add_metric([status.name, "dropped"], status.reviews_dropped)
        yield family


class WakerCollector(Collector):
    """The waker's wake records, its margin and the input no batch was woken for yet."""

    def __init__(self, stats: Callable[[], WakerStats]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        yield CounterMetricFamily(
            "delayline_wakes", "Wake records written: each starts a micro-batch.", stats.wakes
        )
        yield GaugeMetricFamily(
            "delayline_wake_margin_seconds",
            "How long before a due time the waker wakes the pipeline for it.",
            stats.margin_ms / 1000,
        )
        if stats.unread is not None:
            yield GaugeMetricFamily(
                "delayline_input_unread",
                "Input records the committer's watch read that no micro-batch was woken "
                "for yet (batching on need).",
                stats.unread,
            )


class ReadyCollector(Collector):
    """``delayline_ready``, asked at each scrape."""

    def __init__(self, reasons: Callable[[], list[str]]) -> None:
        self.reasons = reasons

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "delayline_ready",
            "1 while the process is ready (what /readyz answers 200 for), else 0.",
            value=0 if self.reasons() else 1,
        )


class GcCollector(Collector):
    """How long this process's garbage collections took: every thread, the committer's
    among them, waits for one (:mod:`delayline.core.heap`)."""

    def __init__(self, pauses: GcPauses) -> None:
        self._pauses = pauses

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(
            "delayline_gc_pause_seconds",
            "Garbage collections of the process by generation: every thread waits for one.",
            labels=["generation"],
        )
        bounds = [str(b) for b in PAUSE_BUCKETS_S] + ["+Inf"]
        for generation, (counts, sum_s) in enumerate(self._pauses.snapshot()):
            cumulative, total = [], 0
            for bound, count in zip(bounds, counts, strict=True):
                total += count
                cumulative.append((bound, total))
            family.add_metric([str(generation)], cumulative, sum_s)
        yield family
