"""``--hold`` and every hold's own flags (from :data:`delayline.holds.registry.HOLD_KINDS`),
shared by ``run``, ``topics create``, ``acls`` and ``bench``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from delayline.cli._common import duration_arg, env_flag, one_of
from delayline.holds.registry import HOLD_KINDS, Flag, HoldKind, hold_kind, settings_from_flags


def add_hold_flags(
    parser: argparse.ArgumentParser | Any,
    help: str,
    wanted: Callable[[HoldKind], object] = lambda kind: True,
    *,
    env: str = "DELAYLINE_HOLD",
    flags_of: Callable[[HoldKind], tuple[Flag, ...]] = lambda kind: kind.flags,
) -> None:
    """``--hold`` (``help`` says what it does here, the holds are listed after it; its
    environment variable ``env``) and the flags (``flags_of``: a hold's run flags by
    default) of each hold ``wanted`` accepts, each with its environment variable."""
    kinds = "; ".join(f"{kind.name}: {kind.summary}" for kind in HOLD_KINDS.values())
    env_flag(
        parser,
        "--hold",
        env=env,
        default="jvm",
        type=one_of(HOLD_KINDS),
        metavar="{" + ",".join(HOLD_KINDS) + "}",
        help=f"{help} ({kinds})",
    )
    for kind in HOLD_KINDS.values():
        for flag in flags_of(kind) if wanted(kind) else ():
            env_flag(
                parser,
                flag.name,
                env=flag.env,
                default=flag.default,
                type=duration_arg(flag.parse),
                dest=flag.dest,
                metavar=flag.metavar,
                help=f"--hold {kind.name}: {flag.help}",
            )


def hold_settings_from(args: argparse.Namespace) -> Any:
    """The settings of the hold ``--hold`` names, from its flags; ``None`` (its defaults,
    see :class:`~delayline.pipeline.config.PipelineConfig`) when the command has none of
    them."""
    kind = hold_kind(args.hold)
    if any(flag.dest not in vars(args) for flag in kind.flags):
        return None
    return settings_from_flags(kind, vars(args))


def hold_bench_options(args: argparse.Namespace) -> dict[str, Any]:
    """The values of the bench flags of the hold ``--hold`` names, by key."""
    side = hold_kind(args.hold).bench
    return {} if side is None else {flag.key: getattr(args, flag.dest) for flag in side.flags}
