"""Spark's checkpoint offsets log, read by the committer: how far each batch read its
input, so the watch reads from there after a restart and forgets a record only once the
pipeline has read it (:mod:`delayline.committer.watch`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path


def checkpoint_positions(checkpoint_dir: Path, batch_id: int) -> dict[tuple[str, int], int]:
    """Where Spark's batch ``batch_id`` (or the earliest batch logged after it) ended
    reading each Kafka partition, from the checkpoint's offsets log: a record at or after
    it was read by no batch up to that one. Empty when the log holds no such batch.

    The log (``offsets/<batch>``) is Spark's: a version line, a metadata line, then one
    JSON line per source (the Kafka source's maps topic to partition to end offset)."""
    logged = sorted(int(p.name) for p in (checkpoint_dir / "offsets").glob("*") if p.name.isdigit())
    chosen = next((b for b in logged if b >= batch_id), None)
    if chosen is None:
        return {}
    try:
        lines = (checkpoint_dir / "offsets" / str(chosen)).read_text().splitlines()[2:]
    except OSError:
        return {}
    out: dict[tuple[str, int], int] = {}
    for line in lines:
        out.update(kafka_offsets(line))
    return out


def kafka_offsets(source: object) -> dict[tuple[str, int], int]:
    """A Spark Kafka source's offsets (``{"topic": {"partition": offset}}``, as JSON text
    or parsed) by (topic, partition); empty for anything else (another source)."""
    if isinstance(source, str):
        try:
            source = json.loads(source)
        except ValueError:
            return {}
    out: dict[tuple[str, int], int] = {}
    if not isinstance(source, Mapping):
        return out
    for topic, parts in source.items():
        if isinstance(parts, Mapping):
            for part, offset in parts.items():
                if isinstance(offset, int) and str(part).isdigit():
                    out[(str(topic), int(part))] = offset
    return out


def batch_planned_ms(checkpoint_dir: Path, batch_id: int) -> int | None:
    """When Spark planned batch ``batch_id``: its ``batchTimestampMs``, which Spark takes
    right after asking its sources where the batch's input ends, from the checkpoint's
    offsets log. ``None`` when the batch is not logged or its metadata cannot be read."""
    try:
        lines = (checkpoint_dir / "offsets" / str(batch_id)).read_text().splitlines()
        planned = json.loads(lines[1])["batchTimestampMs"]
    except (OSError, IndexError, ValueError, KeyError, TypeError):
        return None
    return planned if isinstance(planned, int) else None


def latest_logged_batch(checkpoint_dir: Path) -> int | None:
    """The newest batch in the checkpoint's offsets log (planned; committed or not)."""
    logged = [int(p.name) for p in (checkpoint_dir / "offsets").glob("*") if p.name.isdigit()]
    return max(logged, default=None)
