"""Pacing through the real pipeline: a target topic limited to 2,000 deliveries/s takes a
burst of 20,000 due in one second over 10 s, and then one across a SIGKILL; 1,700
schedules with a 10 s window are spread evenly over it. One pipeline for the three
(a start costs about 25 s): the windowed schedules, to another topic, are due once the
rated burst is delivered, and the second burst is written after their window.

The window is kept apart from the rated burst on purpose: a committer commits each
in-flight partition's groups in order, so a rated group whose commit waits for its
slot holds back the windowed group behind it, and reading a hand-over of 10,000 held
the committer's loop about 500 ms. On this 2-core box, with either alongside, whole
seconds of the window came to 120-133 and 218-221 deliveries (mean 167-170)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise

import httpx
import pytest

from delayline.client import ClientConfig, Scheduler
from delayline.committer.pacing import STEP_MS
from delayline.contract.headers import EPOCH, parse_epoch_ms
from delayline.dev.harness import Delivery, DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from tests.support import ARTIFACTS, make_topics, pipeline_args

RATE = 2_000
"""The rated target's deliveries per second."""
BURST = 20_000
"""Schedules due within one second to the rated target."""
KILLED_BURST = 10_000
"""A second burst to it, written after the windowed schedules' window: the SIGKILL's."""
WINDOWED = 1_700
WINDOW_MS = 10_000
"""170 a second, as 3,400 over 20 s were: the same per-second mean and tolerance (each
second within 20%: 136-204), over half as many seconds."""
LEAD = "20s"
"""Everything is handed to the committer well before it is due (it is written ~10 s
after the start and ingested in about as long): the rate queue then holds the whole
burst, and releases it in due order."""
TOLERANCE = 0.10
"""The burst's span within 10% of the rate's."""
STEP = RATE * STEP_MS // 1000
"""What a rated topic's commits may run ahead by: every whole second holds at most the
rate plus one step (docs/pipeline.md, "Pacing"). A committer behind its slots (after a
restart, on a busy host) commits two steps back to back once."""
READER_MS = 150
"""What a reader's arrivals add to the commits they follow: a record's produce-to-read
p99 on this machine, 15-153 ms in `delayline bench`'s raw figures (2026-11-30). A
commit read that much late lands in the next whole second with the one after it."""
BLIND_SHARE = 0.10
"""The share of a burst the reader may take after being blind longer than
:data:`READER_MS` (a busy host, a long garbage collection in the test process): those
are left out of the per-second counts, as their second is not known."""
EVEN = 0.20
"""Each second of the window within 20% of the mean."""


@dataclass
class Run:
    pipeline: PipelineProcess
    rated: DeliveryCollector
    windowed: DeliveryCollector
    burst_due_ms: int
    window_due_ms: int
    metrics_url: str
    rated_topic: str
    client: ClientConfig


