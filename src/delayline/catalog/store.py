"""The catalog store interface: every implementation gives these guarantees."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

from delayline.catalog.events import Change
from delayline.catalog.model import DeadLetter, Page, Pending, PendingQuery, Stats, Version

Position = tuple[str, int]
"""A followed partition: ``(topic, partition)``."""


class CatalogStore(abc.ABC):
    """Pending schedules, their versions and dead letters, kept from Kafka topics.

    Guarantees every implementation gives:

    - :meth:`apply` is atomic: its changes and the new positions become visible
      together or not at all, so a follower that resumes from :meth:`positions`
      after a crash applies every record exactly once.
    - Readers see a consistent state: a page never mixes before and after one
      :meth:`apply`.
    - Changes apply in the order given; within a partition that is offset order.
    - Reads and :meth:`apply` may run concurrently from different threads.
    - Paging with cursors is stable: walking every page of a query while nothing
      changes yields each matching schedule exactly once, in order.
    """

    @abc.abstractmethod
    def apply(self, changes: Sequence[Change], positions: Mapping[Position, int]) -> None:
        """Apply ``changes`` and record, per partition, the next offset to read."""

    @abc.abstractmethod
    def positions(self) -> dict[Position, int]:
        """Next offset to read per followed partition (empty when new)."""

    @abc.abstractmethod
    def pending(self, query: PendingQuery) -> Page[Pending]:
        """One page of pending schedules, without payloads.

        Raises:
            ConfigError: the query is invalid (limit out of range, bad cursor).
        """

    @abc.abstractmethod
    def locate(self, schedule_id: str) -> list[Pending]:
        """The pending versions of ``schedule_id`` (one per schedules topic), without
        payloads: cheap, whatever the id's history."""

    @abc.abstractmethod
    def get(self, schedule_id: str) -> tuple[list[Pending], list[Version]]:
        """The pending versions of ``schedule_id`` (one per schedules topic, with
        payload and headers) and the versions seen for it, oldest first (the newest
        1,000 at most)."""

    @abc.abstractmethod
    def dead_letters(
        self, *, limit: int = 100, cursor: str | None = None, reason: str | None = None
    ) -> Page[DeadLetter]:
        """Dead letters, newest first; ``reason`` keeps those whose reason contains it.

        Raises:
            ConfigError: limit out of range or bad cursor.
        """

    @abc.abstractmethod
    def stats(self, now_ms: int, *, window_minutes: int = 30) -> Stats:
        """Dashboard figures; rates and lateness over the last ``window_minutes``."""

    @abc.abstractmethod
    def prune(self, before_ms: int) -> int:
        """Forget history older than ``before_ms``: versions of ids with nothing pending,
        and dead letters. Pending schedules and their versions are always kept.

        Returns:
            How many entries were removed.
        """

    def optimize(self) -> None:  # noqa: B027 - optional: most stores need nothing
        """Refresh whatever helps queries after a bulk load (the follower calls it
        once it has caught up). Safe to call at any time; the default does nothing."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release resources; the store is unusable afterwards."""
