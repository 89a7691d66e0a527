"""Every hold delayline can run, each described by one :class:`HoldKind`.

An entry names everything the rest of delayline needs to know about a hold: its
settings (a frozen dataclass made from its command-line flags), the flags themselves
(``delayline run``, ``topics create`` and ``acls`` add them, each with its environment
variable), the topics it needs made, the ACLs of those, whether it needs the waker, what
the fire stage writes for its own events, and the :class:`~delayline.holds.hold.Hold`
class (loaded only when a pipeline runs: it may import Spark or Redis).

``pipeline/``, ``fire/`` and ``cli/`` name no hold: they ask :func:`hold_kind`.
Adding a hold is a module under ``holds/`` and one entry in :data:`HOLD_KINDS`.

This module imports neither Spark nor Redis: the command line reads it to build its
flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from delayline.errors import ConfigError
from delayline.holds.buckets.kind import BUCKETS
from delayline.holds.kinds import Flag, HoldKind
from delayline.holds.redis.kind import REDIS

if TYPE_CHECKING:
    from delayline.holds.hold import Hold, RunSettings

__all__ = ["HOLD_KINDS", "Flag", "HoldKind", "hold_kind", "settings_from_flags", "settings_of"]


def _jvm() -> type[Hold]:
    from delayline.holds.jvm import JvmHold  # noqa: PLC0415 - pyspark

    return JvmHold


def _spark_state() -> type[Hold]:
    from delayline.holds.spark_state import SparkStateHold  # noqa: PLC0415 - pyspark

    return SparkStateHold


def _memory() -> type[Hold]:
    from delayline.holds.memory import MemoryHold  # noqa: PLC0415 - pyspark

    return MemoryHold


HOLD_KINDS: dict[str, HoldKind] = {
    kind.name: kind
    for kind in (
        HoldKind(
            "jvm",
            "Spark state in the checkpoint through a Java processor, durable",
            _jvm,
        ),
        HoldKind(
            "spark",
            "the same through Python transformWithState: durable, several times slower",
            _spark_state,
        ),
        HoldKind(
            "memory",
            "the driver's memory: lost on restart; for trying things out",
            _memory,
            needs_waker=True,
        ),
        REDIS,
        BUCKETS,
    )
}
"""The holds, by the name ``--hold`` takes."""

S = TypeVar("S")


def hold_kind(name: str) -> HoldKind:
    """The hold ``name`` names.

    Raises:
        ConfigError: no hold has that name (the message lists them).
    """
    kind = HOLD_KINDS.get(name)
    if kind is None:
        raise ConfigError(f"unknown hold {name!r}: choose one of {', '.join(HOLD_KINDS)}")
    return kind


def settings_of(config: RunSettings, settings_type: type[S]) -> S:
    """The hold's own settings in ``config``, checked to be a ``settings_type``.

    Raises:
        ConfigError: ``config`` carries another hold's settings.
    """
    settings = config.hold_settings
    if not isinstance(settings, settings_type):
        raise ConfigError(
            f"the {config.hold} hold takes {settings_type.__name__}, not {type(settings).__name__}"
        )
    return settings


def settings_from_flags(kind: HoldKind, values: Mapping[str, Any]) -> Any:
    """``kind``'s settings from its flags' parsed values (by :attr:`Flag.dest`)."""
    if kind.settings is None:
        return None
    return kind.settings(**{flag.key: values[flag.dest] for flag in kind.flags})
