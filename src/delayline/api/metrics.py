"""Prometheus metrics of the API process: requests and the catalog."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

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


class ApiMetrics:
    """The API's registry, with request counts and durations by route."""

    def __init__(
        self, store: CatalogStore, follower: CatalogFollower, clock: Clock | None = None
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
