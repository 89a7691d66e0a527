"""Build records of the followed topics as the pipeline and producers write them."""

from __future__ import annotations

from delayline.catalog.events import Change, Role, changes_for
from delayline.contract import ConsumedRecord
from delayline.contract import headers as h
from delayline.core.model import Headers

SCHEDULES = "sched"
HISTORY = "hist"
DEAD = "dead"


def schedule(
    sid: str,
    offset: int,
    due_ms: int,
    *,
    target: str = "orders",
    ts: int = 1_000,
    partition: int = 0,
    payload: bytes = b"{}",
    extra: Headers = (),
) -> ConsumedRecord:
    headers = ((h.EPOCH, h.format_epoch(due_ms).encode()), (h.TARGET_TOPIC, target.encode()))
    return ConsumedRecord(
        SCHEDULES, partition, offset, ts, sid.encode(), payload, (*headers, *extra)
    )


def cancel(
    sid: str,
    offset: int,
    *,
    fired_offset: int | None = None,
    ts: int = 2_000,
    partition: int = 0,
) -> ConsumedRecord:
    headers = () if fired_offset is None else ((h.FIRED_OFFSET, str(fired_offset).encode()),)
    return ConsumedRecord(SCHEDULES, partition, offset, ts, sid.encode(), None, headers)


def fired(
    sid: str, source_offset: int, due_ms: int, *, at_ms: int, offset: int = 0
) -> ConsumedRecord:
    headers = (
        (h.EPOCH, h.format_epoch(due_ms).encode()),
        (h.TARGET_TOPIC, b"orders"),
        (h.KEY, sid.encode()),
        (h.SOURCE, f"{SCHEDULES}/0/{source_offset}".encode()),
    )
    return ConsumedRecord(HISTORY, 0, offset, at_ms, sid.encode(), b"{}", headers)


def dead(
    sid: str, source_offset: int, reason: str, *, offset: int = 0, at_ms: int = 3_000
) -> ConsumedRecord:
    headers = (
        (h.ERROR, reason.encode()),
        (h.SOURCE, f"{SCHEDULES}/0/{source_offset}".encode()),
    )
    return ConsumedRecord(DEAD, 0, offset, at_ms, sid.encode(), b"junk", headers)


ROLES = {SCHEDULES: Role.SCHEDULES, HISTORY: Role.HISTORY, DEAD: Role.DEAD_LETTER}


def changes(*records: ConsumedRecord, history_followed: bool = True) -> list[Change]:
    out: list[Change] = []
    for record in records:
        out.extend(changes_for(record, ROLES[record.topic], history_followed=history_followed))
    return out
