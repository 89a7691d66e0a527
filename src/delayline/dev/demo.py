"""The product demo behind ``make demo``.

Starts (or reuses) the local broker and the Spark pipeline, schedules about 50
messages due over the next 30 s the way an application would (some updated,
some cancelled, one malformed), plus one JSON envelope and one timer request as
producers of those contracts write them, prints each delivery as it arrives with
its lateness, the dead letter, and a summary; then stops what it started.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from confluent_kafka import Producer

from delayline.client import ClientConfig, Scheduler
from delayline.contract.contracts import ENVELOPE, TIMER_REQUEST
from delayline.contract.envelope import ceil_ms, render_envelope
from delayline.contract.ids import derived_id
from delayline.contract.timer_request import render_timer_request
from delayline.contract.topology import Topology
from delayline.core.clock import ms_to_datetime
from delayline.dev.demo_api import DEMO_TOKEN, api_agrees, demo_api, hold
from delayline.dev.harness import Delivery, DeliveryCollector, PipelineProcess
from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.infra.ports import free_port
from delayline.kafka.produce import produce_one
from delayline.kafka.topics import TopicsConfig, create_topic, ensure_topics

Out = Callable[[str], None]


MIN_DELAY_S = 8
"""The soonest a demo message is due: past the pipeline's lead (5 s) and the batch that
reads it, so each is delivered at its due time by the committer (sooner ones are
delivered as soon as that batch ends)."""


@dataclass(frozen=True, slots=True)
class DemoConfig:
    """Settings of the demo.

    Attributes:
        broker: The local broker to start or reuse.
        schedules: How many schedules to write.
        spread_s: Due times spread over this many seconds from now.
        keep_broker: Leave a broker the demo started running afterwards.
        api_port: Port of the REST API and admin page (another is picked if taken).
        hold: Keep the pipeline and the API running after the demo, until Ctrl-C.
    """

    broker: BrokerConfig
    schedules: int = 50
    spread_s: int = 30
    keep_broker: bool = False
    api_port: int = 8080
    hold: bool = False


@dataclass(frozen=True, slots=True)
class Plan:
    """What the demo wrote and therefore expects."""

    due_ms: dict[str, int]
    cancelled: set[str]
    updated: set[str]
    malformed_id: str
    contracts: dict[str, str]
    """Schedule id to its contract, for those not written by the header contract."""


def run_demo(config: DemoConfig, out: Out = print) -> bool:
    """Run the demo; True when every expectation held."""
    broker = LocalBroker(config.broker)
    started_broker = False
    if broker.status().running:
        out(f"using the broker already running at {config.broker.bootstrap_servers}")
    else:
        began = time.monotonic()
        broker.start(progress=lambda msg: out(f"  {msg}"))
        started_broker = True
        out(
            f"broker ready at {config.broker.bootstrap_servers} in {time.monotonic() - began:.1f} s"
        )
    try:
        return _with_broker(config, out)
    finally:
        if started_broker and not config.keep_broker:
            broker.stop()
            out("broker stopped")


def _with_broker(config: DemoConfig, out: Out) -> bool:
    bootstrap = config.broker.bootstrap_servers
    run = time.strftime("%H%M%S")
    topics = TopicsConfig(
        Topology(
            bootstrap,
            (f"demo-{run}-schedules",),
            dead_letter_topic=f"demo-{run}-dead-letters",
            history_topic=f"demo-{run}-history",
            commits_topic=f"demo-{run}-commits",
            envelope_topics=(f"demo-{run}-envelopes",),
            timer_request_topics=(f"demo-{run}-timer-requests",),
        ),
        partitions=3,
    )
    ensure_topics(topics)
    target = f"demo-{run}-notifications"
    create_topic(bootstrap, target, partitions=3)
    names = topics.topology
    out(
        f"topics: {names.schedules_topic}, {names.envelope_topics[0]} (JSON envelopes), "
        f"{names.timer_request_topics[0]} (timer requests) -> {target}, "
        f"dead letters {names.dead_letter_topic}"
    )
    with tempfile.TemporaryDirectory(prefix="delayline-demo-") as tmp:
        metrics_port = free_port()
        args = [
            "--schedules-topic", topics.topology.schedules_topic,
            "--dead-letter-topic", topics.topology.dead_letter_topic,
            "--history-topic", str(topics.topology.history_topic),
            "--commits-topic", topics.topology.commits_topic,
            "--envelope-topic", names.envelope_topics[0],
            "--timer-request-topic", names.timer_request_topics[0],
            "--checkpoint-dir", str(Path(tmp) / "checkpoint"),
            "--trigger-interval", "500ms",
            "--query-name", f"demo-{run}",
            "--metrics-port", str(metrics_port),
        ]  # fmt: skip
        log = Path(".delayline") / f"demo-{run}-pipeline.log"
        out(f"starting the Spark pipeline (log {log}) ...")
        api = demo_api(
            topics, Path(tmp) / "catalog.db", config.api_port, f"http://127.0.0.1:{metrics_port}"
        )
        with (
            PipelineProcess(bootstrap, args, log) as pipeline,
            DeliveryCollector(bootstrap, [target, topics.topology.dead_letter_topic]) as seen,
        ):
            pipeline.start()
            url = api.start()
            out(f"admin page: {url}/ui/  (API token for writes: {DEMO_TOKEN})")
            out(f"pipeline metrics: http://127.0.0.1:{metrics_port}/metrics")
            try:
                out(f"pipeline ready in {pipeline.wait_ready():.1f} s")
                plan = _write(bootstrap, names, target, config, out)
                ok = _watch(seen, plan, target, out)
                ok = api_agrees(url, len(plan.due_ms), out) and ok
                if config.hold:
                    hold(url, out)
            finally:
                api.stop()
                code = pipeline.terminate()
                out(f"pipeline stopped (exit {code})")
    return ok and code == 0


def _write(bootstrap: str, names: Topology, target: str, config: DemoConfig, out: Out) -> Plan:
    schedules = names.schedules_topic
    rng = random.Random(7)
    ids = [f"order-{n:03d}" for n in range(config.schedules)]
    due: dict[str, int] = {}
    client_config = ClientConfig(bootstrap_servers=bootstrap, schedules_topic=schedules)
    with Scheduler(client_config) as client:
        for sid in ids:
            delay = MIN_DELAY_S + rng.random() * (config.spread_s - MIN_DELAY_S)
            s = client.schedule(sid, f'{{"order": "{sid}"}}', target, delay=delay,
                                target_key=sid, headers={"source": "demo"})  # fmt: skip
            due[sid] = s.due_ms
        updated = set(rng.sample(ids, 5))
        for sid in sorted(updated):  # move to a new time and payload
            moved = timedelta(seconds=MIN_DELAY_S + rng.random() * 10)
            payload = f'{{"order": "{sid}", "v": 2}}'
            s = client.schedule(sid, payload, target, delay=moved, target_key=sid)
            due[sid] = s.due_ms
        cancelled = set(rng.sample(sorted(set(ids) - updated), 5))
        for sid in sorted(cancelled):
            client.cancel(sid)
            del due[sid]
    malformed = "order-malformed"
    producer = Producer({"bootstrap.servers": bootstrap})
    bad_headers: list[tuple[str, str | bytes | None]] = [
        ("scheduler-epoch", b"tomorrow"),
        ("scheduler-target-topic", target.encode()),
    ]
    producer.produce(schedules, key=malformed.encode(), value=b"{}", headers=bad_headers)
    producer.flush(10)
    contracts = _write_other_contracts(bootstrap, names, target, rng, due)
    out(
        f"scheduled {len(ids)} messages due in the next {config.spread_s} s: "
        f"{len(updated)} updated, {len(cancelled)} cancelled, 1 malformed; "
        "and one JSON envelope and one timer request, as their own producers write them"
    )
    out("")
    out(f"{'delivered at':<14} {'schedule':<16} {'due at':<14} {'lateness':>9}  note")
    return Plan(due, cancelled, updated, malformed, contracts)


def _write_other_contracts(
    bootstrap: str, names: Topology, target: str, rng: random.Random, due: dict[str, int]
) -> dict[str, str]:
    """One envelope and one timer request; their ids are where they were written."""
    countdown = MIN_DELAY_S + round(rng.random() * 10, 3)
    envelope = render_envelope(
        names.envelope_topics[0], target, {"order": "by-envelope"}, countdown_s=countdown,
        key="by-envelope", headers=(("CALLER_SERVICE", b"demo"),),
    )  # fmt: skip
    partition, offset, timestamp_ms = produce_one(bootstrap, envelope, 10_000)
    envelope_id = derived_id(envelope.topic, partition, offset)
    due[envelope_id] = timestamp_ms + ceil_ms(Decimal(repr(countdown)))  # as it is parsed
    second = time.time_ns() // 1_000_000_000 + MIN_DELAY_S + 1 + rng.randrange(10)
    timer = render_timer_request(
        names.timer_request_topics[0], second, target, "by-timer", b'{"order": "by-timer"}'
    )
    partition, offset, _ = produce_one(bootstrap, timer, 10_000)
    timer_id = derived_id(timer.topic, partition, offset)
    due[timer_id] = second * 1000
    return {envelope_id: ENVELOPE, timer_id: TIMER_REQUEST}


def _watch(seen: DeliveryCollector, plan: Plan, target: str, out: Out) -> bool:
    last_due_in_s = (max(plan.due_ms.values()) - seen.clock.now_ms()) / 1000
    deadline = time.monotonic() + last_due_in_s + 30
    shown = 0
    while time.monotonic() < deadline:
        deliveries = seen.snapshot()
        for d in deliveries[shown:]:
            out(_line(d, plan, target))
        shown = len(deliveries)
        delivered = {d.schedule_id for d in deliveries if d.topic == target}
        dead = [d for d in deliveries if d.topic != target]
        if delivered >= set(plan.due_ms) and dead:
            time.sleep(2)  # let a duplicate, if there were one, show up
            break
        time.sleep(0.1)
    for d in seen.snapshot()[shown:]:
        out(_line(d, plan, target))
    return _summary(seen.snapshot(), plan, target, out)


def _line(d: Delivery, plan: Plan, target: str) -> str:
    at = ms_to_datetime(d.arrival_ms).strftime("%H:%M:%S.%f")[:-3]
    if d.topic != target:
        reason = (dict(d.headers).get("delayline-error") or b"").decode()
        return f"{at:<14} {(d.key or b'').decode():<16} {'':<14} {'':>9}  DEAD LETTER: {reason}"
    sid = d.schedule_id or "?"
    due = plan.due_ms.get(sid)
    due_s = ms_to_datetime(due).strftime("%H:%M:%S.%f")[:-3] if due else "?"
    lateness = f"{d.arrival_ms - due} ms" if due else ""
    note = "updated" if sid in plan.updated else ("CANCELLED?!" if sid in plan.cancelled else "")
    if sid in plan.contracts:
        note, sid = plan.contracts[sid], sid.split("-", 2)[-1]  # less "demo-<run>-"
    return f"{at:<14} {sid:<16} {due_s:<14} {lateness:>9}  {note}"


def _summary(deliveries: list[Delivery], plan: Plan, target: str, out: Out) -> bool:
    on_target = [d for d in deliveries if d.topic == target]
    counts = Counter(d.schedule_id for d in on_target)
    lateness = sorted(
        d.arrival_ms - plan.due_ms[d.schedule_id] for d in on_target if d.schedule_id in plan.due_ms
    )
    dead = [d for d in deliveries if d.topic != target]
    checks = {
        "every expected message delivered": set(counts) >= set(plan.due_ms),
        "no duplicates": all(n == 1 for n in counts.values()),
        "no cancelled message delivered": not (set(counts) & plan.cancelled),
        "none delivered early": all(
            d.timestamp_ms >= plan.due_ms.get(d.schedule_id or "", 0) for d in on_target
        ),
        "malformed one dead-lettered": [d.key for d in dead] == [plan.malformed_id.encode()],
        "the envelope and the timer request delivered once": all(
            counts[sid] == 1 for sid in plan.contracts
        ),
    }  # fmt: skip
    out("")
    out(f"summary: {len(on_target)}/{len(plan.due_ms)} delivered, {len(dead)} dead letter(s)")
    if lateness:
        p99 = lateness[min(len(lateness) - 1, int(len(lateness) * 0.99))]
        out(f"lateness: min {lateness[0]} ms, p50 {lateness[len(lateness) // 2]} ms, "
            f"p99 {p99} ms, max {lateness[-1]} ms")  # fmt: skip
    for name, ok in checks.items():
        out(f"  [{'ok' if ok else 'FAILED'}] {name}")
    return all(checks.values())


def default_demo_dir() -> Path:
    """Data directory of the demo's broker."""
    return Path(".delayline/broker")
