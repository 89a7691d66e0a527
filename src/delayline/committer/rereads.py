"""Reading the input again after a take-over, only where the watch may have forgotten.

A committer that takes an in-flight partition over mid-run must check the versions
pending there against every record that could end them, some of which its watch may
have forgotten (:meth:`~delayline.committer.later.LaterRecords.expire`) or never read
(before it started). It reads those ranges again
(:meth:`~delayline.committer.watch.InputWatch.reread`) and no more: from where on the
watch remembers everything it read of a partition is known
(:meth:`Rereads.remembered_from`), and a re-read that ran to its end moves that point
back, so partitions taken over one after another are not read again each time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import closing

from confluent_kafka import KafkaError, Message, TopicPartition

from delayline.committer.later import Later, LaterRecords
from delayline.errors import KafkaUnavailableError
from delayline.kafka.reader import private_consumer

log = logging.getLogger(__name__)

REREAD_FETCH_WAIT_MS = 10
"""The hold of a re-read's fetches."""

Place = tuple[str, int]
"""An input partition: (topic, partition)."""
Noted = tuple[str, str, Later]
"""A record that ends something: (topic, schedule id, how)."""
Classify = Callable[[Message, int], Noted | None]
"""What a record read again (at the time given) ends, if anything."""


class Rereads:
    """The re-reads of one watch, and where from it remembers all it read.

    Args:
        bootstrap_servers: The input topics' cluster.
        later: What the watch remembers.
        batch: Records taken from the consumer in one call.
        now_ms: The host's time.
    """

    def __init__(
        self, bootstrap_servers: str, later: LaterRecords, batch: int, now_ms: Callable[[], int]
    ) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._now_ms = now_ms
        self._later = later
        self._batch = batch
        self._reread_from: dict[Place, int] = {}
        """Where a re-read that ran to its end began in each input partition."""

    def remembered_from(
        self, place: Place, positions: Mapping[Place, int], started: Mapping[Place, int]
    ) -> int:
        """From where on every record of ``place`` that ends something and that the watch
        has read is still remembered: where it began reading (``started``) or read again
        from, or past the last record it forgot there if later
        (:attr:`LaterRecords.forgotten`, moved back by a re-read); never past where it has
        read to (``positions``; -1: a partition it does not read)."""
        position = positions.get(place, -1)
        began = min(started.get(place, position), self._reread_from.get(place, position))
        return min(position, max(began, self._later.forgotten.get(place, 0)))

    def read(
        self,
        todo: dict[Place, tuple[int, int]],
        classify: Classify,
        give_up: Callable[[], bool],
        between: Callable[[], None],
        timeout_s: float,
    ) -> list[tuple[str, str]] | None:
        """Read the ranges ``todo`` (by place, from and to), note again what each record
        ends (``classify``), calling ``between()`` after each slice; the (topic, id) of
        each noted, or ``None`` if ``give_up()`` cut it short.

        Raises:
            KafkaUnavailableError: nothing more was read for ``timeout_s``.
        """
        if not todo:
            return []
        ranges = dict(todo)
        out: list[tuple[str, str]] = []
        consumer = private_consumer(
            self._bootstrap_servers,
            "delayline-watch-reread",
            # Short-lived: a range ending in a transaction's marker is read to its end by
            # the next fetch, held this long.
            overrides={"enable.partition.eof": True, "fetch.wait.max.ms": REREAD_FETCH_WAIT_MS},
        )
        # Nothing is forgotten until it ends: what it skips as still remembered stays so
        # (the watch is polled meanwhile), and then all of each range is.
        with self._later.kept(), closing(consumer):
            consumer.assign([TopicPartition(t, p, low) for (t, p), (low, _) in todo.items()])
            deadline = time.monotonic() + timeout_s
            while todo and not give_up():
                if time.monotonic() > deadline:
                    raise KafkaUnavailableError(
                        f"committer watch: {len(todo)} input partition(s) read again "
                        f"stalled for {timeout_s:g} s"
                    )
                found: list[Noted] = []
                msgs = consumer.consume(self._batch, 0.2)
                if _take(msgs, todo, classify, self._now_ms(), found):
                    deadline = time.monotonic() + timeout_s
                self._later.note_again(found)
                out.extend((topic, schedule_id) for topic, schedule_id, _ in found)
                between()
            if todo:
                return None
            self._remembered_again(ranges)
        return out

    def _remembered_again(self, ranges: Mapping[Place, tuple[int, int]]) -> None:
        """A re-read of ``ranges`` (by place, from and to) ran to its end, nothing
        forgotten meanwhile: all read there from its start on is remembered."""
        forgotten = self._later.forgotten
        for place, (low, _) in ranges.items():
            self._reread_from[place] = min(low, self._reread_from.get(place, low))
            if place in forgotten:
                forgotten[place] = min(low, forgotten[place])


def widened(
    todo: Mapping[Place, tuple[int, int]], more: Mapping[Place, tuple[int, int]]
) -> dict[Place, tuple[int, int]]:
    """The ranges (by place, from and to) of ``todo`` and ``more``: each place's from
    the lowest, to the highest (an empty range of ``more`` adds nothing)."""
    out = dict(todo)
    for place, (low, high) in more.items():
        if 0 <= low < high:
            have = out.get(place, (low, high))
            out[place] = (min(have[0], low), max(have[1], high))
    return out


def _take(
    msgs: list[Message],
    todo: dict[Place, tuple[int, int]],
    classify: Classify,
    now_ms: int,
    found: list[Noted],
) -> bool:
    """Take a slice a re-read read at ``now_ms``: into ``found`` what each record of a
    range still ``todo`` ends; a range read to its end leaves ``todo``. Whether anything of a range
    was read."""
    moved = False
    for msg in msgs:
        place = (msg.topic() or "", msg.partition() or 0)
        error = msg.error()
        if place not in todo:
            continue
        moved = True
        if error is not None and error.code() != KafkaError._PARTITION_EOF:
            log.warning("committer watch: %s", error)
            continue
        offset = msg.offset() or 0
        if error is None and offset < todo[place][1]:
            later = classify(msg, now_ms)
            if later is not None:
                found.append(later)
        if offset + (error is None) >= todo[place][1]:
            del todo[place]
    return moved
