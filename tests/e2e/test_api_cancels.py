"""A cancel through the API a moment after its schedule, before the API's catalog has
read it: it must win. The session's shared pipeline, and an API over its topics."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from delayline.dev.harness import DeliveryCollector
from tests.support import LATENESS_TOLERANCE_MS, RunningPipeline, running_api

TOKEN = "cancels-token"
DUE_IN_MS = 4_000
"""Each schedule's delay: what a service setting a timeout writes."""
CANCELLED = 5


@pytest.fixture(scope="module")
def http(pipeline: RunningPipeline, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with (
        running_api(pipeline, tmp_path_factory, TOKEN) as url,
        httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=20
        ) as client,
    ):
        yield client


def test_a_cancel_50_ms_after_its_schedule_always_wins(
    pipeline: RunningPipeline, http: httpx.Client
) -> None:
    """Five schedules due in 4 s, each cancelled 0-40 ms after its POST was answered
    (the catalog has most likely not read it yet): every DELETE is 202, its tombstone
    in the schedule's own partition, and none is delivered. A sixth, not cancelled, is
    delivered: the pipeline did run."""
    target = pipeline.target()
    kept = f"kept-{target}"
    with DeliveryCollector(pipeline.bootstrap, [target]) as seen:
        for n in range(CANCELLED):
            sid = f"race-{n}-{target}"
            body = {"id": sid, "target_topic": target, "payload": "timeout", "delay_ms": DUE_IN_MS}
            created = http.post("/schedules", json=body)
            assert created.status_code == 202, created.text
            time.sleep(n * 0.010)
            began = time.monotonic()
            cancelled = http.delete(f"/schedules/{sid}")
            assert cancelled.status_code == 202, cancelled.text
            assert time.monotonic() - began < DUE_IN_MS / 1000 / 2
            (record,) = cancelled.json()["records"]
            where = created.json()
            assert (record["topic"], record["partition"]) == (where["topic"], where["partition"])
            assert record["offset"] > where["offset"]
        body = {"id": kept, "target_topic": target, "payload": "kept", "delay_ms": DUE_IN_MS}
        assert http.post("/schedules", json=body).status_code == 202
        seen.wait_for(lambda d: any(x.schedule_id == kept for x in d), timeout_s=30)
        time.sleep(LATENESS_TOLERANCE_MS / 1000)
        delivered = sorted(d.schedule_id or "" for d in seen.snapshot())
    assert delivered == [kept], f"cancelled yet delivered: {sorted(set(delivered) - {kept})}"
