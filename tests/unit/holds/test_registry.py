"""The hold registry: each entry's flags make its default settings, and every flag reaches
the command line with its environment variable."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from delayline.cli import build_parser
from delayline.errors import ConfigError
from delayline.holds.registry import HOLD_KINDS, HoldKind, hold_kind, settings_from_flags
from delayline.pipeline.config import PipelineConfig


@pytest.mark.parametrize("name", sorted(HOLD_KINDS))
def test_the_flag_defaults_are_the_settings_defaults(name: str) -> None:
    kind = HOLD_KINDS[name]
    values = {flag.dest: flag.parse(str(flag.default)) for flag in kind.flags}
    assert settings_from_flags(kind, values) == kind.default_settings()
    assert PipelineConfig(hold=name).hold_settings == kind.default_settings()


def help_of(*command: str) -> str:
    parser = build_parser()
    for word in command:
        sub = next(a for a in parser._actions if isinstance(a.choices, dict))
        assert isinstance(sub.choices, dict)
        parser = sub.choices[word]
    return parser.format_help()


def test_flags_are_distinct_and_each_command_takes_its_holds_flags_only() -> None:
    flags = [flag for kind in HOLD_KINDS.values() for flag in kind.flags]
    assert len({f.name for f in flags}) == len({f.env for f in flags}) == len(flags)
    commands: dict[tuple[str, ...], Callable[[HoldKind], object]] = {
        ("run",): lambda kind: True,
        ("acls",): lambda kind: kind.acls,
        ("topics", "create"): lambda kind: kind.topics,
    }
    for command, wanted in commands.items():
        help_text = help_of(*command)
        assert "{jvm,spark,memory,redis,buckets}" in help_text
        for kind in HOLD_KINDS.values():
            for flag in kind.flags:
                option = re.search(rf"^\s+{re.escape(flag.name)}\b", help_text, re.M)
                shown = option is not None, flag.env in help_text
                assert shown == ((True, True) if wanted(kind) else (False, False)), (
                    command, flag.name,
                )  # fmt: skip


def test_an_unknown_hold_or_another_holds_settings_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown hold 'nope'"):
        hold_kind("nope")
    with pytest.raises(ConfigError, match="takes no RedisHoldConfig"):
        PipelineConfig(hold="buckets", hold_settings=HOLD_KINDS["redis"].default_settings())
    with pytest.raises(ConfigError, match="needs the waker"):
        PipelineConfig(hold="redis", wake=False)
