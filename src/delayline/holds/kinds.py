"""What a hold's entry in :data:`delayline.holds.registry.HOLD_KINDS` says (see there)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

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


Target = tuple[str, str, float, str]
"""A bench bound: (what it is, the figure's key, the bound, ``>=`` or ``<=``)."""


@dataclass(frozen=True, slots=True)
class BenchPlace:
    """Where ``delayline bench --hold NAME`` runs, for the hold's side of it.

    Attributes:
        work_dir: The run's directory (a private server of the hold's goes under it).
        run: The run's id: its topics and keys are named after it.
        log_dirs: The private broker's log directories (``None``: an external broker).
        options: The values of the hold's bench flags (:attr:`BenchSide.flags`) by key.
        progress: Prints one line of progress.
    """

    work_dir: Path
    run: str
    log_dirs: Path | None
    options: Mapping[str, Any]
    progress: Callable[[str], None]


class HoldBench(Protocol):
    """A hold's side of one bench run, open from :attr:`BenchSide.open` until
    :meth:`close`."""

    run_flags: list[str]
    """The hold's flags of ``delayline run`` for this run (its own prefix, its server)."""

    def baseline(self, writes: int) -> dict[str, Any] | None:
        """What the hold's own store does alone on this machine (``writes`` of a
        schedule's size), before the pipeline starts; ``None``: nothing to measure."""
        ...

    def figures(self, pending: int) -> dict[str, Any] | None:
        """The hold's own figures after the scenario (``pending``: schedules held)."""
        ...

    def close(self) -> None:
        """Stop what :attr:`BenchSide.open` started."""
        ...


@dataclass(frozen=True, slots=True)
class BenchSide:
    """What ``delayline bench --hold NAME`` adds for a hold. Its figures and baseline
    are kept in the result under the hold's name.

    Attributes:
        open: Starts the hold's side of a run (imported on call: it may need Redis).
        flags: The hold's own flags of ``delayline bench``.
        targets: Per scenario, the bounds that replace the scenario's.
        lateness_p99_ms: The bound on lateness p99 of the steady scenario.
        rows: The report's lines of the hold's figures and baseline (``label``,
            value; a :func:`delayline.core.stats.summary` shows as p50/p99/max), from
            the result (``figures``, ``baseline``: ``None`` when absent).
        compared: The hold's figures in the table of the holds side by side: (label,
            dotted key in the scenario's figures).
    """

    open: Callable[[BenchPlace], HoldBench]
    flags: tuple[Flag, ...] = ()
    targets: Mapping[str, tuple[Target, ...]] = field(default_factory=dict)
    lateness_p99_ms: int | None = None
    rows: Callable[[Mapping[str, Any] | None, Mapping[str, Any] | None], list[tuple[str, Any]]] = (
        lambda figures, baseline: []
    )
    compared: tuple[tuple[str, str], ...] = ()


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
        bench: What ``delayline bench`` adds for it (``None``: nothing of its own).
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
    bench: BenchSide | None = None

    def default_settings(self) -> Any:
        """Its settings with every default (``None`` when it has none)."""
        return None if self.settings is None else self.settings()
