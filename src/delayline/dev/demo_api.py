"""The demo's REST API and admin page: started beside the pipeline, checked at the end."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx

from delayline.api.config import ApiConfig
from delayline.api.server import ApiServer
from delayline.kafka.topics import TopicsConfig

DEMO_TOKEN = "demo-token"  # noqa: S105 - printed to the user; the demo API is local

Out = Callable[[str], None]


def demo_api(topics: TopicsConfig, catalog: Path, port: int, pipeline_url: str) -> ApiServer:
    """The API over the demo's topics, writes allowed with :data:`DEMO_TOKEN`; on any
    free port when ``port`` is taken."""
    return ApiServer(
        ApiConfig(
            topology=topics.topology,
            catalog_path=catalog,
            port=port,
            token=DEMO_TOKEN,
            pipeline_url=pipeline_url,
        ),
        any_port_if_taken=True,
    )


def api_agrees(url: str, expected_fired: int, out: Out, timeout_s: float = 20.0) -> bool:
    """Check the API's view against what the demo saw: every delivery recorded as
    fired, nothing of the demo left pending, the malformed record dead-lettered."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=url, timeout=10) as http:
        while True:
            stats = http.get("/stats", params={"minutes": 10}).json()
            fired = sum(m["deliveries"] for m in stats["fired_per_minute"])
            done = fired >= expected_fired and stats["dead_letters"] >= 1
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        pending = http.get("/schedules", params={"id": "order-", "limit": 1000}).json()["items"]
        info = http.get("/info").json()
    checks = {
        "API shows every delivery as fired": fired == expected_fired,
        "API shows nothing of the demo pending": pending == [],
        "API shows the dead letter": stats["dead_letters"] == 1,
        "API sees the pipeline running": info["pipeline"]["status"] == "running",
    }
    out(f"api: {fired} fired, {len(pending)} pending, {stats['dead_letters']} dead letter(s)")
    for name, ok in checks.items():
        out(f"  [{'ok' if ok else 'FAILED'}] {name}")
    return all(checks.values())


def hold(url: str, out: Out) -> None:
    """Keep everything running until Ctrl-C so the admin page can be explored."""
    out("")
    out(f"still running: open {url}/ui/ (token {DEMO_TOKEN}); press Ctrl-C to stop")
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        out("stopping")