@pytest.fixture(scope="module")
def run(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The pipeline (``--target-rate`` on one target, lead 20 s), and every schedule
    written at once: the burst due in 40 s, the windowed ones in 51 s (once the burst is
    delivered)."""
    topics = make_topics(kafka_bootstrap)
    rated = create_topic(kafka_bootstrap, unique_topic("rated"), partitions=2)
    spread = create_topic(kafka_bootstrap, unique_topic("spread"), partitions=2)
    checkpoint = tmp_path_factory.mktemp("pacing") / "checkpoint"
    args = pipeline_args(
        topics, checkpoint, "--target-rate", f"{rated}={RATE}/s", "--lead", LEAD,
        "--metrics-port", "0",
    )  # fmt: skip
    process = PipelineProcess(kafka_bootstrap, args, ARTIFACTS / f"pacing-{topics.schedules}.log")
    config = ClientConfig(bootstrap_servers=kafka_bootstrap, schedules_topic=topics.schedules)
    with (
        process as pipeline,
        DeliveryCollector(kafka_bootstrap, [rated]) as to_rated,
        DeliveryCollector(kafka_bootstrap, [spread]) as to_spread,
    ):
        pipeline.start()
        pipeline.wait_ready()
        now = int(time.time() * 1000)
        burst_due = now + 40_000
        window_due = burst_due + BURST // RATE * 1000 + 1_000
        with Scheduler(config) as client:
            for i in range(WINDOWED):
                client.schedule(f"w{i}", b"w", spread, at=_at(window_due), window_ms=WINDOW_MS)
            for i in range(BURST):  # due times scattered over the second
                client.schedule(f"b{i}", b"b", rated, at=_at(burst_due + (i * 7919) % 1000))
        assert int(time.time() * 1000) < burst_due - 25_000, "writing took too long"
        url = pipeline.metrics_url()
        yield Run(pipeline, to_rated, to_spread, burst_due, window_due, url, rated, config)
        assert pipeline.terminate() == 0, pipeline.tail()


def test_a_burst_goes_out_at_the_targets_rate_in_due_order(run: Run) -> None:
    """20,000 due within one second, limited to 2,000/s: delivered over 10 s +- 10%, no
    whole second above the rate (+10%), in due order per partition, exactly once, none
    early."""
    ours = _wait(run.rated, "b", BURST, timeout_s=120)
    _exactly_once_none_early(ours, BURST)
    arrivals = sorted(d.arrival_ms for d in ours)
    span_ms = arrivals[-1] - arrivals[0]
    assert abs(span_ms - BURST / RATE * 1000) <= TOLERANCE * BURST / RATE * 1000, span_ms
    _at_most_the_rate(ours)
    _in_due_order(ours)
    # What the metrics and /progress (the API's /info) say of it.
    this = httpx.get(f"{run.metrics_url}/progress").json()["committers"]["this"]
    assert this["target_rates"] == [f"{run.rated_topic}={RATE}/s"]
    pacing = this["pacing"][run.rated_topic]
    assert pacing["held"] >= BURST * 0.9, pacing
    assert 8_000 <= pacing["max_delay_ms"] <= 12_000, pacing
    metrics = httpx.get(f"{run.metrics_url}/metrics").text
    assert (
        f'delayline_paced_held_total{{committer="pipeline",target="{run.rated_topic}"}}' in metrics
    )
    longest = max(d.blind_ms for d in ours)
    print(
        f"\nburst of {BURST} to a {RATE}/s target: delivered over {span_ms} ms; {pacing}; "
        f"the reader was blind up to {longest} ms"
    )


def test_a_window_spreads_a_burst_evenly(run: Run) -> None:
    """1,700 due at one instant with a 10 s window: every second of the window within
    20% of the mean, none early, none after the window, exactly once."""
    ours = _wait(run.windowed, "w", WINDOWED, timeout_s=WINDOW_MS / 1000 + 60)
    _exactly_once_none_early(ours, WINDOWED)
    start = run.window_due_ms
    late = [d for d in ours if d.timestamp_ms >= start + WINDOW_MS]
    assert not late, f"{len(late)} stamped after the window"
    per_second = Counter((d.arrival_ms - start) // 1000 for d in ours)
    mean = WINDOWED / (WINDOW_MS / 1000)
    counts = [per_second.get(s, 0) for s in range(WINDOW_MS // 1000)]
    outside = {s: c for s, c in enumerate(counts) if abs(c - mean) > EVEN * mean}
    assert not outside, f"seconds off the mean {mean:.0f}: {outside}; " + _tenths(
        ours, start, outside
    )
    print(f"\nwindowed: per second min {min(counts)}, max {max(counts)} (mean {mean:.0f})")


def _tenths(ours: list[Delivery], start_ms: int, seconds: Mapping[int, int]) -> str:
    """Deliveries per tenth of the ``seconds`` off the mean, by arrival and by the
    timestamp the committer stamped (written then): which of the two bunched."""
    lines = []
    for second in sorted(seconds):
        for what, times in (
            ("arrived", [d.arrival_ms for d in ours]),
            ("stamped", [d.timestamp_ms for d in ours]),
        ):
            tenths = Counter((t - start_ms - second * 1000) // 100 for t in times)
            lines.append(
                f"second {second} {what} by tenth: {[tenths.get(i, 0) for i in range(10)]}"
            )
    return "; ".join(lines)


def test_a_sigkill_loses_and_repeats_nothing_and_the_rate_holds_after(run: Run) -> None:
    """A second burst of 10,000 to the rated target, the pipeline SIGKILLed after 3,000
    of them and started again at once: each delivered exactly once, none early, and no
    whole second after the restart above the rate plus a step (and a reader's latency)."""
    due = int(time.time() * 1000) + 20_000  # handed over as soon as read (lead 20 s)
    with Scheduler(run.client) as client:
        for i in range(KILLED_BURST):
            client.schedule(f"k{i}", b"k", run.rated_topic, at=_at(due + (i * 7919) % 1000))
    _wait(run.rated, "k", 3_000, timeout_s=150)
    run.pipeline.kill()
    killed_at = int(time.time() * 1000)
    run.pipeline.start()
    run.pipeline.wait_ready()
    ours = _wait(run.rated, "k", KILLED_BURST, timeout_s=120)
    time.sleep(3)  # a duplicate would show now
    ours = [d for d in run.rated.snapshot() if (d.schedule_id or "").startswith("k")]
    _exactly_once_none_early(ours, KILLED_BURST)
    restarted = [d for d in ours if d.arrival_ms > killed_at]
    assert len(restarted) >= 1_000, "the restart delivered too little to judge its rate"
    _at_most_the_rate(restarted)
    after = sorted(d.arrival_ms for d in restarted)
    span_ms = after[-1] - after[0]
    assert len(after) / max(span_ms, 1) * 1000 <= RATE * (1 + TOLERANCE)
    print(f"\nafter the SIGKILL: {len(after)} delivered over {span_ms} ms")


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _wait(seen: DeliveryCollector, prefix: str, count: int, timeout_s: float) -> list[Delivery]:
    def ours(ds: list[Delivery]) -> list[Delivery]:
        return [d for d in ds if (d.schedule_id or "").startswith(prefix)]

    seen.wait_for(lambda ds: len(ours(ds)) >= count, timeout_s=timeout_s)
    return ours(seen.snapshot())


def _exactly_once_none_early(ours: list[Delivery], count: int) -> None:
    ids = Counter(d.schedule_id for d in ours)
    twice = [sid for sid, n in ids.items() if n > 1]
    assert not twice, f"delivered twice: {twice[:5]}"
    assert len(ids) == count
    early = [d for d in ours if min(d.timestamp_ms, d.arrival_ms) < _due(d)]
    assert not early, f"{len(early)} delivered before due"


def _at_most_the_rate(ours: list[Delivery]) -> None:
    """No whole second (from the first arrival) holds more than the rate plus one step,
    and what a reader's latency bunches (:data:`READER_MS`). A record the reader took
    after being blind longer than that (:attr:`Delivery.blind_ms`) may belong to an
    earlier second: it is left out of the count, and such records must stay few
    (:data:`BLIND_SHARE`)."""
    first = min(d.arrival_ms for d in ours)
    seen = [d.arrival_ms for d in ours if d.blind_ms <= READER_MS]
    blind = len(ours) - len(seen)
    longest = max(d.blind_ms for d in ours)
    assert blind <= BLIND_SHARE * len(ours), (
        f"the reader was blind too long to judge the rate: {blind} records read after "
        f"more than {READER_MS} ms, the longest {longest} ms"
    )
    per_second = Counter((a - first) // 1000 for a in seen)
    busiest = max(per_second.values())
    second = max(per_second, key=lambda k: per_second[k])
    tenths = Counter((a - first - second * 1000) // 100 for a in seen)
    assert busiest <= RATE + STEP + RATE * READER_MS // 1000, (
        f"{busiest} in one second: {sorted(per_second.items())}; by tenth of second "
        f"{second}: {[tenths.get(i, 0) for i in range(10)]}; {blind} left out, read after "
        f"the reader was blind up to {longest} ms"
    )


def _in_due_order(ours: list[Delivery]) -> None:
    by_partition: dict[int, list[Delivery]] = {}
    for d in ours:
        by_partition.setdefault(d.partition, []).append(d)
    for partition, ds in by_partition.items():
        dues = [_due(d) for d in sorted(ds, key=lambda d: d.offset)]
        backwards = sum(1 for a, b in pairwise(dues) if b < a)
        assert not backwards, f"partition {partition}: {backwards} out of due order"


def _due(d: Delivery) -> int:
    return parse_epoch_ms((dict(d.headers)[EPOCH] or b"").decode())
