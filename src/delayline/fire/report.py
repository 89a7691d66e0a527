"""What one micro-batch did: counts, lateness, whether it wrote (for logs and metrics)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from delayline.contract.kinds import INVALID, Kind

WITHHELD = "withheld"
"""How the committer counts a handed-over schedule it did not deliver: a later cancel
or update of it was read before the commit (:mod:`delayline.committer.watch`)."""
HANDED = "handed"
"""How the fire stage counts a schedule raised before its due time and handed to the
committer (:mod:`delayline.fire.inflight`): not ``fire``; the committer reports its
delivery."""
REFUSED = "refused"
"""How the fire stage counts a due schedule whose delivery the cluster refused (it went
to the dead-letter topic instead): not ``fire``."""

INPUT_KINDS = (
    Kind.PLANNED, Kind.UPDATED, Kind.CANCELLED, Kind.UNKNOWN_CANCEL, Kind.STALE, Kind.MISSED,
    Kind.SHORT, Kind.DIRECT, INVALID,
)  # fmt: skip
"""The counts of which each input record (a schedule, a cancel, an invalid record) makes
one; several records of one id in one batch may make one between them."""


@dataclass(slots=True)
class BatchReport:
    """What one micro-batch did, for the progress line and for tests.

    Attributes:
        batch_id: Spark's batch id.
        counts: Events by kind (see :class:`delayline.contract.kinds.Kind`), dead letters
            split into ``invalid`` and ``expired``; ``fire`` counts deliveries made, and
            those the cluster refused count as :data:`REFUSED` instead.
        lateness_ms: Commit time minus due time of each delivery of a schedule that
            was not yet due when it arrived.
        committed: False when the batch was a replay and wrote nothing.
        finished_ms: When the batch finished (set by the sink from its clock).
        missed_lateness_ms: The same for schedules already past due when they arrived
            (``missed``, fired at once): how late they were written, not how late
            delayline was, so kept out of ``lateness_ms``.
        executors: What each executor did in this batch: its ``tasks``, the
            deliveries it wrote (``fire``) and the schedules it handed to the committer
            (``handed``), by ``<host>/<executor id>``.
    """

    batch_id: int
    counts: Counter[str] = field(default_factory=Counter)
    lateness_ms: list[int] = field(default_factory=list)
    committed: bool = True
    finished_ms: int = 0
    missed_lateness_ms: list[int] = field(default_factory=list)
    executors: dict[str, Counter[str]] = field(default_factory=dict)

    @property
    def raised(self) -> int:
        """Schedules the batch raised: delivered, handed to the committer or refused."""
        counts = self.counts
        return counts[Kind.RAISE] + counts[HANDED] + counts[REFUSED]

    @property
    def read(self) -> int:
        """Input records the batch took, from its counts (:data:`INPUT_KINDS`): never
        more, fewer when one id had several records in it. delayline's own tombstones
        are not counted (as the committer's watch does not count them as arrivals)."""
        counts = self.counts
        return sum(counts[kind] for kind in INPUT_KINDS)

    def summary(self) -> dict[str, Any]:
        """Counts with the lateness lists reduced to count, p50 and max (for ``/progress``)."""
        late = sorted(self.lateness_ms)
        missed = sorted(self.missed_lateness_ms)
        return {
            "batch_id": self.batch_id,
            "finished_ms": self.finished_ms,
            "committed": self.committed,
            "counts": dict(self.counts),
            "deliveries": len(late) + len(missed),
            "lateness_p50_ms": late[len(late) // 2] if late else None,
            "lateness_max_ms": late[-1] if late else None,
            "missed_deliveries": len(missed),
            "missed_lateness_max_ms": missed[-1] if missed else None,
        }

    def to_json(self) -> str:
        """One line for ``--progress-file``: ids and counts, never payloads."""
        return json.dumps(
            {
                "batch_id": self.batch_id,
                "finished_ms": self.finished_ms,
                "committed": self.committed,
                "counts": dict(self.counts),
                "lateness_ms": self.lateness_ms,
                "missed_lateness_ms": self.missed_lateness_ms,
                "executors": {name: dict(done) for name, done in self.executors.items()},
            }
        )


@dataclass(frozen=True, slots=True)
class Delivered:
    """What one committed group did.

    Attributes:
        delivered: Deliveries made.
        refused: Deliveries the cluster refused (dead-lettered instead).
        lateness_ms: Commit time minus due time of each delivery made.
        arrived_due: Schedules the committer read only once already due: handed over
            too late for the lead (a batch took longer than it, or it arrived so).
        write_ms: How long writing the group took, up to its commit.
        withheld: Schedules not delivered: a cancel or an update of theirs was read
            before the commit (:mod:`delayline.committer.watch`).
        expired: Deliveries later than the maximum lateness (dead-lettered instead).
    """

    delivered: int
    refused: int
    lateness_ms: list[int] = field(default_factory=list)
    arrived_due: int = 0
    write_ms: int = 0
    withheld: int = 0
    expired: int = 0
