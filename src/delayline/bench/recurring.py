"""The ``recurring`` scenario: ``count`` schedules recurring every minute.

Their first occurrences are spread evenly over a minute, so the pipeline delivers
``count`` occurrences a minute, each one re-armed by the committer and read, held and
handed over again by Spark. Figures are those of every scenario, counted per
occurrence (``<id>#<number>``): lateness against each occurrence's nominal time, CPU
per occurrence, and none early, duplicated or lost.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from delayline.bench.run import (
    BenchEnv,
    ingest_per_s,
    progress,
    scenario_figures,
    wait_accepted,
    wait_delivered,
    write_schedules,
)
from delayline.contract.headers import KEY, OCCURRENCE
from delayline.core.recurrence import CatchUp, Recurrence
from delayline.dev.harness import Delivery, DeliveryCollector

PERIOD_MS = 60_000
"""Every minute."""
FIRST_MS = 30_000
"""The first occurrences fall due from this long after the writing starts."""
OCCURRENCES = 3
"""How many occurrences of each schedule the run waits for (the series goes on)."""


def recurring(env: BenchEnv, size: Any) -> dict[str, Any]:
    """``size.count`` schedules every minute; the first :data:`OCCURRENCES` of each."""
    count: int = size.count
    rule = Recurrence(every_ms=PERIOD_MS, max_occurrences=OCCURRENCES, catch_up=CatchUp.ALL)
    with DeliveryCollector(env.bootstrap, [env.target_topic]) as seen:
        load_from = time.time()
        base = time.time_ns() // 1_000_000 + FIRST_MS + count // 5

        def start(i: int, _now: int) -> int:
            return base + i * PERIOD_MS // count

        def sent(i: int) -> None:
            progress(f"sent {i:,}/{count:,}", end="\r")

        firsts = write_schedules(env, count, start, prefix="r", recurrence=rule, on_progress=sent)
        accepted_ms = wait_accepted(env, count, 600, "recurring")
        due = {
            f"{sid}#{n}": first + (n - 1) * PERIOD_MS
            for sid, first in firsts.items()
            for n in range(1, OCCURRENCES + 1)
        }
        timeout_s = (max(due.values()) - time.time_ns() // 1_000_000) / 1000 + 300
        raw = wait_delivered(seen, set(due), timeout_s, "recurring", name=occurrence_name)
        load_to = time.time()
    deliveries = [by_occurrence(d) for d in raw]
    figures = scenario_figures(env, deliveries, due, load_from, load_to, None, None)
    # Ingest is of the schedules written (each occurrence after the first is a re-arm).
    figures["ingest_per_s"] = ingest_per_s(count, load_from, accepted_ms)
    figures["occurrences_per_minute"] = count
    return figures


def occurrence_name(d: Delivery) -> str:
    """``<schedule id>#<occurrence number>`` of a delivery."""
    return f"{d.schedule_id}#{(dict(d.headers).get(OCCURRENCE) or b'?').decode()}"


def by_occurrence(d: Delivery) -> Delivery:
    """``d`` known by its occurrence (:func:`occurrence_name` as its ``scheduler-key``)."""
    name = occurrence_name(d).encode()
    return replace(d, headers=tuple((k, name if k == KEY else v) for k, v in d.headers))
