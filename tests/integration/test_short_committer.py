"""A committer that delivers short-notice versions itself, read from the input by its
watch, against a real broker: on time, never early for either kind of reader, a cancel
before the due time wins, and a committer reading the input again delivers nothing
twice (delayline's own tombstone, written with each delivery, shows it done)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from confluent_kafka import Producer

from delayline.committer.config import CommitterConfig
from delayline.committer.service import Committer
from delayline.contract.headers import FIRED_OFFSET
from delayline.contract.notice import Epoch, NoticeRules
from delayline.contract.topology import Topology
from delayline.core.clock import SystemClock
from delayline.core.identifiers import committer_group
from delayline.core.model import SourceRef
from delayline.dev.harness import Delivery, DeliveryCollector
from delayline.dev.testing import unique_topic
from delayline.kafka.config import kafka_client_config
from delayline.kafka.groups import group_members
from delayline.kafka.notice_store import write_notice_rules
from delayline.kafka.reader import read_topic
from delayline.kafka.topics import create_topic, ensure_inflight_topic, ensure_notice_topic

NOTICE_MS = 10_000
"""Versions due sooner than this after written are short."""
ON_TIME_MS = 1_000
"""As in the committer's other tests: delivered by the committer at its due time (its
lateness here is tens of milliseconds), not by a retry."""


@pytest.fixture
def setup(kafka_bootstrap: str) -> tuple[CommitterConfig, str, str]:
    """A committer's settings taking short versions of a schedules topic, under rules
    whose one epoch governs the whole topic; the schedules and target topics."""
    names = {n: unique_topic(n) for n in ("inflight", "target", "commits", "dead", "notice")}
    schedules = unique_topic("schedules")
    ensure_inflight_topic(kafka_bootstrap, names["inflight"])
    for name in (names["target"], names["commits"], names["dead"], schedules):
        create_topic(kafka_bootstrap, name)
    ensure_notice_topic(kafka_bootstrap, names["notice"])
    rules = NoticeRules((Epoch(NOTICE_MS, 1),))
    write_notice_rules(kafka_bootstrap, names["notice"], rules)
    settings = CommitterConfig(
        kafka_bootstrap, names["inflight"], names["commits"], unique_topic("tx"), names["dead"],
        topology=Topology(bootstrap_servers=kafka_bootstrap, schedules_topics=(schedules,)),
        notice_topic=names["notice"],
    )  # fmt: skip
    return settings, schedules, names["target"]


def write(
    bootstrap: str, topic: str, target: str, records: list[tuple[str, int | None]]
) -> list[SourceRef]:
    """Write ``(id, due_ms or None for a cancel)`` records to ``topic`` as a producer
    does; where each landed."""
    producer = Producer(kafka_client_config(bootstrap, **{"linger.ms": 0}))
    placed: list[SourceRef] = []

    def landed(err: object, msg: object) -> None:
        assert err is None, err
        placed.append(SourceRef(topic, msg.partition(), msg.offset(), msg.timestamp()[1]))  # type: ignore[attr-defined]

    for sid, due_ms in records:
        headers: list[tuple[str, str | bytes | None]] = (
            []
            if due_ms is None
            else [("scheduler-epoch", f"{due_ms / 1000:.3f}"), ("scheduler-target-topic", target)]
        )
        value = None if due_ms is None else sid.encode()
        producer.produce(topic, value, sid.encode(), partition=0, headers=headers,
                         on_delivery=landed)  # fmt: skip
        producer.flush(30)
    return placed


def by_id(seen: list[Delivery]) -> Counter[str]:
    return Counter(d.schedule_id or "" for d in seen)


def test_short_versions_are_delivered_by_the_committer_once_on_time(
    kafka_bootstrap: str, setup: tuple[CommitterConfig, str, str]
) -> None:
    """Nothing is handed over: the versions due within the notice are delivered by the
    committer at their due time (never early for a ``read_committed`` or a
    ``read_uncommitted`` reader), one cancelled before it is due is not, one due after
    the notice is left to the hold; each delivery writes delayline's own tombstone of
    its version to the input. A committer of a new group reading the input again
    delivers none of them twice."""
    settings, schedules, target = setup
    committer = Committer(settings)
    with (
        DeliveryCollector(kafka_bootstrap, [target]) as committed,
        DeliveryCollector(kafka_bootstrap, [target], read_committed=False) as uncommitted,
    ):
        committer.start()
        try:
            assert committer.wait_ready(60), "the committer is not ready"
            now = SystemClock().now_ms()
            due = {"soon": now + 2_000, "later": now + 3_500, "cancelled": now + 3_000,
                   "far": now + NOTICE_MS + 5_000}  # fmt: skip
            placed = dict(
                zip(due, write(kafka_bootstrap, schedules, target, list(due.items())), strict=True)
            )
            time.sleep(1)
            write(kafka_bootstrap, schedules, target, [("cancelled", None)])
            committed.wait_for(lambda s: len(s) >= 2, timeout_s=30)
            time.sleep(1.5)  # the cancelled one's due time has passed: it would show now
            seen, seen_uncommitted = committed.snapshot(), uncommitted.snapshot()
        finally:
            committer.stop()
    for deliveries in (seen, seen_uncommitted):
        assert by_id(deliveries) == Counter({"soon": 1, "later": 1}), deliveries
        for d in deliveries:
            assert due[d.schedule_id or ""] <= d.arrival_ms <= due[d.schedule_id or ""] + ON_TIME_MS
    own = {
        (r.key or b"").decode(): dict(r.headers)[FIRED_OFFSET]
        for r in read_topic(kafka_bootstrap, schedules)
        if r.value is None and any(name == FIRED_OFFSET for name, _ in r.headers)
    }
    assert own == {
        "soon": str(placed["soon"].offset).encode(),
        "later": str(placed["later"].offset).encode(),
    }, "each delivery's own tombstone names its version"

    again = Committer(replace(settings, transactional_id=unique_topic("tx")))
    with DeliveryCollector(kafka_bootstrap, [target]) as collector:
        again.start()  # a new group: its watch reads the input from 30 s back
        try:
            assert again.wait_ready(60), "the second committer is not ready"
            time.sleep(3)
            # The collector reads the target from its start: the first deliveries only.
            assert by_id(collector.snapshot()) == Counter({"soon": 1, "later": 1}), "again"
        finally:
            again.stop()


def test_pending_rules_hold_every_short_version_until_settled(
    kafka_bootstrap: str, setup: tuple[CommitterConfig, str, str]
) -> None:
    """While the rules say a new epoch is being made, the committer delivers no short
    version (one may be governed by the epoch to come); once settled it delivers what
    was read meanwhile, late rather than twice or never."""
    settings, schedules, target = setup
    assert settings.notice_topic is not None
    settled = NoticeRules((Epoch(NOTICE_MS, 1),))
    write_notice_rules(kafka_bootstrap, settings.notice_topic, replace(settled, pending=True))
    committer = Committer(settings)
    with DeliveryCollector(kafka_bootstrap, [target]) as committed:
        committer.start()
        try:
            assert committer.wait_ready(60), "the committer is not ready"
            due = SystemClock().now_ms() + 500
            write(kafka_bootstrap, schedules, target, [("held", due)])
            time.sleep(2.5)
            assert committed.snapshot() == [], "delivered under pending rules"
            write_notice_rules(kafka_bootstrap, settings.notice_topic, settled)
            seen = committed.wait_for(lambda s: len(s) >= 1, timeout_s=30)
            time.sleep(1)
            seen = committed.snapshot()
        finally:
            committer.stop()
    assert by_id(seen) == Counter({"held": 1})
    assert seen[0].arrival_ms >= due + 2_000


def test_a_restarted_committer_reads_again_from_its_committed_positions(
    kafka_bootstrap: str, setup: tuple[CommitterConfig, str, str]
) -> None:
    """Stopped with short versions read and not due, and started again after its
    watch's memory (500 ms) has passed: the positions committed with its in-flight
    offset say where to read the input again, so each is delivered once."""
    settings, schedules, target = setup
    settings = replace(settings, watch_memory_ms=500)
    first = Committer(settings)
    with DeliveryCollector(kafka_bootstrap, [target]) as committed:
        first.start()
        try:
            assert first.wait_ready(60), "the committer is not ready"
            now = SystemClock().now_ms()
            due = {f"r{i}": now + 1_500 + 100 * i for i in range(40)}
            write(kafka_bootstrap, schedules, target, list(due.items()))
            committed.wait_for(lambda s: len(s) >= 5, timeout_s=30)
        finally:
            first.stop()
        stopped_with = len(by_id(committed.snapshot()))
        assert stopped_with < len(due), "stopped too late to prove anything"
        time.sleep(3)  # past the memory: a start by the time alone would miss them
        again = Committer(settings)
        again.start()
        try:
            committed.wait_for(lambda s: len(by_id(s)) >= len(due), timeout_s=60)
            time.sleep(2)  # a duplicate would show by now
            seen = committed.snapshot()
        finally:
            again.stop()
    counts = by_id(seen)
    assert set(counts) == set(due), "lost"
    assert [sid for sid, n in counts.items() if n > 1] == [], "duplicated"
    assert all(d.arrival_ms >= due[d.schedule_id or ""] for d in seen), "early"


def test_a_partition_taken_over_after_a_sigkill_delivers_each_short_version_once(
    kafka_bootstrap: str, setup: tuple[CommitterConfig, str, str], tmp_path: Path
) -> None:
    """Committer a owns the in-flight partition, b waits as a standby whose watch reads
    the same input; a is SIGKILLed mid-way through 150 short versions. b is given the
    partition, reads the input again from the positions a committed with its offset,
    and delivers the rest: each once for a ``read_committed`` reader, none early and
    none lost for either kind."""
    settings, schedules, target = setup
    session_ms = 6_000  # Kafka's least: the dead one's partition moves on after it
    settings = replace(settings, watch_memory_ms=500, session_timeout_ms=session_ms)
    script = textwrap.dedent(
        f"""
        import logging, sys, time
        from delayline.contract.topology import Topology
        from delayline.committer.config import CommitterConfig
        from delayline.committer.service import Committer
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
        topology = Topology(bootstrap_servers={kafka_bootstrap!r},
                            schedules_topics=({schedules!r},))
        Committer(CommitterConfig(
            {settings.bootstrap_servers!r}, {settings.inflight_topic!r},
            {settings.commits_topic!r}, {settings.transactional_id!r},
            {settings.dead_letter_topic!r}, name="a", topology=topology,
            notice_topic={settings.notice_topic!r}, watch_memory_ms=500,
            session_timeout_ms={session_ms})).start()
        time.sleep(600)
        """
    )
    standby = replace(settings, name="b", first_assignment_timeout_s=2)
    with (
        DeliveryCollector(kafka_bootstrap, [target]) as committed,
        DeliveryCollector(kafka_bootstrap, [target], read_committed=False) as uncommitted,
    ):
        with (tmp_path / "a.log").open("w") as log:
            child = subprocess.Popen(
                [sys.executable, "-c", script], start_new_session=True, stderr=log
            )
        b = Committer(standby)
        try:
            group = committer_group(settings.transactional_id)
            owned_by = time.monotonic() + 30
            while not any(m.partitions for m in group_members(kafka_bootstrap, group, 10)):
                assert time.monotonic() < owned_by, "a never owned the partition"
                time.sleep(0.2)
            b.start()
            assert b.wait_ready(30)
            assert b.status().partitions == (), "b is a standby"
            now = SystemClock().now_ms()
            due = {f"k{i:03d}": now + 1_500 + 40 * i for i in range(150)}
            write(kafka_bootstrap, schedules, target, list(due.items()))
            committed.wait_for(lambda s: len(s) >= 40, timeout_s=30)
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            killed_after = len(by_id(committed.snapshot()))
            assert killed_after < len(due), "killed too late to prove anything"
            committed.wait_for(lambda s: len(by_id(s)) >= len(due), timeout_s=60)
            time.sleep(2)  # a duplicate would show by now
            assert b.status().partitions == (0,), "b took the partition over"
            seen, seen_uncommitted = committed.snapshot(), uncommitted.snapshot()
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
            b.stop()
    counts = by_id(seen)
    assert [sid for sid, n in counts.items() if n > 1] == [], "duplicated"
    for deliveries in (seen, seen_uncommitted):
        # A read_uncommitted reader sees the killed one's open transaction, then its
        # rewrite (docs/pipeline.md, "What a consumer sees"): never early, none lost.
        assert set(by_id(deliveries)) == set(due), "lost"
        assert all(d.arrival_ms >= due[d.schedule_id or ""] for d in deliveries), "early"
    twice = sum(n - 1 for n in by_id(seen_uncommitted).values())
    print(f"\nkilled after {killed_after} of {len(due)}; the rest delivered by the standby; "
          f"a read_uncommitted reader saw {twice} twice (the aborted transaction)")  # fmt: skip
