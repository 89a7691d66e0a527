"""The hold registry: each entry's flags make its default settings, and every flag reaches
the command line with its environment variable."""

from __future__ import annotations

import pytest

from delayline.cli import build_parser
from delayline.errors import ConfigError
from delayline.holds.registry import HOLD_KINDS, hold_kind, settings_from_flags
from delayline.pipeline.config import PipelineConfig


@pytest.mark.parametrize("name", sorted(HOLD_KINDS))
def test_the_flag_defaults_are_the_settings_defaults(name: str) -> None:
    kind = HOLD_KINDS[name]
    values = {flag.dest: flag.parse(str(flag.default)) for flag in kind.flags}
    assert settings_from_flags(kind, values) == kind.default_settings()
    assert PipelineConfig(hold=name).hold_settings == kind.default_settings()


def test_flags_are_distinct_and_named_in_help() -> None:
    flags = [flag for kind in HOLD_KINDS.values() for flag in kind.flags]
    assert len({f.name for f in flags}) == len({f.env for f in flags}) == len(flags)
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert isinstance(subparsers.choices, dict)
    with_acls = [f for kind in HOLD_KINDS.values() if kind.acls for f in kind.flags]
    for command, wanted in (("run", flags), ("acls", with_acls)):
        help_text = subparsers.choices[command].format_help()
        assert "{jvm,spark,memory,redis,buckets}" in help_text
        for flag in wanted:
            assert flag.name in help_text, (command, flag.name)
            assert flag.env in help_text, (command, flag.env)


def test_an_unknown_hold_or_another_holds_settings_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown hold 'nope'"):
        hold_kind("nope")
    with pytest.raises(ConfigError, match="takes no RedisHoldConfig"):
        PipelineConfig(hold="buckets", hold_settings=HOLD_KINDS["redis"].default_settings())
    with pytest.raises(ConfigError, match="needs the waker"):
        PipelineConfig(hold="redis", wake=False)
