"""One meaning per environment variable across every command, and the flags the
long-running commands share: --log-format, the servers' addresses, the API token's help;
``schedule`` and ``cancel`` read ``DELAYLINE_SCHEDULES_TOPICS`` as the others do."""

from __future__ import annotations

import argparse
import functools
import logging
import os
import re
from collections import defaultdict
from typing import Any

import pytest

import delayline.cli
from delayline.cli import build_parser, main
from delayline.cli._common import add_timeout, duration_arg, env_flag
from delayline.cli.produce import FORMER_TOPIC_ENV, _fallback_place, topics_to_write
from delayline.core.logs import LOG_FORMAT_ENV
from delayline.core.units import parse_duration_ms, parse_instant_ms
from delayline.errors import ConfigError
from delayline.infra.ports import free_port

ENV_IN_HELP = re.compile(r"\[env ([A-Za-z0-9_]+)")
LONG_RUNNING = ("run", "committer", "api", "oscillator")


def commands(
    parser: argparse.ArgumentParser, name: str = "delayline"
) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every parser: the top one and each subcommand's, by name."""
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                found.extend(commands(sub, f"{name} {sub_name}"))
    return found


def flags_by_env() -> dict[str, list[tuple[str, argparse.Action]]]:
    """Each environment variable a flag's help names, with the flags naming it."""
    found: dict[str, list[tuple[str, argparse.Action]]] = defaultdict(list)
    for name, parser in commands(build_parser()):
        for action in parser._actions:
            for env in ENV_IN_HELP.findall(action.help or ""):
                found[env].append((f"{name} {action.option_strings[0]}", action))
    return found


def kind_of(convert: Any) -> Any:
    """What a flag's ``type`` does, comparable across the closures each command makes."""
    if isinstance(convert, functools.partial):
        return (kind_of(convert.func), convert.args, tuple(sorted(convert.keywords.items())))
    cells = getattr(convert, "__closure__", None) or ()
    inner = tuple(kind_of(cell.cell_contents) for cell in cells)
    return (getattr(convert, "__qualname__", repr(convert)), inner)


def meaning(action: argparse.Action) -> tuple[Any, ...]:
    """What a flag does with its variable: where it goes, how it is read, its default."""
    choices = None if action.choices is None else tuple(action.choices)
    return (type(action).__name__, action.dest, kind_of(action.type), choices, action.default)


def test_every_environment_variable_is_delayline_s_and_means_one_thing() -> None:
    by_env = flags_by_env()
    assert len(by_env) >= 60  # the check reads the helps
    for env, flags in by_env.items():
        assert env.startswith("DELAYLINE_"), f"{env} ({flags[0][0]}) is not DELAYLINE_*"
        meanings = {meaning(action): flag for flag, action in flags}
        assert len(meanings) == 1, f"{env} means different things: {sorted(meanings.values())}"


def test_the_check_tells_meanings_apart_but_not_two_commands_alike() -> None:
    one, two = argparse.ArgumentParser(), argparse.ArgumentParser()
    add_timeout(one)
    add_timeout(two)
    timeout = one._actions[1]
    assert meaning(timeout) == meaning(two._actions[1])  # each parser has its own closure
    env_flag(two, "--wait", env="DELAYLINE_TIMEOUT", default="10s", help="w",
             type=duration_arg(parse_duration_ms))  # fmt: skip
    env_flag(two, "--until", env="DELAYLINE_TIMEOUT", default="10s", help="u", dest="timeout_ms",
             type=duration_arg(parse_instant_ms))  # fmt: skip
    env_flag(two, "--upto", env="DELAYLINE_TIMEOUT", default="20s", help="u", dest="timeout_ms",
             type=duration_arg(parse_duration_ms))  # fmt: skip
    wait, until, upto = two._actions[2:]
    assert meaning(wait) != meaning(timeout)  # another dest
    assert meaning(until) != meaning(timeout)  # another type
    assert meaning(upto) != meaning(timeout)  # another default


def test_schedule_and_cancel_read_the_schedules_topics_variable_of_the_other_commands() -> None:
    by_env = flags_by_env()
    readers = {flag.split(" --")[0] for flag, _ in by_env["DELAYLINE_SCHEDULES_TOPICS"]}
    assert {"delayline schedule", "delayline cancel", "delayline run", "delayline api",
            "delayline committer"} <= readers  # fmt: skip
    assert FORMER_TOPIC_ENV not in by_env


