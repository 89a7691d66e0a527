"""The ``delayline`` command as a user runs it: a real process, a real broker."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delayline.contract import parse_record
from delayline.core.model import Cancel, Schedule
from delayline.dev.testing import create_topic, unique_topic
from delayline.infra.ports import free_port
from delayline.infra.procs import pid_alive
from delayline.kafka.reader import read_topic


def delayline(
    *args: str, stdin: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "delayline", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.slow
def test_broker_lifecycle(tmp_path: Path, kafka_bootstrap: str) -> None:
    port = free_port()
    flags = ["--data-dir", str(tmp_path / "b"), "--port", str(port)]

    started = delayline("broker", "start", *flags)
    assert started.returncode == 0, started.stderr
    assert f"broker ready at 127.0.0.1:{port}" in started.stdout
    pid = int((tmp_path / "b" / "broker.pid").read_text())
    assert (tmp_path / "b" / "broker.log").stat().st_size > 0
    try:
        # The port is read back from the data dir: status and stop need only --data-dir.
        status = delayline("broker", "status", "--data-dir", str(tmp_path / "b"))
        assert status.returncode == 0
        assert f"broker running at 127.0.0.1:{port} (pid {pid}," in status.stdout

        second = delayline("broker", "start", *flags, "--port", str(free_port()))
        assert second.returncode == 1
        assert f"a broker already runs on {tmp_path / 'b'} (pid {pid})" in second.stderr
    finally:
        stopped = delayline("broker", "stop", "--data-dir", str(tmp_path / "b"))
    assert stopped.returncode == 0, stopped.stderr
    assert f"broker stopped (pid {pid}, was at 127.0.0.1:{port})" in stopped.stdout
    assert not pid_alive(pid)

    status = delayline("broker", "status", "--data-dir", str(tmp_path / "b"))
    assert status.returncode == 3
    assert status.stdout == (
        f"broker not running (data dir {tmp_path / 'b'}); start it with "
        f"`delayline broker start --data-dir {tmp_path / 'b'} --port {port}`\n"
    )
    again = delayline("broker", "stop", *flags)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"broker not running (data dir {tmp_path / 'b'}); nothing to stop\n"


def test_broker_refuses_a_port_in_use(tmp_path: Path, kafka_bootstrap: str) -> None:
    taken = kafka_bootstrap.rsplit(":", 1)[1]
    result = delayline("broker", "start", "--data-dir", str(tmp_path / "b"), "--port", taken)
    assert result.returncode == 1
    assert f"port {taken} on 127.0.0.1 is in use" in result.stderr
    assert delayline("broker", "status", "--data-dir", str(tmp_path / "b")).returncode == 3


def test_schedule_and_cancel(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, unique_topic("sched"), partitions=3)
    common = ["--bootstrap-servers", kafka_bootstrap, "--schedules-topic", topic]
    result = delayline(
        "schedule", "--id", "cli-1", "--topic", "target", "--key", "k1", "--in", "90s",
        "--header", "a=b", "--header", "empty=", *common, "hello",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "scheduled 'cli-1' -> target at " in result.stdout
    past = "2000-01-01T00:00:00Z"
    piped = delayline(
        "schedule", "--id", "cli-2", "--topic", "target", "--at", past, *common, "-",
        stdin=b"from stdin",
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert "in the past; it fires at once" in piped.stderr
    # No API to ask whether cli-1 is pending (tests/integration/test_cli_api.py has one).
    no_api = ["--api-url", f"http://127.0.0.1:{free_port()}"]
    cancelled = delayline("cancel", "cli-1", *common, *no_api)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "could not check that 'cli-1' is pending" in cancelled.stderr

    parsed = [(r.partition, parse_record(r)) for r in read_topic(kafka_bootstrap, topic)]
    by_id: dict[str, list[tuple[int, Schedule | Cancel]]] = {}
    for partition, p in parsed:
        assert isinstance(p, Schedule | Cancel)
        by_id.setdefault(p.id, []).append((partition, p))
    first, cancel = by_id["cli-1"]
    assert isinstance(first[1], Schedule)
    assert first[1].target_key == b"k1"
    assert first[1].payload == b"hello"
    assert [(n, v) for n, v in first[1].headers if not n.startswith("scheduler-")] == [
        ("a", b"b"),
        ("empty", b""),
    ]
    assert isinstance(cancel[1], Cancel)
    assert first[0] == cancel[0]
    (second,) = by_id["cli-2"]
    assert isinstance(second[1], Schedule)
    assert (second[1].payload, second[1].due_ms) == (b"from stdin", 946_684_800_000)


def test_unreachable_broker_is_one_clear_line_within_the_timeout() -> None:
    # A port that accepts connections but never answers: the quick connect check passes
    # (a refused port fails at once, see below), so the client's own timeout applies.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        began = time.monotonic()
        result = delayline("cancel", "x", "-b", address, "--timeout", "2s", "--force")
        elapsed = time.monotonic() - began
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "did not answer within 2 s" in lines[0]
    assert lines[0].endswith("(retriable)")
    # 2 s timeout plus interpreter start-up: 2.2-2.4 s measured here.
    assert elapsed < 8


def test_topics_create_and_wrong_policy(kafka_bootstrap: str) -> None:
    sched, dlq, commits = unique_topic("s"), unique_topic("d"), unique_topic("c")
    args = ["topics", "create", "-b", kafka_bootstrap, "--schedules-topic", sched,
            "--dead-letter-topic", dlq, "--commits-topic", commits, "--history-topic", "",
            "--partitions", "2"]  # fmt: skip
    created = delayline(*args)
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines() == [
        f"{sched}: created",
        f"{dlq}: created",
        f"{commits}: created",
    ]

    wrong = create_topic(kafka_bootstrap, unique_topic("w"), config={"cleanup.policy": "delete"})
    refused = delayline("topics", "create", "-b", kafka_bootstrap, "--schedules-topic", wrong)
    assert refused.returncode == 1
    assert (
        f"topic {wrong} exists with cleanup.policy=delete but must be compacted" in refused.stderr
    )


@pytest.mark.parametrize(
    "command",
    [
        ["schedule", "--id", "a", "--topic", "t", "--in", "5m", "p"],
        ["cancel", "a"],
        ["topics", "create"],
        ["tail", "t"],
    ],
    ids=lambda c: " ".join(c[:2]) if c[0] == "topics" else c[0],
)
def test_a_refused_connection_fails_fast_with_what_to_do(command: list[str]) -> None:
    address = f"127.0.0.1:{free_port()}"  # nobody listens
    began = time.monotonic()
    result = delayline(*command, "-b", address)  # the default --timeout is 10 s
    elapsed = time.monotonic() - began
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"delayline: error: cannot connect to Kafka ({address} refused")
    for hint in ("-b/--bootstrap-servers", "DELAYLINE_BOOTSTRAP_SERVERS", "delayline broker start"):
        assert hint in line
    # Interpreter start-up and the connect: about 1 s measured here.
    assert elapsed < 5


def test_schedule_in_a_negative_duration_is_a_past_due_time(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, unique_topic("sched"), partitions=2)
    before_ms = time.time_ns() // 1_000_000
    result = delayline(
        "schedule", "--id", "late-1", "--topic", "target", "--in", "-5m",
        "-b", kafka_bootstrap, "--schedules-topic", topic, "late",
    )  # fmt: skip
    after_ms = time.time_ns() // 1_000_000
    assert result.returncode == 0, result.stderr
    # One warning, the command line's own: the client's log line for it is not repeated.
    assert result.stderr == "delayline: warning: due time is 5m in the past; it fires at once\n"
    (record,) = read_topic(kafka_bootstrap, topic)
    schedule = parse_record(record)
    assert isinstance(schedule, Schedule)
    assert before_ms - 300_000 <= schedule.due_ms <= after_ms - 300_000
