"""A REWRITE of a version whose payload the hold does not keep: read it from its topic.

A hold may keep versions without payload or headers (the bucket hold does: those wait
in its topics). When the hold rules ask to write such a version again, the record is
read from the schedules topic at the version's own offset, just before the batch's
transaction. Runs on the executors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import TopicPartition

from delayline.contract import events as r
from delayline.contract.codec import encode_headers
from delayline.kafka.reader import private_consumer, to_consumed_record

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 30.0


def fill_rewrites(rows: Sequence[dict[str, Any]], bootstrap_servers: str) -> list[dict[str, Any]]:
    """``rows`` with the payload and headers of each REWRITE of a version the gate holds
    without them, read from the schedules topic at the version's own offset.

    The version is rewritten because a record that compaction keeps instead of it has
    just been read after it; compaction cleans only closed segments, so the version is
    still there. If it is not (a topic compacted with no lag, and slow), the rewrite is
    left out and logged: the copy still delivers the schedule, only a rebuild from the
    topic would miss it until the copy fires.
    """
    wanted = [row for row in rows if row["kind"] == r.Kind.REWRITE and row["headers"] is None]
    if not wanted:
        return list(rows)
    found = _fetch(bootstrap_servers, [_place(row) for row in wanted])
    out = []
    for row in rows:
        if row["kind"] != r.Kind.REWRITE or row["headers"] is not None:
            out.append(row)
            continue
        record = found.get(_place(row))
        if record is None:
            topic, partition, offset = _place(row)
            log.error(
                "schedule %r: %s[%d]@%d is gone from its topic; not rewritten (its copy "
                "still delivers it)",
                row["id"],
                topic,
                partition,
                offset,
            )
            continue
        out.append({**row, "value": record[0], "headers": record[1]})
    return out


def _place(row: Mapping[str, Any]) -> tuple[str, int, int]:
    return str(row["src_topic"]), int(row["src_partition"]), int(row["src_offset"])


def _fetch(
    bootstrap_servers: str, places: list[tuple[str, int, int]]
) -> dict[tuple[str, int, int], tuple[bytes | None, bytes]]:
    """(value, encoded headers) of the records at ``places`` that are still there."""

    found: dict[tuple[str, int, int], tuple[bytes | None, bytes]] = {}
    consumer = private_consumer(bootstrap_servers, "delayline-rewrite")
    try:
        for place in sorted(set(places)):
            topic, partition, offset = place
            consumer.assign([TopicPartition(topic, partition, offset)])
            deadline = time.monotonic() + FETCH_TIMEOUT_S
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None:
                    continue
                if msg.offset() == offset:
                    record = to_consumed_record(msg)
                    found[place] = (record.value, encode_headers(record.headers))
                break  # a later offset: the record is gone
    finally:
        consumer.close()
    return found
