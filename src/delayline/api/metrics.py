"""Prometheus metrics of the API process: requests and the catalog."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from delayline.api.retry_watch import RetryWatch
from delayline.catalog import CatalogFollower, CatalogStore
from delayline.core.clock import Clock, SystemClock

# Label values come from this set only: a client must not be able to mint series.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})


class CatalogCollector(Collector):
    """Reads the catalog and its follower at scrape time."""

    def __init__(self, store: CatalogStore, follower: CatalogFollower, clock: Clock) -> None:
        self.store = store
        self.follower = follower
        self.clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        status = self.follower.status()
        yield GaugeMetricFamily(
            "delayline_catalog_pending",
            "Pending schedules in the catalog.",
            value=self.store.stats(self.clock.now_ms(), window_minutes=1).pending,
        )
        lag = GaugeMetricFamily(
            "delayline_catalog_lag_records", "Records not yet in the catalog.", labels=["topic"]
        )
        for topic, n in sorted(status.lag.items()):
            lag.add_metric([topic], n)
        yield lag
        yield GaugeMetricFamily(
            "delayline_catalog_caught_up",
            "1 once every followed partition was read to its end.",
            value=1 if status.caught_up else 0,
        )
        yield GaugeMetricFamily(
            "delayline_catalog_records_applied",
            "Records applied to the catalog since start.",
            value=status.records_applied,
        )
        yield GaugeMetricFamily(
            "delayline_catalog_records_skipped",
            "Records the catalog could not use since start (logged with their offsets).",
            value=status.records_skipped,
        )


class RetryCollector(Collector):
    """The watched retrying consumer groups' retries and dead letters."""

    def __init__(self, watch: RetryWatch) -> None:
        self.watch = watch

    def collect(self) -> Iterator[Metric]:
        retries = CounterMetricFamily(
            "delayline_retries_delivered",
            "Retries delivered back to a retrying consumer group, by the topic each record "
            "was first read from.",
            labels=["group", "source_topic"],
        )
        dead = CounterMetricFamily(
            "delayline_retry_dead_letters",
            "A retrying consumer group's dead letters, by source topic and reason "
            "(exhausted, not-retryable, unschedulable).",
            labels=["group", "source_topic", "reason"],
        )
        for counts in self.watch.snapshot():
            for source, n in sorted(counts.retries.items()):
                retries.add_metric([counts.group, source], n)
            for (source, reason), n in sorted(counts.dead_letters.items()):
                dead.add_metric([counts.group, source, reason], n)
        yield retries
        yield dead


class ApiMetrics:
    """The API's registry, with request counts and durations by route."""

    def __init__(
        self,
        store: CatalogStore,
        follower: CatalogFollower,
        clock: Clock | None = None,
        *,
        retries: RetryWatch | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "delayline_api_requests",
            "HTTP requests by method, route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "delayline_api_request_seconds",
            "HTTP request duration by route.",
            ["route"],
            registry=self.registry,
        )
        self.registry.register(CatalogCollector(store, follower, clock or SystemClock()))
        ProcessCollector(registry=self.registry)  # memory, CPU and open files of this process
        if retries is not None:
            self.registry.register(RetryCollector(retries))

    async def middleware(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        """Count and time every request under its route template (not its path)."""
        began = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        name = getattr(route, "path", "unmatched")
        method = request.method if request.method in _METHODS else "other"
        self.requests.labels(method, name, str(response.status_code)).inc()
        self.duration.labels(name).observe(time.perf_counter() - began)
        return response
