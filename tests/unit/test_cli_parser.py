"""Every setting flag names its environment variable; bad flags fail clearly."""

from __future__ import annotations

import argparse
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from delayline.cli import build_parser, main
from delayline.cli.listing import dead_letter_lines, show_lines
from delayline.cli.tail import Received, human_line, json_line
from delayline.contract import ConsumedRecord
from delayline.errors import ConfigError, KafkaUnavailableError
from delayline.infra.ports import free_port
from delayline.kafka.probe import bootstrap_addresses, require_listening

# Per-invocation data, not settings: an environment default would be a trap.
NO_ENV = {
    "--help",
    "--version",
    "--verbose",
    "--id",
    "--topic",
    "--key",
    "--at",
    "--in",
    "--header",
    "--json-message",
    # a recurring schedule, a group: the schedule itself
    "--cron",
    "--every",
    "--time-zone",
    "--until",
    "--max-occurrences",
    "--catch-up",
    "--catch-up-window",
    "--group",
    "--window",
    # delayline list: the query itself (schedule's --contract has DELAYLINE_CONTRACT)
    "--contract",
    "--contains",
    "--target-topic",
    "--limit",
    "--json",
    # delayline dead-letters redrive: which letters, and whether to write
    "--source-topic",
    "--since",
    "--error",
    "--dry-run",
    # delayline acls: create them now rather than print them (an action)
    "--apply",
}

AN_ENVELOPE = ["schedule", "--contract", "envelope", "--envelope-topic", "e", "--topic", "t"]


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((name, sub))
                found.extend((f"{name} {n}", s) for n, s in _subparsers(sub))
    return found


def test_every_setting_flag_names_its_environment_variable() -> None:
    checked = 0
    for name, sub in _subparsers(build_parser()):
        for action in sub._actions:
            long = [o for o in action.option_strings if o.startswith("--")]
            if not long or long[0] in NO_ENV:
                continue
            assert action.help is not None
            assert "[env DELAYLINE_" in action.help, f"{name} {long[0]} has no env var in --help"
            checked += 1
    assert checked >= 15


def test_environment_supplies_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELAYLINE_BOOTSTRAP_SERVERS", "kafka:1234")
    monkeypatch.setenv("DELAYLINE_TIMEOUT", "3s")
    args = build_parser().parse_args(["cancel", "x"])
    assert args.bootstrap_servers == "kafka:1234"
    assert args.timeout_ms == 3000


@pytest.mark.parametrize(
    ("argv", "env", "wake", "deliver_first"),
    [
        ([], None, True, True),
        (["--no-deliver-first"], None, True, False),
        (["--no-wake"], None, False, True),
        ([], "DELAYLINE_NO_DELIVER_FIRST", True, False),
        ([], "DELAYLINE_NO_WAKE", False, True),
    ],
)
def test_switches_are_on_until_a_flag_or_their_environment_variable_turns_them_off(
    argv: list[str],
    env: str | None,
    wake: bool,
    deliver_first: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if env is not None:
        monkeypatch.setenv(env, "1")
    args = build_parser().parse_args(["run", *argv])
    assert (args.wake, args.deliver_first) == (wake, deliver_first)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["schedule", "--id", "a", "--topic", "t", "--in", "soon", "p"], "bad duration 'soon'"),
        (["schedule", "--id", "a", "--topic", "t", "--at", "2030-01-01T00:00", "p"], "no timezone"),
        (["broker", "start", "--port", "x"], "invalid int value"),
        (
            ["schedule", "--id", "a", "--topic", "t", "--in", "1m", "--window", "soon", "p"],
            "argument --window: bad duration 'soon'",
        ),
    ],
)
def test_bad_flags_exit_2_with_one_clear_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["schedule", "--id", "a", "--topic", "t", "p"],
            "give the due time with --at or --in (or a --cron or --every)",
        ),
        (
            ["schedule", "--id", "a", "--topic", "t", "--cron", "61 * * * *", "p"],
            "cron expression '61 * * * *'",
        ),
        (
            ["schedule", "--id", "a", "--topic", "t", "--every", "5m", "--time-zone", "Mars", "p"],
            "unknown time zone 'Mars'",
        ),
        (
            ["schedule", "--id", "a", "--topic", "t", "--in", "1m", "--window", "2h", "p"],
            "--window: a delivery window must be within 1ms..1h, not 2h",
        ),
        (
            ["schedule", "--id", "a", "--topic", "t", "--in", "1m", "--window", "0s", "p"],
            "--window: a delivery window must be within 1ms..1h, not 0ms",
        ),
        (
            [*AN_ENVELOPE, "--in", "1m", "--window", "1m", "p"],
            "--cron, --every, --group and --window are for the header contract",
        ),
        (["pause"], "give a schedule ID or --group, not both"),
        (["cancel", "x", "--group", "g"], "give a schedule ID or --group, not both"),
    ],
)
def test_bad_combinations_fail_before_anything_is_asked(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    assert f"delayline: error: {message}" in capsys.readouterr().err


def test_bad_environment_value_is_reported_like_a_bad_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DELAYLINE_TIMEOUT", "forever")
    with pytest.raises(SystemExit):
        main(["cancel", "x"])
    assert "bad duration 'forever'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "tty", "held"),
    [("0", True, False), ("false", True, False), ("1", False, True), ("", True, True),
     (None, False, False)],
)  # fmt: skip
def test_demo_hold_env_wins_over_the_terminal_default(
    monkeypatch: pytest.MonkeyPatch, value: str | None, tty: bool, held: bool
) -> None:
    """DELAYLINE_DEMO_HOLD=0 keeps the demo from holding even in a terminal."""
    if value is None:
        monkeypatch.delenv("DELAYLINE_DEMO_HOLD", raising=False)
    else:
        monkeypatch.setenv("DELAYLINE_DEMO_HOLD", value)
    monkeypatch.setattr("sys.stdin.isatty", lambda: tty)
    assert build_parser().parse_args(["demo"]).hold is held


