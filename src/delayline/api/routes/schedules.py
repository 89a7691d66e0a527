"""``/schedules``: list, inspect, create, replace and cancel schedules."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from starlette.concurrency import run_in_threadpool

from delayline.api.auth import require_read, require_write
from delayline.api.schemas import (
    MAX_ID_LENGTH,
    Problem,
    ScheduleCreate,
    ScheduleDetail,
    ScheduleIn,
    SchedulePage,
    Written,
    WrittenMany,
    full,
    summary,
    version_out,
)
from delayline.api.state import api_state
from delayline.catalog import MAX_PAGE, PendingQuery
from delayline.contract.contracts import Contract
from delayline.contract.recurring import MAX_GROUP_LENGTH
from delayline.contract.topics import target_not_allowed
from delayline.contract.topology import Topology, cancel_place
from delayline.core.clock import datetime_to_ms
from delayline.errors import InvalidScheduleError, TargetNotAllowedError

log = logging.getLogger(__name__)

router = APIRouter(tags=["schedules"])

ERRORS: dict[int | str, dict[str, object]] = {
    400: {"model": Problem, "description": "A parameter is invalid."},
    401: {"model": Problem, "description": "Token missing or wrong."},
    403: {
        "model": Problem,
        "description": "Writes are disabled (no --token), or the target topic is not allowed "
        "(--allowed-target-topics).",
    },
    404: {"model": Problem, "description": "No such schedule (or dead-letter topic)."},
    413: {"model": Problem, "description": "The body is over --max-body-bytes."},
    422: {"model": Problem, "description": "The request breaks the schedule contract."},
    503: {
        "model": Problem,
        "description": "Kafka, a topic or the catalog is unavailable; retry after Retry-After.",
    },
}
WRITE_ERRORS = {
    **{code: answer for code, answer in ERRORS.items() if code != 404},
    404: {"model": Problem, "description": "No such route: the path is malformed."},
}
"""Creating, replacing and cancelling never answer 404 for an id: what the catalog knows
(or has not read yet) only says where the record goes. A path no route matches (an id
with a line break) is still 404."""

NOT_SEEN = (
    "the catalog had no pending version of this id (not read yet, or already delivered "
    "or cancelled); the cancel was written anyway"
)
"""The ``note`` of a cancel written where the id's own record would go."""


def _ms(value: datetime | None) -> int | None:
    if value is None:
        return None
    return datetime_to_ms(value if value.tzinfo is not None else value.replace(tzinfo=UTC))


@router.get(
    "/schedules",
    response_model=SchedulePage,
    responses=ERRORS,
    dependencies=[Depends(require_read)],
    summary="List pending schedules",
)
def list_schedules(
    request: Request,
    id: Annotated[str | None, Query(max_length=MAX_ID_LENGTH, description="Id filter.")] = None,
    id_match: Annotated[
        Literal["prefix", "contains"], Query(description="How `id` matches.")
    ] = "prefix",
    due_from: Annotated[
        datetime | None, Query(description="Due at or after (ISO 8601; no zone means UTC).")
    ] = None,
    due_to: Annotated[datetime | None, Query(description="Due before (ISO 8601).")] = None,
    target_topic: Annotated[str | None, Query(max_length=249)] = None,
    group: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_GROUP_LENGTH, description="Only this group's."),
    ] = None,
    contract: Annotated[
        Contract | None, Query(description="Only those that came in by this contract.")
    ] = None,
    sort: Literal["due", "id", "created"] = "due",
    order: Literal["asc", "desc"] = "asc",
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> SchedulePage:
    """Pending schedules from the catalog, filtered, sorted, one page at a time."""
    topology = api_state(request).config.topology
    query = PendingQuery(
        id_prefix=id if id_match == "prefix" else None,
        id_contains=id if id_match == "contains" else None,
        due_from_ms=_ms(due_from),
        due_to_ms=_ms(due_to),
        target_topic=target_topic,
        topics=None if contract is None else _topics_of(topology, contract),
        group=group,
        sort=sort,
        descending=order == "desc",
        limit=limit,
        cursor=cursor,
    )
    page = api_state(request).store.pending(query)
    items = [summary(p, topology.contract_of(p.topic)) for p in page.items]
    return SchedulePage(items=items, next_cursor=page.next_cursor)


