"""Schedules spread over time with updates and cancels, and the counts every
exactly-once end-to-end test ends with: nothing lost, duplicated or early."""

from __future__ import annotations

from collections import Counter

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import Delivery


def schedule_spread(
    config: ClientConfig, target: str, prefix: str, total: int, start_ms: int, span_ms: int
) -> dict[str, int]:
    """``total`` schedules due over ``span_ms`` from ``start_ms`` (the first ones already
    due); of those due 15 s or more ahead (well past the lead), every 10th is updated
    (payload ``updated-<n>``, due 3 s later) and every 25th cancelled, before they are
    handed over (those written just before the due time: ``tests/e2e/test_late_cancels.py``).

    Returns:
        The due time of each schedule that must be delivered.
    """
    due: dict[str, int] = {}
    with Scheduler(config) as client:
        for i in range(total):
            sid = f"{prefix}-{i}"
            at = start_ms + i * span_ms // total - 2_000
            client.schedule(sid, f"payload-{i}".encode(), target, at=ms_to_datetime(at),
                            target_key=f"k{i}")  # fmt: skip
            due[sid] = at
        later = [i for i in range(total) if due[f"{prefix}-{i}"] >= start_ms + 15_000]
        for i in later[::10]:
            sid = f"{prefix}-{i}"
            due[sid] += 3_000
            client.schedule(sid, f"updated-{i}".encode(), target, at=ms_to_datetime(due[sid]),
                            target_key=f"k{i}")  # fmt: skip
        for i in later[5::25]:
            client.cancel(f"{prefix}-{i}")
            del due[f"{prefix}-{i}"]
    return due


def check_exactly_once(deliveries: list[Delivery], due: dict[str, int]) -> None:
    """Each schedule of ``due`` delivered once, nothing else, none stamped or seen before
    its due time."""
    counts = Counter(d.schedule_id for d in deliveries)
    duplicates = {k: n for k, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} duplicated: {list(duplicates.items())[:5]}; " + (
        "; ".join(_seen(d) for d in deliveries if d.schedule_id in list(duplicates)[:3])
    )
    lost = set(due) - set(counts)
    assert not lost, f"{len(lost)} lost: {sorted(lost)[:5]}"
    unknown = {str(k) for k in counts} - set(due)
    assert not unknown, f"{len(unknown)} delivered that should not be: {sorted(unknown)[:5]}"
    early = [d for d in deliveries if d.timestamp_ms < due[d.schedule_id or ""]]
    assert not early, f"{len(early)} stamped before due"
    seen_early = [d for d in deliveries if d.arrival_ms < due[d.schedule_id or ""]]
    assert not seen_early, f"{len(seen_early)} visible before due"


def _seen(d: Delivery) -> str:
    """Where and when a delivery was written and read, with the headers delayline set."""
    own = {k: v for k, v in d.headers if k.startswith(("scheduler-", "delayline-"))}
    return (
        f"{d.schedule_id} at {d.topic}/{d.partition}@{d.offset} stamped {d.timestamp_ms} "
        f"read {d.arrival_ms} {own}"
    )


def check_counts(deliveries: list[Delivery], due: dict[str, int]) -> None:
    """:func:`check_exactly_once`, and the keys, payloads and updates
    :func:`schedule_spread` wrote."""
    check_exactly_once(deliveries, due)
    for d in deliveries:
        n = (d.schedule_id or "").rsplit("-", 1)[1]
        assert d.key == f"k{n}".encode()
        assert d.value in (f"payload-{n}".encode(), f"updated-{n}".encode())
    updated = [d for d in deliveries if (d.value or b"").startswith(b"updated-")]
    assert updated, "no update was delivered"
    for d in updated:  # the update's due time, not the first version's
        assert d.timestamp_ms >= due[d.schedule_id or ""]


def report(what: str, deliveries: list[Delivery], due: dict[str, int]) -> None:
    late = sorted(d.arrival_ms - due[d.schedule_id or ""] for d in deliveries)
    print(
        f"\n{what}: {len(deliveries)} delivered once each, 0 lost, 0 early; lateness p50 "
        f"{late[len(late) // 2]} ms, p99 {late[int(len(late) * 0.99)]} ms, max {late[-1]} ms"
    )