@pytest.mark.parametrize("command", ["schedule", "cancel"])
@pytest.mark.parametrize(
    ("argv", "env", "topics", "warned"),
    [
        ([], {}, ("delayline-schedules",), False),
        ([], {"DELAYLINE_SCHEDULES_TOPICS": "a, b"}, ("a", "b"), False),
        ([], {FORMER_TOPIC_ENV: "old"}, ("old",), True),
        ([], {"DELAYLINE_SCHEDULES_TOPICS": "a", FORMER_TOPIC_ENV: "old"}, ("a",), False),
        (["--schedules-topic", "f"], {FORMER_TOPIC_ENV: "old"}, ("f",), False),
    ],
)
def test_the_schedules_topics_of_schedule_and_cancel(
    command: str,
    argv: list[str],
    env: dict[str, str],
    topics: tuple[str, ...],
    warned: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("DELAYLINE_SCHEDULES_TOPICS", FORMER_TOPIC_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    rest = ["--id", "i", "--topic", "t", "--in", "1m", "p"] if command == "schedule" else ["i"]
    args = build_parser().parse_args([command, *argv, *rest])
    assert topics_to_write(args) == topics
    err = capsys.readouterr().err
    assert (f"warning: {FORMER_TOPIC_ENV} is deprecated" in err) is warned
    if warned:
        assert "DELAYLINE_SCHEDULES_TOPICS" in err


@pytest.mark.parametrize("command", LONG_RUNNING)
def test_long_running_commands_take_a_log_format(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(LOG_FORMAT_ENV, raising=False)
    assert build_parser().parse_args([command]).log_format == "text"
    assert build_parser().parse_args([command, "--log-format", "json"]).log_format == "json"
    monkeypatch.setenv(LOG_FORMAT_ENV, "json")
    assert build_parser().parse_args([command]).log_format == "json"


def test_a_bad_log_format_is_refused_from_the_flag_and_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["committer", "--log-format", "xml"])
    assert "'xml' is not one of text, json" in capsys.readouterr().err
    monkeypatch.setenv(LOG_FORMAT_ENV, "yaml")
    with pytest.raises(SystemExit):
        main(["api"])
    assert "'yaml' is not one of text, json" in capsys.readouterr().err


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """What :func:`delayline.cli.main` asks of the logging set-up."""
    calls: list[tuple[int, str]] = []
    monkeypatch.setattr(delayline.cli, "configure_logging", lambda *a: calls.append(a))
    monkeypatch.setenv(LOG_FORMAT_ENV, "text")  # restored after the test
    return calls


def test_main_logs_in_the_format_asked_and_passes_it_on(
    configured: list[tuple[int, str]],
) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    assert main(["oscillator", "-b", nobody, "--log-format", "json"]) == 1  # no Kafka there
    assert configured == [(logging.WARNING, "json")]
    assert os.environ[LOG_FORMAT_ENV] == "json"  # for Spark's JVM and its Python workers
    assert main(["-v", "committer", "-b", nobody, "--log-format", "text"]) == 1
    assert configured[1] == (logging.INFO, "text")
    assert os.environ[LOG_FORMAT_ENV] == "text"


def test_in_json_a_failure_is_a_log_line_not_a_bare_one(
    configured: list[tuple[int, str]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    assert main(["oscillator", "-b", nobody, "--log-format", "json"]) == 1
    assert "delayline: error" not in capsys.readouterr().err
    [failed] = [r for r in caplog.records if r.name == "delayline.cli"]
    assert failed.levelno == logging.ERROR
    assert failed.getMessage().startswith("delayline: error: cannot connect to Kafka")

    def boom(_args: argparse.Namespace) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(delayline.cli.oscillator, "_oscillator", boom)
    assert main(["oscillator", "--log-format", "json"]) == 1
    assert caplog.records[-1].exc_info is not None  # the traceback, in exc_info
    with pytest.raises(RuntimeError, match="a bug"):  # text: Python's own traceback
        main(["oscillator", "--log-format", "text"])


def test_a_short_command_logs_text_and_leaves_the_variable_alone(
    configured: list[tuple[int, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_FORMAT_ENV, "json")
    assert main(["pause"]) == 1  # neither an ID nor --group
    assert configured == [(logging.WARNING, "text")]
    assert os.environ[LOG_FORMAT_ENV] == "json"


@pytest.mark.parametrize(
    ("command", "flag", "env"),
    [
        ("run", "--metrics-host", "DELAYLINE_METRICS_HOST"),
        ("committer", "--metrics-host", "DELAYLINE_COMMITTER_METRICS_HOST"),
        ("oscillator", "--metrics-host", "DELAYLINE_OSCILLATOR_METRICS_HOST"),
        ("api", "--host", "DELAYLINE_API_HOST"),
    ],
)
def test_every_server_listens_on_loopback_unless_told_and_says_how_in_a_container(
    command: str, flag: str, env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(env, raising=False)
    action = option(command, flag)
    assert action.default == "127.0.0.1"
    assert action.help is not None
    assert f"[env {env}; default 127.0.0.1]" in action.help
    assert "use 0.0.0.0 in a container" in action.help
    monkeypatch.setenv(env, "0.0.0.0")
    assert getattr(build_parser().parse_args([command]), action.dest) == "0.0.0.0"


def option(command: str, flag: str) -> argparse.Action:
    parsers = dict(commands(build_parser()))
    found = [a for a in parsers[f"delayline {command}"]._actions if flag in a.option_strings]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("command", ["pause", "resume", "cancel"])
def test_the_token_of_a_write_is_said_to_be_always_needed(command: str) -> None:
    help = option(command, "--token").help or ""
    assert "write, which always needs it" in help
    assert "delayline api was started with (its --token)" in help


@pytest.mark.parametrize("command", ["list", "show", "dead-letters"])
def test_the_token_of_a_read_is_said_to_be_needed_with_reads_need_token(command: str) -> None:
    help = option(command, "--token").help or ""
    assert "need it only when the API runs with --reads-need-token" in help
    assert "write" not in help


@pytest.mark.parametrize(
    ("argv", "place"),
    [
        (["b:1:5"], ("b", 1)),  # a derived id of the second schedules topic: there
        (["order-7"], ("a", None)),  # the first topic, the id's own partition
        (["env:2:9", "--force"], ("a", None)),
    ],
)
def test_a_cancel_the_api_cannot_place_goes_to_a_schedules_topic(
    argv: list[str], place: tuple[str, int | None]
) -> None:
    topics = ["--schedules-topic", "a", "--schedules-topic", "b"]
    assert _fallback_place(build_parser().parse_args(["cancel", *argv, *topics])) == place


def test_a_cancel_of_another_topic_s_derived_id_says_which_flag_to_pass() -> None:
    args = build_parser().parse_args(["cancel", "env:2:9", "--schedules-topic", "a"])
    with pytest.raises(ConfigError, match=r"pass --schedules-topic env .* write the cancel to a "):
        _fallback_place(args)
