"""Short notice: which schedule versions the hold never holds.

A schedule written with little notice (due less than ``notice_ms`` after its record's
timestamp, or already due) needs a micro-batch within seconds to be raised in time;
a trickle of them would keep the pipeline running a batch every few seconds. Under a
notice rule the hold folds such a version (it still ends an older held version of its
id) but never holds it: the committer owning its in-flight partition hands it over
itself, so such arrivals need no batch.

The rule must give the same answer to the hold (in every replay and rebuild) and to
every committer, including while it changes: a committer applying a rule the hold
does not would lose a schedule (neither takes it) or deliver it twice (both do). So a
rule is an :class:`Epoch` that governs the input from given offsets on: each version is
judged by the last epoch whose start in its partition is at or before its offset, from
the record alone (its place, timestamp and due time). The pipeline writes a new epoch
before it starts Spark, from each input partition's end, so every batch of an earlier
run (a replay included) read below it.

The rules travel between processes as JSON (:meth:`NoticeRules.encode`), in the format
:data:`~delayline.contract.formats.NOTICE_RULES`; the JVM hold is given what it needs
as :meth:`NoticeRules.for_jvm` (``jvm/.../hold/Notice.java``; the shared hold suite
holds the two folds equal).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from delayline.contract.formats import NOTICE_RULES
from delayline.errors import ConfigError, RecordFormatError

MAX_NOTICE_MS = 60_000
"""The longest notice any epoch may have (the longest lead): a version due later than
this after its record's timestamp is short under no rules, so a committer's watch reads
only those due sooner as schedules it may have to deliver itself, whatever rules it
learns of later."""


@dataclass(frozen=True, slots=True)
class Epoch:
    """One setting of the rule, and where in the input it starts to govern.

    Attributes:
        notice_ms: A version due less than this after its record's timestamp is short
            notice; 0: none is (the rule is off from here on).
        inflight_partitions: The in-flight topic's partition count the epoch was made
            with: a short version's in-flight partition, and so its committer, follows
            from it.
        starts: Per input topic and partition, the first offset the epoch governs; a
            partition not named starts at 0 (it was made after the epoch).
    """

    notice_ms: int
    inflight_partitions: int
    starts: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 <= self.notice_ms <= MAX_NOTICE_MS or self.inflight_partitions < 1:
            raise ConfigError(
                f"a notice epoch needs notice_ms in 0..{MAX_NOTICE_MS} and "
                f"inflight_partitions >= 1, not {self.notice_ms} and {self.inflight_partitions}"
            )

    def start(self, topic: str, partition: int) -> int:
        """The first offset of ``topic``/``partition`` this epoch governs."""
        return self.starts.get(topic, {}).get(partition, 0)


@dataclass(frozen=True, slots=True)
class NoticeRules:
    """Every notice epoch so far, oldest first.

    Attributes:
        epochs: The epochs; each one's start in a partition is at or after the one
            before's.
        pending: A new epoch is being made: until it is written, nobody acts on the
            rules (the pipeline writes ``pending`` before it reads the input's ends).
    """

    epochs: tuple[Epoch, ...] = ()
    pending: bool = False

    def __post_init__(self) -> None:
        for before, after in zip(self.epochs, self.epochs[1:], strict=False):
            for topic, partitions in before.starts.items():
                for partition, offset in partitions.items():
                    if after.start(topic, partition) < offset:
                        raise ConfigError(
                            f"notice epochs out of order: {topic}/{partition} starts at "
                            f"{offset}, then at {after.start(topic, partition)}"
                        )

    def epoch_at(self, topic: str, partition: int, offset: int) -> Epoch | None:
        """The epoch governing the record at ``topic``/``partition``/``offset``, if any."""
        for epoch in reversed(self.epochs):
            if epoch.start(topic, partition) <= offset:
                return epoch
        return None

    def short(
        self, topic: str, partition: int, offset: int, timestamp_ms: int, due_ms: int
    ) -> Epoch | None:
        """The epoch under which a schedule version is short notice, or ``None``.

        Args:
            topic: Where the version was written.
            partition: Its partition.
            offset: Its offset (a copy's rewrite is never short: the caller leaves
                copies out).
            timestamp_ms: Its record's timestamp.
            due_ms: Its due time.
        """
        epoch = self.epoch_at(topic, partition, offset)
        if epoch is None or epoch.notice_ms == 0:
            return None
        return epoch if due_ms - timestamp_ms < epoch.notice_ms else None

    def then(self, epoch: Epoch) -> NoticeRules:
        """These rules with ``epoch`` after the last one (written, not pending)."""
        return NoticeRules((*self.epochs, epoch))

    def for_jvm(self) -> str:
        """The epochs as the JVM hold's ``Notice`` reads them: per epoch, oldest first
        and separated by ``|``, its notice, ``;`` and its starts as
        ``topic:partition:offset`` separated by ``,`` (topic names hold none of these
        characters). The hold needs no partition count: it only tells short from held.

        Raises:
            ConfigError: the rules are pending: nobody may act on them yet.
        """
        if self.pending:
            raise ConfigError("notice rules still pending: the hold cannot run under them")
        return "|".join(
            f"{e.notice_ms};"
            + ",".join(
                f"{topic}:{p}:{o}"
                for topic, parts in sorted(e.starts.items())
                for p, o in sorted(parts.items())
            )
            for e in self.epochs
        )

    def encode(self) -> bytes:
        """The rules as JSON, in the current format."""
        return json.dumps(
            {
                "format": NOTICE_RULES.current,
                "pending": self.pending,
                "epochs": [
                    {
                        "notice_ms": e.notice_ms,
                        "inflight_partitions": e.inflight_partitions,
                        "starts": {
                            topic: {str(p): o for p, o in sorted(parts.items())}
                            for topic, parts in sorted(e.starts.items())
                        },
                    }
                    for e in self.epochs
                ],
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, data: bytes, where: str) -> NoticeRules:
        """Read rules :meth:`encode` wrote.

        Args:
            data: The JSON.
            where: What was read, for errors (a topic and offset).

        Raises:
            FormatVersionError: written in a newer format than this release reads.
            RecordFormatError: not notice rules.
        """
        try:
            value = json.loads(data)
            NOTICE_RULES.check(int(value["format"]), where)
            epochs = tuple(_epoch(e) for e in value["epochs"])
            return cls(epochs, bool(value["pending"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # ConfigError too
            raise RecordFormatError(f"{where}: not notice rules ({exc})") from exc


def _epoch(value: dict[str, Any]) -> Epoch:
    starts = {
        str(topic): {int(p): int(o) for p, o in parts.items()}
        for topic, parts in value["starts"].items()
    }
    return Epoch(int(value["notice_ms"]), int(value["inflight_partitions"]), starts)