def test_a_boolean_env_var_with_junk_is_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DELAYLINE_DEMO_HOLD", "maybe")
    with pytest.raises(ConfigError, match="DELAYLINE_DEMO_HOLD='maybe'"):
        build_parser()
    assert main(["--version"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("delayline: error: environment variable DELAYLINE_DEMO_HOLD='maybe'")
    assert "Traceback" not in err


# --- The first hour: tail, show, dead-letters, cancel --force, --in -5m, probe, broker ---

# More per-invocation flags: tail's start and count, cancel's override, the dead-letter query.
NO_ENV.update({"--target-topic", "--from-beginning", "--max-messages", "--force", "--reason"})


@pytest.mark.parametrize(
    ("flag", "ms"), [(["--in", "-5m"], -300_000), (["--in=-1h30m"], -5_400_000)]
)
def test_schedule_in_takes_a_negative_duration(flag: list[str], ms: int) -> None:
    args = build_parser().parse_args(["schedule", "--id", "a", "--topic", "t", *flag, "p"])
    assert args.in_ms == ms


@pytest.mark.parametrize(
    "argv",
    [
        ["cancel", "x", "--timeout=-5s"],
        ["broker", "start", "--start-timeout=-1s"],
        ["tail", "t", "--timeout=-1s"],
    ],
)
def test_other_duration_flags_refuse_a_negative_one(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "must not be negative" in capsys.readouterr().err


def test_tail_flags(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["tail", "orders"])
    assert (args.topic, args.from_beginning, args.json) == ("orders", False, False)
    assert (args.max_messages, args.idle_timeout_ms) == (None, None)
    monkeypatch.setenv("DELAYLINE_TAIL_TIMEOUT", "5s")
    args = build_parser().parse_args(["tail", "o", "--from-beginning", "--max-messages", "3"])
    assert (args.from_beginning, args.max_messages, args.idle_timeout_ms) == (True, 3, 5000)
    with pytest.raises(SystemExit):
        main(["tail", "o", "--max-messages", "0"])
    assert "must be a whole number of 1 or more, got '0'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("servers", "addresses"),
    [
        ("127.0.0.1:9092", [("127.0.0.1", 9092)]),
        ("a:1, b:2", [("a", 1), ("b", 2)]),
        ("kafka", [("kafka", 9092)]),
        ("PLAINTEXT://k:9093", [("k", 9093)]),
        ("[::1]:9094", [("::1", 9094)]),
    ],
)
def test_probe_reads_bootstrap_lists(servers: str, addresses: list[tuple[str, int]]) -> None:
    assert bootstrap_addresses(servers) == addresses


@pytest.mark.parametrize("servers", ["", " , ", "k:x", "k:0", ":9092"])
def test_probe_refuses_a_bad_bootstrap_list(servers: str) -> None:
    with pytest.raises(KafkaUnavailableError, match="-b/--bootstrap-servers"):
        bootstrap_addresses(servers)


def test_probe_fails_fast_on_a_closed_port_naming_what_to_do() -> None:
    port = free_port()
    began = time.monotonic()
    with pytest.raises(KafkaUnavailableError) as raised:
        require_listening(f"127.0.0.1:{port}")
    assert time.monotonic() - began < 1
    message = str(raised.value)
    assert f"127.0.0.1:{port} refused the connection" in message
    for hint in ("-b/--bootstrap-servers", "DELAYLINE_BOOTSTRAP_SERVERS", "delayline broker start"):
        assert hint in message


def test_probe_passes_when_one_address_listens() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        require_listening(f"127.0.0.1:{free_port()},127.0.0.1:{port}")


RECORD = ConsumedRecord(
    topic="reminders",
    partition=1,
    offset=17,
    timestamp_ms=1_893_456_000_100,
    key=b"cust-7",
    value=b'{"n": 1}\nsecond line',
    headers=(("scheduler-epoch", b"1893456000.250"), ("trace", b"t-1"), ("bin", b"\xff")),
)


def test_tail_shows_a_record_on_one_line_with_its_lateness() -> None:
    seen = Received(RECORD, received_ms=1_893_456_001_500)
    assert seen.due_ms == 1_893_456_000_250
    assert seen.lateness_ms == 1250
    assert human_line(seen) == (
        "2030-01-01T00:00:01.500Z  reminders/1@17  key cust-7  lateness 1250 ms  "
        "headers scheduler-epoch=1893456000.250, trace=t-1, bin=base64:/w==  "
        'value {"n": 1}\\nsecond line'
    )


def test_tail_marks_binary_and_null_and_skips_lateness_without_a_due_time() -> None:
    binary = ConsumedRecord("t", 0, 3, 5, None, b"\x00\xff", (("scheduler-epoch", b"soon"),))
    seen = Received(binary, received_ms=0)
    assert seen.lateness_ms is None
    assert human_line(seen) == (
        "1970-01-01T00:00:00.000Z  t/0@3  key (null)  headers scheduler-epoch=soon  "
        "value (base64) AP8="
    )
    tombstone = Received(ConsumedRecord("t", 0, 4, 5, b"k", None), received_ms=0)
    assert human_line(tombstone).endswith("  key k  value (null)")


def test_tail_json_has_every_field_with_its_encoding() -> None:
    line = json_line(Received(RECORD, received_ms=1_893_456_001_500))
    assert json.loads(line) == {
        "topic": "reminders",
        "partition": 1,
        "offset": 17,
        "timestamp_ms": 1_893_456_000_100,
        "received_ms": 1_893_456_001_500,
        "key": "cust-7",
        "headers": [
            {"name": "scheduler-epoch", "value": "1893456000.250", "encoding": "utf-8"},
            {"name": "trace", "value": "t-1", "encoding": "utf-8"},
            {"name": "bin", "value": "/w==", "encoding": "base64"},
        ],
        "value": '{"n": 1}\nsecond line',
        "encodings": {"key": "utf-8", "value": "utf-8"},
        "due_ms": 1_893_456_000_250,
        "lateness_ms": 1250,
    }
    binary = json.loads(json_line(Received(ConsumedRecord("t", 0, 0, 0, None, b"\xff"), 0)))
    assert (binary["key"], binary["value"], binary["encodings"]) == (
        None,
        "/w==",
        {"key": None, "value": "base64"},
    )
    assert (binary["due_ms"], binary["lateness_ms"]) == (None, None)


DETAIL: dict[str, Any] = {
    "id": "order-42",
    "pending": True,
    "current": {
        "contract": "header",
        "topic": "delayline-schedules",
        "partition": 1,
        "offset": 17,
        "due_at": "2030-01-01T17:00:00.250000Z",
        "target_topic": "reminders",
        "target_key": "cust-7",
        "target_key_base64": "Y3VzdC03",
        "payload_text": '{"invoice": 42}',
        "payload_base64": "eyJpbnZvaWNlIjogNDJ9",
        "payload_size": 15,
        "headers": [
            {"name": "scheduler-epoch", "value": "1893517200.250", "encoding": "utf-8"},
            {"name": "trace", "value": "abc", "encoding": "utf-8"},
        ],
    },
    "versions": [
        {"kind": "created", "at": "2029-12-31T10:00:00Z", "topic": "delayline-schedules",
         "partition": 1, "offset": 3, "due_at": "2030-01-01T12:00:00Z",
         "target_topic": "reminders", "lateness_ms": None, "reason": None},
        {"kind": "updated", "at": "2029-12-31T11:00:00.500000Z", "topic": "delayline-schedules",
         "partition": 1, "offset": 17, "due_at": "2030-01-01T17:00:00.250000Z",
         "target_topic": "reminders", "lateness_ms": None, "reason": None},
    ],
}  # fmt: skip


def test_show_for_people() -> None:
    assert show_lines(DETAIL) == [
        "order-42: pending",
        "  due        2030-01-01 17:00:00.250 UTC",
        '  target     reminders, key "cust-7"',
        "  stored at  delayline-schedules/1@17 (header contract)",
        '  payload    "{\\"invoice\\": 42}" (15 bytes)',
        "  header     trace: abc",
        "versions (2, oldest first):",
        "  2029-12-31 10:00:00.000  created        delayline-schedules/1@3  "
        "due 2030-01-01 12:00:00.000  -> reminders",
        "  2029-12-31 11:00:00.500  updated        delayline-schedules/1@17  "
        "due 2030-01-01 17:00:00.250  -> reminders",
    ]
    fired = {
        "id": "x",
        "pending": False,
        "current": None,
        "versions": [
            {"kind": "fired", "at": "2030-01-01T00:00:01Z", "topic": "s", "partition": 0,
             "offset": 1, "lateness_ms": 812, "due_at": None, "target_topic": None},
        ],
    }  # fmt: skip
    assert show_lines(fired) == [
        "x: not pending (last: fired)",
        "versions (1, oldest first):",
        "  2030-01-01 00:00:01.000  fired          s/0@1  lateness 812 ms",
    ]


def test_dead_letters_for_people() -> None:
    items: list[dict[str, Any]] = [
        {"at": "2030-01-01T00:00:00Z", "schedule_id": "bad-1", "source": "s/0@4",
         "reason": "missing header scheduler-epoch"},
        {"at": "2030-01-01T00:00:01Z", "schedule_id": None, "source": "s/1@0",
         "reason": "missing schedule id"},
    ]  # fmt: skip
    lines = dead_letter_lines(items, more=True)
    assert lines[1].split() == [
        "2030-01-01", "00:00:00.000", "bad-1", "s/0@4", "missing", "header", "scheduler-epoch",
    ]  # fmt: skip
    assert "(no id)" in lines[2]
    assert lines[-1] == "2 dead letter(s) (more: raise --limit)"
    assert dead_letter_lines([], more=False)[-1] == "0 dead letter(s)"


def test_broker_status_and_stop_of_a_directory_without_a_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "b"
    assert main(["broker", "status", "--data-dir", str(data_dir)]) == 3
    assert capsys.readouterr().out == (
        f"broker not running (data dir {data_dir}); "
        f"start it with `delayline broker start --data-dir {data_dir}`\n"
    )
    assert main(["broker", "stop", "--data-dir", str(data_dir)]) == 0
    assert capsys.readouterr().out == f"broker not running (data dir {data_dir}); nothing to stop\n"
    # A broker once started there on another port: the hint says which.
    data_dir.mkdir()
    (data_dir / "server.properties").write_text(
        "listeners=PLAINTEXT://127.0.0.1:19555,CONTROLLER://127.0.0.1:19556\n"
        "advertised.listeners=PLAINTEXT://127.0.0.1:19555\n"
    )
    assert main(["broker", "status", "--data-dir", str(data_dir)]) == 3
    assert f"`delayline broker start --data-dir {data_dir} --port 19555`" in capsys.readouterr().out
