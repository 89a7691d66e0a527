"""Every setting flag names its environment variable; bad flags fail clearly."""

from __future__ import annotations

import argparse

import pytest

from delayline.cli import build_parser, main
from delayline.errors import ConfigError

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
    # delayline list: the query itself
    "--contains",
    "--target-topic",
    "--limit",
    "--json",
}


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
    ("argv", "message"),
    [
        (["schedule", "--id", "a", "--topic", "t", "--in", "soon", "p"], "bad duration 'soon'"),
        (["schedule", "--id", "a", "--topic", "t", "--at", "2030-01-01T00:00", "p"], "no timezone"),
        (
            ["schedule", "--id", "a", "--topic", "t", "p"],
            "one of the arguments --at --in is required",
        ),
        (["broker", "start", "--port", "x"], "invalid int value"),
    ],
)
def test_bad_flags_exit_2_with_one_clear_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


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
