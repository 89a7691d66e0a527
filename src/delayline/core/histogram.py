"""A Prometheus histogram observed a batch of values at a time.

``prometheus_client``'s :class:`~prometheus_client.Histogram` takes a lock and walks its
buckets for every value: 1.4-1.5 us a value here, and delayline observes the lateness of
every delivery, once or twice. This one takes a whole batch's values (a group's or a
fire task's lateness, in milliseconds) under one lock, a bisection each, and is exposed
as a histogram of that name is (``_bucket``, ``_count``, ``_sum``; no ``_created``).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from delayline.errors import ConfigError


class _Counts:
    """One label set's bucket counts (not cumulative) and sum, in milliseconds."""

    __slots__ = ("buckets", "lock", "sum_ms")

    def __init__(self, size: int) -> None:
        self.buckets = [0] * size
        self.sum_ms = 0
        self.lock = threading.Lock()


class BatchHistogram(Collector):
    """A histogram of durations in seconds, observed as batches of milliseconds.

    Args:
        name: The metric's name (``..._seconds``).
        documentation: Its help text.
        buckets_s: Upper bounds of its buckets, in seconds, ascending (``+Inf`` is added).
        labelnames: Its label names; then observe through :meth:`labels`.
        registry: Where it is registered, if anywhere.

    Thread-safe: batches may be observed from any thread while it is scraped.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        buckets_s: Sequence[float],
        labelnames: Sequence[str] = (),
        registry: CollectorRegistry | None = None,
    ) -> None:
        if list(buckets_s) != sorted(buckets_s):
            raise ConfigError(f"{name}: buckets must ascend: {list(buckets_s)}")
        self._name = name
        self._documentation = documentation
        self._bounds_s = tuple(float(b) for b in buckets_s)
        self._bounds_ms = tuple(b * 1000 for b in self._bounds_s)
        self._labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], _Counts] = {}
        self._lock = threading.Lock()
        if not self._labelnames:
            self._child(())  # shown (empty) from the start, as prometheus_client does
        if registry is not None:
            registry.register(self)

    def observe_ms(self, values_ms: Iterable[int], *labels: str) -> None:
        """Count each of ``values_ms`` (negative ones as 0), under ``labels``."""
        counts = self._child(labels)
        bounds = self._bounds_ms
        buckets = counts.buckets
        with counts.lock:
            for value in values_ms:
                at_least_0 = max(value, 0)
                buckets[bisect_left(bounds, at_least_0)] += 1
                counts.sum_ms += at_least_0

    def labels(self, *values: str) -> _Labelled:
        """This histogram under the label values ``values``."""
        if len(values) != len(self._labelnames):
            raise ConfigError(f"{self._name}: {len(self._labelnames)} label value(s) expected")
        self._child(values)  # shown (empty) from now on, as prometheus_client does
        return _Labelled(self, values)

    def collect(self) -> Iterator[Metric]:
        """The histogram, as Prometheus reads it."""
        family = HistogramMetricFamily(
            self._name, self._documentation, labels=list(self._labelnames)
        )
        with self._lock:
            children = list(self._children.items())
        for labels, counts in children:
            with counts.lock:
                buckets, sum_ms = list(counts.buckets), counts.sum_ms
            cumulative, total = [], 0
            for bound, n in zip((*self._bounds_s, float("inf")), buckets, strict=True):
                total += n
                cumulative.append((_bound_text(bound), float(total)))
            family.add_metric(list(labels), cumulative, sum_value=sum_ms / 1000)
        yield family

    def _child(self, labels: tuple[str, ...]) -> _Counts:
        counts = self._children.get(labels)
        if counts is None:
            with self._lock:
                counts = self._children.setdefault(labels, _Counts(len(self._bounds_ms) + 1))
        return counts


class _Labelled:
    """A :class:`BatchHistogram` under one set of label values."""

    __slots__ = ("_histogram", "_labels")

    def __init__(self, histogram: BatchHistogram, labels: tuple[str, ...]) -> None:
        self._histogram = histogram
        self._labels = labels

    def observe_ms(self, values_ms: Iterable[int]) -> None:
        """Count each of ``values_ms`` (negative ones as 0)."""
        self._histogram.observe_ms(values_ms, *self._labels)


def _bound_text(bound: float) -> str:
    """A bucket's ``le`` as prometheus_client writes it (``0.005``, ``1.0``, ``+Inf``)."""
    return "+Inf" if bound == float("inf") else repr(float(bound))
