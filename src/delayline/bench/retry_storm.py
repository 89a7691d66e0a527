"""The ``retry-storm`` scenario: a consumer fails ``rate_per_s`` records a second for
``duration_s``, and :class:`~delayline.client.consumer.Retries` sends each for another
try one second later (no jitter), through the pipeline, to the group's retry topic (the
bench's target). Figures are those of every scenario, for the retries: their lateness
against the due time each was given, the pipeline's CPU per retry, none early,
duplicated or lost."""

from __future__ import annotations

import time
from typing import Any

from delayline.bench.run import (
    BenchEnv,
    progress,
    scenario_figures,
    wait_accepted,
    wait_delivered,
)
from delayline.client import ClientConfig, RetryPolicy
from delayline.client.consumer import Retries, RetryConfig, retry_id
from delayline.contract import ConsumedRecord
from delayline.core.clock import Clock
from delayline.dev.harness import DeliveryCollector

BACKOFF_MS = 1_000
SOURCE_PARTITIONS = 8
"""The failed records' source partitions (their offsets count up within each)."""


class _Stamped(Clock):
    """The system clock, remembering the last time it told: each retry's failure time."""

    def __init__(self) -> None:
        self.last_ms = 0

    def now_ms(self) -> int:
        self.last_ms = time.time_ns() // 1_000_000
        return self.last_ms


def retry_storm(env: BenchEnv, size: Any) -> dict[str, Any]:
    """``size.rate_per_s`` failures a second for ``size.duration_s``, each retried after
    :data:`BACKOFF_MS`."""
    rate, total = size.rate_per_s, size.rate_per_s * size.duration_s
    clock = _Stamped()
    config = RetryConfig(
        "bench", policy=RetryPolicy(initial_delay_ms=BACKOFF_MS), retry_topic=env.target_topic
    )
    client = ClientConfig(bootstrap_servers=env.bootstrap, schedules_topic=env.schedules_topic)
    retries = Retries(client, config, clock=clock)
    error = TimeoutError("the payment service timed out")
    due: dict[str, int] = {}
    with DeliveryCollector(env.bootstrap, [env.target_topic]) as seen:
        load_from = time.time()
        began = time.monotonic()
        for i in range(total):
            wait = began + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            partition = i % SOURCE_PARTITIONS
            record = ConsumedRecord("orders", partition, i // SOURCE_PARTITIONS, 0, None,
                                    b"x" * 100, (("trace", b"storm"),))  # fmt: skip
            retries.failed(record, error)
            due[retry_id(config.group, record)] = clock.last_ms + BACKOFF_MS
            if i % 10_000 == 0:
                progress(f"failed {i:,}/{total:,}", end="\r")
        retries.flush()
        written_s = time.monotonic() - began
        accepted_ms = wait_accepted(env, total, 600 + total / 200, "retry-storm")
        deliveries = wait_delivered(seen, set(due), 120 + total / 200, "retry-storm")
        load_to = time.time()
    figures = scenario_figures(env, deliveries, due, load_from, load_to, accepted_ms, None)
    figures["failures_per_s"] = round(total / written_s)
    return figures
