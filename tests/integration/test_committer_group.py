"""Committers as a consumer group against a real broker: two committers split the
in-flight partitions; one joining takes partitions over from the other (revoked with
schedules pending), and one SIGKILLed has its partitions taken over by the other after
the session timeout. Every schedule delivered once, none early; the survivor's own
deliveries are held up no longer than the take-over (a transaction the dead one left
open hides later deliveries to the same target partitions until it is fenced)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer

from delayline.committer.config import CommitterConfig
from delayline.committer.service import Committer
from delayline.contract.pacing import TargetRates
from delayline.core.clock import SystemClock
from delayline.core.identifiers import committer_group, committer_instance_id, committer_name
from delayline.core.model import Schedule, SourceRef
from delayline.dev.harness import Delivery, DeliveryCollector
from delayline.dev.testing import unique_topic
from delayline.fire.inflight import inflight_partition, render_inflight
from delayline.kafka.config import kafka_client_config
from delayline.kafka.groups import group_members
from delayline.kafka.produce import produce
from delayline.kafka.topics import create_topic, ensure_inflight_topic

PARTITIONS = 4
SESSION_TIMEOUT_MS = 6_000
"""Kafka's least (``group.min.session.timeout.ms``): the dead committer's partitions
move on this long after its last heartbeat."""
# Measured here (trickle bench, Spark busy on both cores): commit lateness p99 40-70 ms.
# This bound only says "delivered by a committer at its due time, not by a take-over".
ON_TIME_MS = 1_000


@pytest.fixture
def topics(kafka_bootstrap: str) -> dict[str, str]:
    names = {
        "inflight": unique_topic("inflight"),
        "target": unique_topic("target"),
        "commits": unique_topic("commits"),
        "dead": unique_topic("dead"),
    }
    ensure_inflight_topic(kafka_bootstrap, names["inflight"], PARTITIONS)
    create_topic(kafka_bootstrap, names["target"], partitions=3)
    for name in ("commits", "dead"):
        create_topic(kafka_bootstrap, names[name])
    return names


def hand_over(bootstrap: str, inflight: str, dues: dict[str, int], target: str) -> None:
    """Write in-flight records as the fire stage does: transactionally, each to its
    schedule's partition."""
    producer = Producer(
        kafka_client_config(bootstrap, **{"transactional.id": unique_topic("handover")})
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for offset, (sid, due_ms) in enumerate(sorted(dues.items())):
        source = SourceRef("schedules", 0, offset, due_ms - 10_000)
        schedule = Schedule(sid, due_ms, target, sid.encode(), b"payload", (), source)
        produce(producer, render_inflight(schedule, inflight, partitions=PARTITIONS), None)
    producer.commit_transaction(30)


def owners(bootstrap: str, tx_id: str) -> dict[str, list[int]]:
    """Each committer's name (the end of its static member id) to its partitions."""
    return {
        committer_name(tx_id, m.instance_id): [p for _, p in m.partitions]
        for m in group_members(bootstrap, committer_group(tx_id), 10)
    }


def committer(
    bootstrap: str,
    topics: dict[str, str],
    tx_id: str,
    name: str,
    rates: TargetRates | None = None,
) -> Committer:
    """A committer of the group ``tx_id`` names, called ``name`` (not started)."""
    return Committer(
        CommitterConfig(
            bootstrap,
            topics["inflight"],
            topics["commits"],
            tx_id,
            topics["dead"],
            name=name,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            target_rates=rates or TargetRates(),
        )
    )


def wait_until(
    check: Callable[[], bool],
    timeout_s: float,
    what: str,
    meanwhile: Callable[[], object] = lambda: time.sleep(0.2),
) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        meanwhile()


def by_id(seen: list[Delivery]) -> Counter[str]:
    return Counter(d.schedule_id or "" for d in seen)


def test_two_committers_split_the_partitions_and_survive_a_sigkill(
    kafka_bootstrap: str, topics: dict[str, str]
) -> None:
    tx_id = unique_topic("tx")
    args = [kafka_bootstrap, topics["inflight"], topics["commits"], tx_id, topics["dead"]]
    script = textwrap.dedent(
        f"""
        import logging, sys, time
        from delayline.committer.config import CommitterConfig
        from delayline.committer.service import Committer
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
        Committer(CommitterConfig(*{args!r}, name="a",
                                  session_timeout_ms={SESSION_TIMEOUT_MS})).start()
        time.sleep(600)
        """
    )
    now = SystemClock().now_ms()
    # 400 schedules over 16 s, the first due once both committers run.
    dues = {f"s{i:03d}": now + 6_000 + 40 * i for i in range(400)}
    hand_over(kafka_bootstrap, topics["inflight"], dues, topics["target"])
    with DeliveryCollector(kafka_bootstrap, [topics["target"]]) as collector:
        child = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
        b = None
        try:
            wait_until(
                lambda: len(owners(kafka_bootstrap, tx_id).get("a", [])) == PARTITIONS,
                30,
                "committer a to own every partition",
            )
            b = committer(kafka_bootstrap, topics, tx_id, "b")
            b.start()
            # a gives up half of its partitions, with their schedules pending.
            wait_until(lambda: len(b.status().partitions) == PARTITIONS // 2, 30, "a split")
            split = owners(kafka_bootstrap, tx_id)
            assert sorted(split["a"] + split["b"]) == list(range(PARTITIONS)), split
            collector.wait_for(lambda s: len(s) >= 100, timeout_s=60)
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            killed_ms = SystemClock().now_ms()
            wait_until(lambda: len(b.status().partitions) == PARTITIONS, 30, "the take-over")
            taken_ms = SystemClock().now_ms()
            collector.wait_for(lambda s: len(by_id(s)) >= len(dues), timeout_s=60)
            time.sleep(2)  # a duplicate would show up by now
            seen = collector.snapshot()
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
            if b is not None:
                b.stop()
    counts = by_id(seen)
    assert set(counts) == set(dues), "lost"
    assert [sid for sid, n in counts.items() if n > 1] == [], "duplicated"
    for d in seen:
        assert d.arrival_ms >= dues[d.schedule_id or ""], "early"
    # The take-over waits for the session timeout, no longer than a rebalance after it.
    assert taken_ms - killed_ms < SESSION_TIMEOUT_MS + 5_000
    late = {
        d.schedule_id: d.arrival_ms - dues[d.schedule_id or ""]
        for d in seen
        if inflight_partition(d.schedule_id or "", PARTITIONS) in split["a"]
        and dues[d.schedule_id or ""] > taken_ms + 1_000
    }
    assert late, "nothing of a's partitions fell due after the take-over"
    assert max(late.values()) < ON_TIME_MS, "the survivor is late on a's partitions"
    # A committer killed inside a transaction holds back read_committed readers of the
    # target partitions it wrote to until its producers are fenced (the take-over): the
    # survivor's own deliveries due meanwhile are committed on time but visible then.
    for d in seen:
        if inflight_partition(d.schedule_id or "", PARTITIONS) in split["b"]:
            due_ms = dues[d.schedule_id or ""]
            held_to = taken_ms if killed_ms <= due_ms <= taken_ms else due_ms
            assert d.arrival_ms - held_to < ON_TIME_MS, f"{d.schedule_id}: held up"


def test_two_committers_together_keep_a_targets_rate(
    kafka_bootstrap: str, topics: dict[str, str]
) -> None:
    """Two committers split four in-flight partitions; each paces its partitions at
    their share of the target's rate (a quarter each), so together they never pass it:
    4,000 schedules due at one instant to a topic limited to 1,000/s go out over about
    4 s, no whole second of their timestamps above the rate, no two seconds of a
    reader's above it (+10%, and up to a second's more when what was released became
    visible unevenly), each once, none early."""
    rate, count = 1_000, 4_000
    tx_id = unique_topic("tx")
    now = SystemClock().now_ms()
    dues = {f"r{i:04d}": now + 8_000 for i in range(count)}
    hand_over(kafka_bootstrap, topics["inflight"], dues, topics["target"])
    rates = TargetRates(((topics["target"], float(rate)),))
    committers = [committer(kafka_bootstrap, topics, tx_id, name, rates) for name in "ab"]
    with DeliveryCollector(kafka_bootstrap, [topics["target"]]) as collector:
        try:
            for c in committers:
                c.start()
            wait_until(
                lambda: all(len(c.status().partitions) == PARTITIONS // 2 for c in committers),
                30,
                "the committers to split the partitions",
            )
            collector.wait_for(lambda s: len(by_id(s)) >= count, timeout_s=60)
            time.sleep(2)  # a duplicate would show up by now
            seen = collector.snapshot()
        finally:
            for c in committers:
                c.stop()
    counts = by_id(seen)
    assert set(counts) == set(dues), "lost"
    assert [sid for sid, n in counts.items() if n > 1] == [], "duplicated"
    assert min(d.arrival_ms for d in seen) >= now + 8_000, "early"
    # The rate holds where the committers write: the deliveries' timestamps (the time
    # each was released) hold no whole second above it.
    stamped = Counter(d.timestamp_ms // 1000 for d in seen)
    assert max(stamped.values()) <= rate, sorted(stamped.items())
    # What a reader sees also depends on when the transactions commit and when it polls:
    # on this busy host one second read 1,125 after a slower one, so readers are held
    # to the rate over any two seconds (+10%), widened by how unevenly what was released
    # became visible, by at most one second of the rate (a commit or a poll held up by
    # the host: once after the unit suite 2,639 in two seconds, every timestamp second
    # within the rate); a longer hold-up fails it.
    first = min(d.arrival_ms for d in seen)
    per_second = Counter((d.arrival_ms - first) // 1000 for d in seen)
    pairs = [per_second[s] + per_second[s + 1] for s in range(max(per_second) + 1)]
    lags = sorted(d.arrival_ms - d.timestamp_ms for d in seen)
    uneven_s = min((lags[-1] - lags[0]) / 1000, 1.0)
    assert max(pairs) <= rate * (2 + uneven_s) * 1.1, (
        sorted(per_second.items()),
        lags[0],
        lags[-1],
    )
    span_ms = max(d.arrival_ms for d in seen) - first
    assert span_ms >= (count / rate - 1) * 1000, f"over {span_ms} ms: faster than the rate"
    held = sum(p.held for c in committers for _, p in c.status().pacing)
    assert held >= count - 10, f"only {held} held back"


def delivers_twenty(bootstrap: str, topics: dict[str, str]) -> None:
    """Hand 20 schedules over, due in 2 s: each is delivered once."""
    now = SystemClock().now_ms()
    dues = {f"s{i}": now + 2_000 + 10 * i for i in range(20)}
    with DeliveryCollector(bootstrap, [topics["target"]]) as collector:
        hand_over(bootstrap, topics["inflight"], dues, topics["target"])
        seen = collector.wait_for(lambda s: len(s) >= len(dues), timeout_s=60)
    assert by_id(seen) == Counter(dict.fromkeys(dues, 1))


def test_a_committer_fenced_once_under_its_name_starts_afresh(
    kafka_bootstrap: str, topics: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """A consumer joining once under a committer's name (what the committer's own
    consumer does when it joins again after a broker freeze swallowed an answer; the
    group cannot tell the two apart) fences it: the committer starts afresh, takes its
    name back and delivers; it does not stop."""
    caplog.set_level(logging.INFO, logger="delayline")
    tx_id = unique_topic("tx")
    a = committer(kafka_bootstrap, topics, tx_id, "a")
    a.start()
    try:
        assert a.wait_ready(30), "not ready"
        assert a.not_ready() is None
        wait_until(lambda: bool(owners(kafka_bootstrap, tx_id).get("a")), 30, "a's partitions")
        itself = Consumer(
            kafka_client_config(
                kafka_bootstrap,
                **{
                    "group.id": committer_group(tx_id),
                    "group.instance.id": committer_instance_id(tx_id, "a"),
                    "partition.assignment.strategy": "cooperative-sticky",
                    "session.timeout.ms": SESSION_TIMEOUT_MS,
                },
            )
        )
        itself.subscribe([topics["inflight"]])
        try:
            wait_until(
                lambda: "starting afresh" in caplog.text,
                30,
                "the committer fenced",
                lambda: itself.poll(0.1),
            )
        finally:
            itself.close()
        assert a.wait_ready(30), "not ready again"
        assert a.not_ready() is None, "ready again: /readyz says so"
        delivers_twenty(kafka_bootstrap, topics)
        assert not a.wait(0), "the committer stopped"
        assert a.failure is None
    finally:
        a.stop()


def test_a_committer_whose_name_another_takes_stops_and_says_so(
    kafka_bootstrap: str, topics: dict[str, str]
) -> None:
    """A second committer started under a taken name fences the first, which starts
    afresh and fences the second, which does the same: the first, fenced twice within
    a minute, stops with an error saying why (its process then exits); the second
    delivers what is handed over."""
    tx_id = unique_topic("tx")
    first = committer(kafka_bootstrap, topics, tx_id, "a")
    second = committer(kafka_bootstrap, topics, tx_id, "a")
    first.start()
    try:
        assert first.wait_ready(30), "first not ready"
        second.start()
        assert first.wait(60), "the first committer kept running beside its namesake"
        assert first.failure is not None
        assert "runs under this one's name (a)" in str(first.failure)
        assert f"the committer stopped: {first.failure}" == first.not_ready()  # /readyz
        assert not second.wait(0), "the second committer stopped too"
        assert second.wait_ready(30), "second not ready"
        assert second.not_ready() is None
        delivers_twenty(kafka_bootstrap, topics)
        assert second.failure is None
    finally:
        second.stop()
        first.stop()
