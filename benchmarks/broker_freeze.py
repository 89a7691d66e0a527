"""Does a broker freeze ever stop deliveries for good? The freeze repeated, counted.

Each run starts a private broker and a fresh ``delayline run`` at its defaults, writes
300 schedules due over a minute (from 5 s after the writing), lets 40 be delivered,
freezes the broker (SIGSTOP) for 20 s, thaws it, and waits up to 120 s for all 300. It
then counts what a ``read_committed`` reader of the target sees (delivered, duplicated,
early) and what the pipeline's log says of its committer (fenced under its name and
started afresh, stopped), and whether the pipeline still runs or exited (with its last
error). Before the committer restarted after a fence of its own name, 1 run in 3 stopped
delivering (249 of 300 undelivered 90 s after the thaw).

Run: ``.venv/bin/python benchmarks/broker_freeze.py [--runs 10] [--json FILE]``; about
two minutes a run. Nothing else should run meanwhile (2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from delayline.client import ClientConfig, Scheduler
from delayline.contract.headers import KEY
from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import PipelineProcess
from delayline.dev.testing import unique_topic
from delayline.errors import KafkaUnavailableError
from delayline.infra.broker import BrokerConfig, LocalBroker
from delayline.infra.ports import free_port
from delayline.kafka.reader import read_topic
from delayline.kafka.topics import create_topic

TOTAL = 300
SPREAD_MS = 60_000
FIRST_DUE_MS = 5_000
BEFORE_FREEZE = 40
FREEZE_S = 20
AFTER_THAW_S = 120


def delivered(bootstrap: str, topic: str) -> list[tuple[str, int]]:
    """``(schedule id, record timestamp)`` of every committed record of ``topic``."""
    out = []
    for record in read_topic(bootstrap, topic, timeout_ms=30_000):
        ids = [v.decode() for k, v in record.headers if k == KEY and v is not None]
        out.append((ids[0] if ids else "", record.timestamp_ms))
    return out


def count(bootstrap: str, topic: str) -> int:
    try:
        return len(delivered(bootstrap, topic))
    except KafkaUnavailableError:  # the broker frozen, or a new topic's metadata
        return -1


def wait_for(bootstrap: str, topic: str, n: int, timeout_s: float) -> int:
    """Wait until ``n`` are delivered to ``topic`` (or ``timeout_s``); how many were."""
    deadline = time.monotonic() + timeout_s
    found = count(bootstrap, topic)
    while found < n and time.monotonic() < deadline:
        time.sleep(1)
        found = count(bootstrap, topic)
    return found


def one_run(work: Path, number: int) -> dict[str, Any]:
    broker = LocalBroker(
        BrokerConfig(
            data_dir=work / f"broker-{number}", port=free_port(), controller_port=free_port()
        )
    )
    broker.start()
    try:
        bootstrap = broker.config.bootstrap_servers
        compact = {"cleanup.policy": "compact"}
        schedules = create_topic(bootstrap, unique_topic("sched"), partitions=3, config=compact)
        dead = create_topic(bootstrap, unique_topic("dlq"))
        commits = create_topic(bootstrap, unique_topic("commits"), config=compact)
        target = create_topic(bootstrap, unique_topic("target"), partitions=2)
        args = [
            "--schedules-topic", schedules, "--dead-letter-topic", dead,
            "--commits-topic", commits, "--checkpoint-dir", str(work / f"checkpoint-{number}"),
        ]  # fmt: skip
        log = work / f"pipeline-{number}.log"
        with PipelineProcess(bootstrap, args, log) as pipeline:
            pipeline.start()
            pipeline.wait_ready()
            began = time.time_ns() // 1_000_000
            due: dict[str, int] = {}
            config = ClientConfig(bootstrap_servers=bootstrap, schedules_topic=schedules)
            with Scheduler(config) as client:
                for i in range(TOTAL):
                    at = ms_to_datetime(began + FIRST_DUE_MS + i * SPREAD_MS // TOTAL)
                    due[client.schedule(f"freeze-{i}", b"x", target, at=at).id] = (
                        began + FIRST_DUE_MS + i * SPREAD_MS // TOTAL
                    )
            wait_for(bootstrap, target, BEFORE_FREEZE, 120)
            pid = broker.status().pid
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            time.sleep(FREEZE_S)
            os.kill(pid, signal.SIGCONT)
            found = wait_for(bootstrap, target, TOTAL, AFTER_THAW_S)
            time.sleep(2)  # a duplicate, if any, would show by now
            deliveries = delivered(bootstrap, target)
            assert pipeline.proc is not None
            running = pipeline.proc.poll() is None
            text = pipeline.log_since_start()
            exit_error = None if running else text.split("delayline: error: ")[-1][:300]
    finally:
        broker.stop()
    counts = Counter(sid for sid, _ in deliveries)
    return {
        "run": number,
        "delivered": len(set(counts) & set(due)),
        "of": TOTAL,
        "seen_after_thaw_s": AFTER_THAW_S,
        "found_at_wait_end": found,
        "duplicated": sum(n - 1 for n in counts.values() if n > 1),
        "early": sum(1 for sid, ts in deliveries if sid in due and ts < due[sid]),
        "committer_fenced_under_its_name": text.count("a member joined under its name"),
        "committer_restarted": text.count("starting afresh in"),
        "committer_stopped": "committer pipeline stopped" in text,
        "pipeline_running": running,
        "exit_error": exit_error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None, help="write the runs here")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="delayline-freeze-") as tmp:
        for number in range(1, args.runs + 1):
            result = one_run(Path(tmp), number)
            runs.append(result)
            print(json.dumps(result), flush=True)
    whole = sum(
        1 for r in runs if r["delivered"] == TOTAL and not r["duplicated"] and not r["early"]
    )
    print(f"{whole} of {len(runs)} runs delivered {TOTAL}/{TOTAL}, none duplicated or early")
    if args.json is not None:
        args.json.write_text(json.dumps({"runs": runs, "whole": whole}, indent=2) + "\n")


if __name__ == "__main__":
    main()
