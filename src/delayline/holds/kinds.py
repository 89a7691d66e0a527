"""What a hold's entry in :data:`delayline.holds.registry.HOLD_KINDS` says (see there)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from delayline.contract import OutgoingRecord
    from delayline.holds.hold import Hold
    from delayline.kafka.acls import Acl


@dataclass(frozen=True, slots=True)
class Flag:
    """A command-line flag of a hold's settings.

    Attributes:
        name: The flag (``--redis-url``); shown prefixed by ``--hold NAME:`` in help.
        env: The environment variable that gives its default.
        default: Its default, as typed on the command line (``parse`` reads it).
        help: What it sets.
        key: The keyword of the hold's settings it fills.
        parse: Text to value; a :class:`ValueError` (``ConfigError`` is one) is reported
            like a bad flag.
        metavar: The placeholder shown in help.
    """

    name: str
    env: str
    default: str | int
    help: str
    key: str
    parse: Callable[[str], Any] = str
    metavar: str | None = None

    @property
    def dest(self) -> str:
        """The attribute of the parsed arguments (``--redis-url``: ``redis_url``)."""
        return self.name.lstrip("-").replace("-", "_")


@dataclass(frozen=True, slots=True)
class HoldKind:
    """One hold, as the rest of delayline knows it.

    Attributes:
        name: What ``--hold`` calls it.
        summary: One line for ``--hold``'s help.
        load: The :class:`~delayline.holds.hold.Hold` class (imported on call).
        flags: Its settings' flags (``run`` adds every hold's; ``topics create`` and
            ``acls`` those of the holds with ``topics`` or ``acls``).
        settings: Its settings' class, called with the flags' values by ``key``;
            ``None``: it has none.
        needs_waker: Its query keeps no Spark state, so Spark runs no batch without
            input: ``--no-wake`` is refused.
        topics: Makes (or checks) the topics it keeps schedules in:
            ``(bootstrap servers, settings, replication factor, timeout s)`` to one line
            per topic (``name: created`` or ``name: exists``, with what it is for).
        acls: The ACLs on its own topics, from its settings.
        render: What the fire stage writes for the hold's own event kinds (ROUTE):
            ``(event row, settings, lead ms)`` to records.
    """

    name: str
    summary: str
    load: Callable[[], type[Hold]]
    flags: tuple[Flag, ...] = ()
    settings: type[Any] | None = None
    needs_waker: bool = False
    topics: Callable[[str, Any, int, float], list[str]] | None = None
    acls: Callable[[Any], list[Acl]] | None = None
    render: Callable[[Mapping[str, Any], Any, int], list[OutgoingRecord]] | None = None

    def default_settings(self) -> Any:
        """Its settings with every default (``None`` when it has none)."""
        return None if self.settings is None else self.settings()
