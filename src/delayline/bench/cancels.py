"""The ``cancels`` scenario: how close to its due time a cancel can be written and win.

Schedules due one after another are handed to the committer a lead ahead (the default
5 s); each is then cancelled at one of :data:`AHEAD_MS` before its due time. A cancel
wins when the schedule is never delivered. Controls (never cancelled) keep the usual
counts: none early, duplicated or lost.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

from confluent_kafka import Producer

from delayline.bench.run import (
    BenchEnv,
    progress,
    scenario_figures,
    wait_accepted,
    write_schedules,
)
from delayline.dev.harness import DeliveryCollector
from delayline.kafka.config import kafka_client_config

AHEAD_MS = (2_000, 1_000, 500, 200, 100, 50, 20, 10, 5, 2, 0)
"""How long before the due time each step's cancels are written."""
SPACING_MS = 97
"""Between two due times (cancels and controls interleaved)."""
START_MS = 20_000
"""The first due time, after writing: past the lead, once everything is read."""


def cancels(env: BenchEnv, size: Any) -> dict[str, Any]:
    """``size.count`` cancels per step of :data:`AHEAD_MS`, and as many controls."""
    per = size.count
    # (id the client writes, how long before due it is cancelled; None: a control)
    steps: list[int | None] = [a for _ in range(per) for a in AHEAD_MS] + [None] * per
    random.Random(7).shuffle(steps)
    ids = [f"cancels-{i}" for i in range(len(steps))]
    ahead = dict(zip(ids, steps, strict=True))
    base = time.time_ns() // 1_000_000 + START_MS
    due = {sid: base + i * SPACING_MS for i, sid in enumerate(ids)}
    with DeliveryCollector(env.bootstrap, [env.target_topic]) as seen:
        load_from = time.time()
        write_schedules(env, len(ids), lambda i, now: due[ids[i]], prefix="cancels")
        progress(f"cancels: {len(ids):,} schedules written; cancelling on time")
        accepted_ms = wait_accepted(env, len(ids), 120, "cancels")
        acked = _cancel_on_time(
            env, [(sid, due[sid] - a) for sid, a in ahead.items() if a is not None]
        )
        time.sleep(max(0, max(due.values()) + 5_000 - time.time_ns() // 1_000_000) / 1000)
        deliveries = seen.snapshot()
        load_to = time.time()
    lost: Counter[int] = Counter()
    for d in deliveries:
        step = ahead.get(d.schedule_id or "")
        if step is not None:
            lost[step] += 1
    controls = [d for d in deliveries if ahead.get(d.schedule_id or "") is None]
    control_due = {sid: due[sid] for sid, a in ahead.items() if a is None}
    figures = scenario_figures(
        env, controls, control_due, load_from, load_to, accepted_ms, None, written=len(ids)
    )
    figures["cancels"] = {
        str(a): {
            "written": per,
            "won": per - lost[a],
            "acked_before_due_ms_min": min(
                (due[sid] - at for sid, at in acked.items() if ahead[sid] == a), default=None
            ),
        }
        for a in AHEAD_MS
    }
    wins = [a for a in AHEAD_MS if lost[a] == 0 and all(lost[b] == 0 for b in AHEAD_MS if b > a)]
    figures["cancel_always_won_at_ms"] = min(wins) if wins else None
    return figures


def _cancel_on_time(env: BenchEnv, cancels: list[tuple[str, int]]) -> dict[str, int]:
    """Write each tombstone at its time; when each was acknowledged (ms)."""
    producer = Producer(
        kafka_client_config(env.bootstrap, **{"linger.ms": 0, "partitioner": "murmur2_random"})
    )
    acked: dict[str, int] = {}

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.key().decode()] = time.time_ns() // 1_000_000

    for sid, at in sorted(cancels, key=lambda item: item[1]):
        time.sleep(max(0, at - time.time_ns() // 1_000_000) / 1000)
        producer.produce(env.schedules_topic, None, sid.encode(), on_delivery=done)
        producer.flush(30)  # acknowledged now: the time it became visible
    return acked
