"""The product demo behind ``make demo``.

Starts (or reuses) the local broker, creates the topics, writes a handful of
schedules with the client the way an application would, and shows them as they
sit on the schedules topic: updates, a cancel (tombstone), a retry with backoff.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from delayline.client import ClientConfig, Scheduler
from delayline.contract import parse_record
from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.model import Cancel, Invalid, Schedule
from delayline.reader import read_topic
from delayline.topics import TopicsConfig, ensure_topics
from delayline.units import format_duration_ms


@dataclass(frozen=True, slots=True)
class DemoConfig:
    """Settings of the demo.

    Attributes:
        broker: The local broker to start or reuse.
        schedules_topic: Where the demo writes schedules.
        target_topic: Where the demo schedules deliver to.
        keep_broker: Leave a broker the demo started running afterwards.
    """

    broker: BrokerConfig
    schedules_topic: str = "delayline-schedules"
    target_topic: str = "demo-notifications"
    keep_broker: bool = False


def run_demo(config: DemoConfig, out: Callable[[str], None] = print) -> int:
    """Run the demo, printing as it goes. Returns the number of records shown."""
    broker = LocalBroker(config.broker)
    started = False
    if broker.status().running:
        out(f"using the broker already running at {config.broker.bootstrap_servers}")
    else:
        began = time.monotonic()
        broker.start(progress=lambda msg: out(f"  {msg}"))
        started = True
        out(
            f"broker ready at {config.broker.bootstrap_servers} in {time.monotonic() - began:.1f} s"
        )
    try:
        bootstrap = config.broker.bootstrap_servers
        topics = TopicsConfig(bootstrap_servers=bootstrap, schedules_topic=config.schedules_topic)
        for name, what in ensure_topics(topics).items():
            out(f"topic {name}: {what}")
        _write_schedules(bootstrap, config)
        return _show(bootstrap, config, out)
    finally:
        if started and not config.keep_broker:
            broker.stop()
            out("broker stopped")


def _write_schedules(bootstrap: str, config: DemoConfig) -> None:
    now = datetime.now(UTC)
    client_config = ClientConfig(
        bootstrap_servers=bootstrap, schedules_topic=config.schedules_topic
    )
    topic = config.target_topic
    run = now.strftime("%H%M%S")
    with Scheduler(client_config) as client:
        for i in range(1, 6):
            client.schedule(
                f"demo-{run}-reminder-{i}",
                f'{{"user": {i}, "text": "your trial ends soon"}}',
                topic,
                delay=timedelta(seconds=5 * i),
                target_key=f"user-{i}",
                headers={"source": "demo"},
            )
        client.schedule(f"demo-{run}-report", "monthly report", topic, at=now + timedelta(days=30))
        # Reschedule reminder 2: same id, later time; the newer record wins.
        client.schedule(
            f"demo-{run}-reminder-2",
            "rescheduled",
            topic,
            delay=timedelta(minutes=1),
            target_key="user-2",
        )
        client.cancel(f"demo-{run}-reminder-3")
        client.schedule_retry(
            f"demo-{run}-retry", "charge card", topic, previous_headers={"retry-attempt": "2"}
        )
        client.send_later("user-9", "welcome back", topic, timedelta(hours=1))


def _show(bootstrap: str, config: DemoConfig, out: Callable[[str], None]) -> int:
    records = read_topic(bootstrap, config.schedules_topic)
    now_ms = int(time.time() * 1000)
    out("")
    out(f"{len(records)} record(s) on {config.schedules_topic}:")
    out(f"{'partition@offset':<17} {'id':<38} {'what':<10} {'due in':>13}  target / reason")
    for record in records:
        parsed = parse_record(record)
        where = f"{record.partition}@{record.offset}"
        if isinstance(parsed, Schedule):
            due = format_duration_ms(parsed.due_ms - now_ms)
            key = parsed.target_key.decode(errors="replace") if parsed.target_key else "-"
            extra = [n for n, _ in parsed.headers if not n.startswith("scheduler-")]
            shown = f"{parsed.target_topic} key={key}" + (f" +{','.join(extra)}" if extra else "")
            out(f"{where:<17} {parsed.id:<38} {'schedule':<10} {due:>13}  {shown}")
        elif isinstance(parsed, Cancel):
            out(f"{where:<17} {parsed.id:<38} {'cancel':<10} {'':>13}  (tombstone)")
        elif isinstance(parsed, Invalid):
            out(f"{where:<17} {'?':<38} {'invalid':<10} {'':>13}  {parsed.reason}")
    return len(records)


def default_demo_dir() -> Path:
    """Data directory of the demo's broker."""
    return Path(".delayline/broker")
