"""``delayline bench --scenario catalog``: page latency of the API's catalog at scale.

Fills a fresh SQLite catalog with pending schedules (as the follower would, through
:meth:`CatalogStore.apply`), then times the filtered pages the API and the admin page
ask for. No broker or pipeline is involved: this measures the store alone.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

from delayline.bench.run import progress
from delayline.catalog import PendingQuery, SqliteCatalog
from delayline.catalog.events import Upsert
from delayline.core.model import Schedule, SourceRef

TARGET_MS = 200.0
BATCH = 20_000
BASE_MS = 1_900_000_000_000
DAY_MS = 86_400_000


def queries() -> dict[str, PendingQuery]:
    """The pages timed: what the list, search and filters of the admin page ask."""
    window = (BASE_MS + DAY_MS, BASE_MS + 2 * DAY_MS)
    return {
        "first page by due time": PendingQuery(limit=100),
        "1000 rows by due time": PendingQuery(limit=1000),
        "id prefix": PendingQuery(id_prefix="order-0012", limit=100),
        "id prefix, sorted by id": PendingQuery(id_prefix="order-0012", sort="id", limit=100),
        "id contains (scans every id)": PendingQuery(id_contains="99999", limit=100),
        "id contains, no match": PendingQuery(id_contains="zzz", limit=100),
        "due window": PendingQuery(due_from_ms=window[0], due_to_ms=window[1], limit=100),
        "target topic": PendingQuery(target_topic="orders-3", limit=100),
        "target topic + due window": PendingQuery(
            target_topic="orders-3", due_from_ms=window[0], due_to_ms=window[1], limit=100
        ),
        "newest created": PendingQuery(sort="created", descending=True, limit=100),
        "id prefix + target topic": PendingQuery(
            id_prefix="order-0", target_topic="orders-7", limit=100
        ),
    }


def catalog_bench(pending: int, work_dir: Path, repeats: int = 7) -> dict[str, Any]:
    """Fill a catalog with ``pending`` schedules and time each query ``repeats`` times."""
    path = work_dir / "catalog-bench.db"
    for leftover in work_dir.glob("catalog-bench.db*"):
        leftover.unlink()
    store = SqliteCatalog(path)
    rng = random.Random(3)
    began = time.perf_counter()
    for start in range(0, pending, BATCH):
        changes = [_upsert(i, rng) for i in range(start, min(start + BATCH, pending))]
        store.apply(changes, {("bench-schedules", 0): start + len(changes)})
        done = start + len(changes)
        progress(
            f"catalog: {done:,}/{pending:,} pending written", end="\n" if done == pending else ""
        )
    fill_s = time.perf_counter() - began
    store.optimize()  # as the follower does once it has caught up
    pages: dict[str, Any] = {}
    for name, query in queries().items():
        timings = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            page = store.pending(query)
            timings.append((time.perf_counter() - t0) * 1000)
        pages[name] = {
            "rows": len(page.items),
            "median_ms": round(statistics.median(timings), 2),
            "max_ms": round(max(timings), 2),
        }
    t0 = time.perf_counter()
    stats = store.stats(BASE_MS)
    stats_ms = (time.perf_counter() - t0) * 1000
    store.close()
    size_mb = sum(f.stat().st_size for f in work_dir.glob("catalog-bench.db*")) / 2**20
    worst = max(p["median_ms"] for p in pages.values())
    return {
        "pending": pending,
        "fill_s": round(fill_s, 1),
        "fill_per_s": round(pending / fill_s),
        "file_mb": round(size_mb, 1),
        "pages": pages,
        "stats_ms": round(stats_ms, 1),
        "stats_pending": stats.pending,
        "worst_median_ms": worst,
        "target_ms": TARGET_MS,
        "met": worst < TARGET_MS,
    }


def table(figures: dict[str, Any]) -> str:
    """The result as a table for people."""
    lines = [
        f"catalog with {figures['pending']:,} pending schedules "
        f"(filled in {figures['fill_s']} s, {figures['fill_per_s']:,}/s, {figures['file_mb']} MiB)",
        f"{'page':<32} {'rows':>5} {'median':>10} {'max':>10}",
    ]
    for name, page in figures["pages"].items():
        lines.append(
            f"{name:<32} {page['rows']:>5} {page['median_ms']:>8.1f}ms {page['max_ms']:>8.1f}ms"
        )
    lines.append(f"{'dashboard stats':<32} {'':>5} {figures['stats_ms']:>8.1f}ms")
    verdict = "met" if figures["met"] else "NOT met"
    lines.append(
        f"target: every page under {figures['target_ms']:.0f} ms -> {verdict} "
        f"(worst median {figures['worst_median_ms']} ms)"
    )
    return "\n".join(lines)


def _upsert(i: int, rng: random.Random) -> Upsert:
    due = BASE_MS + rng.randrange(30 * DAY_MS)
    created = BASE_MS - DAY_MS + i
    schedule = Schedule(
        id=f"order-{i:07d}",
        due_ms=due,
        target_topic=f"orders-{i % 10}",
        target_key=f"customer-{i % 5000}".encode(),
        payload=b'{"order": %d}' % i,
        source=SourceRef("bench-schedules", i % 4, i, created),
    )
    return Upsert(schedule, created)