@router.get(
    "/schedules/{schedule_id:path}",
    response_model=ScheduleDetail,
    responses=ERRORS,
    dependencies=[Depends(require_read)],
    summary="One schedule and its versions",
)
def get_schedule(request: Request, schedule_id: str) -> ScheduleDetail:
    """The pending version (with payload) and every version seen: created, updated,
    cancelled, fired, dead-lettered."""
    current, versions = api_state(request).store.get(schedule_id)
    if not current and not versions:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no schedule with id {schedule_id!r}")
    newest = max(current, key=lambda p: p.updated_ms, default=None)
    contract_of = api_state(request).config.topology.contract_of
    return ScheduleDetail(
        id=schedule_id,
        pending=bool(current),
        current=None if newest is None else full(newest, contract_of(newest.topic)),
        versions=[version_out(v) for v in versions],
    )


@router.post(
    "/schedules",
    response_model=Written,
    response_model_exclude_none=True,
    status_code=status.HTTP_202_ACCEPTED,
    responses=WRITE_ERRORS,
    dependencies=[Depends(require_write)],
    summary="Create a schedule",
)
async def create_schedule(request: Request, body: ScheduleCreate) -> Written:
    """Write a schedule to the schedules topic. An existing id is replaced, as with
    any producer. Answers once Kafka acknowledged the record; a due time already past
    is accepted (it fires at once) with a ``warning``."""
    state = api_state(request)
    _check_target(state.config.topology, body.target_topic)
    schedule_id = body.id or str(uuid.uuid4())
    topic, partition = await run_in_threadpool(state.place_of, schedule_id)
    return await state.writers.schedule(topic, schedule_id, body, partition)


@router.put(
    "/schedules/{schedule_id:path}",
    response_model=Written,
    response_model_exclude_none=True,
    status_code=status.HTTP_202_ACCEPTED,
    responses=WRITE_ERRORS,
    dependencies=[Depends(require_write)],
    summary="Replace a schedule",
)
async def replace_schedule(request: Request, schedule_id: str, body: ScheduleIn) -> Written:
    """Write a new version of ``schedule_id`` (created if it is not pending): in the topic
    and partition of the pending version the catalog knows, else where the id's own
    record goes. Never 404, whatever the catalog has read."""
    check_id(schedule_id)
    state = api_state(request)
    _check_target(state.config.topology, body.target_topic)
    topic, partition = await run_in_threadpool(state.place_of, schedule_id)
    return await state.writers.schedule(topic, schedule_id, body, partition)


def _check_target(topology: Topology, target_topic: str) -> None:
    """Refuse (403) a target that ``--allowed-target-topics`` does not allow."""
    problem = target_not_allowed(target_topic, topology.allowed_target_topics)
    if problem is not None:
        raise TargetNotAllowedError(f"the target topic is {problem}")


@router.delete(
    "/schedules/{schedule_id:path}",
    response_model=WrittenMany,
    response_model_exclude_none=True,
    status_code=status.HTTP_202_ACCEPTED,
    responses=WRITE_ERRORS,
    dependencies=[Depends(require_write)],
    summary="Cancel a schedule",
)
async def cancel_schedule(
    request: Request,
    schedule_id: str,
    force: Annotated[
        bool,
        Query(
            deprecated=True,
            description="No longer needed: a cancel is always written. Accepted so that "
            "older callers keep working; it changes nothing.",
        ),
    ] = False,
) -> WrittenMany:
    """Write a cancel (tombstone) to each topic and partition where the catalog knows
    the id pending. When it knows none (the schedule was written a moment ago and not
    read yet, or it was delivered or cancelled already) the cancel is written anyway,
    where the id's own record goes (the partition a derived id names, else the first
    schedules topic and the id's partition, as any producer places it), and ``note``
    says so. Answers once Kafka acknowledged every record: a cancel never waits for,
    nor depends on, the catalog."""
    check_id(schedule_id)
    state = api_state(request)
    current = await run_in_threadpool(state.store.locate, schedule_id)
    # One tombstone in each partition holding a pending version: compaction then removes
    # them all, whichever partitioner wrote them.
    places: list[tuple[str, int | None]] = sorted({(p.topic, p.partition) for p in current})
    note = None
    if not places:
        places, note = [cancel_place(state.config.topology, schedule_id)], NOT_SEEN
    records = [await state.writers.cancel(t, schedule_id, p) for t, p in places]
    if note is not None:
        where = records[0]
        log.info("cancel of %r: not pending in the catalog; written to %s/%d",
                 schedule_id, where.topic, where.partition)  # fmt: skip
    return WrittenMany(id=schedule_id, records=records, note=note)


def _topics_of(topology: Topology, contract: str) -> tuple[str, ...]:
    return tuple(t for t in topology.input_topics if topology.contract_of(t) == contract)


def check_id(schedule_id: str) -> None:
    if not schedule_id or len(schedule_id) > MAX_ID_LENGTH:
        raise InvalidScheduleError(f"schedule id must be 1 to {MAX_ID_LENGTH} characters")
