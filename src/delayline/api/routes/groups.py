"""Pause and resume one schedule; list, cancel, pause and resume a group's schedules."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Request, status
from starlette.concurrency import run_in_threadpool

from delayline.api.auth import require_write
from delayline.api.routes.schedules import ERRORS, check_id
from delayline.api.schemas import GroupWritten, Written
from delayline.api.state import ApiState, api_state
from delayline.api.writes import resume_point
from delayline.catalog import MAX_PAGE, Pending, PendingQuery
from delayline.contract.contracts import HEADER
from delayline.contract.recurring import MAX_GROUP_LENGTH
from delayline.errors import InvalidScheduleError

router = APIRouter(tags=["groups"])

MAX_GROUP_SCHEDULES = 100_000
"""The most schedules one request on a group acts on; the answer says how many it did,
and a second request goes on with the rest."""

Group = Annotated[
    str, Path(min_length=1, max_length=MAX_GROUP_LENGTH, description="The group's name.")
]


@router.post(
    "/schedules/{schedule_id:path}/pause",
    response_model=Written,
    status_code=status.HTTP_202_ACCEPTED,
    responses=ERRORS,
    dependencies=[Depends(require_write)],
    summary="Pause a schedule",
)
async def pause_schedule(request: Request, schedule_id: str) -> Written:
    """Write the pending version again, paused: it waits without a due time (recurring
    or not) until resumed. Pausing a paused schedule writes nothing more (409).

    Decided from the catalog once it has read every schedule written before the request
    (up to 5 s; 503 past that): a schedule created or changed a moment ago is paused
    as it now is, and 404 means it is not pending."""
    state = api_state(request)
    version = await _pending(state, schedule_id)
    if version.paused_due_ms is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"schedule {schedule_id!r} is paused already")
    return await state.writers.pause(version)


@router.post(
    "/schedules/{schedule_id:path}/resume",
    response_model=Written,
    response_model_exclude_none=True,
    status_code=status.HTTP_202_ACCEPTED,
    responses=ERRORS,
    dependencies=[Depends(require_write)],
    summary="Resume a paused schedule",
)
async def resume_schedule(request: Request, schedule_id: str) -> Written:
    """Write the paused version again, due when it was: a one-off that fell due while
    paused follows its catch-up policy (``latest``: delivered at once; ``none``:
    cancelled), a recurring one its own for each missed occurrence. Decided once the
    catalog has read every schedule written before the request, as a pause is."""
    state = api_state(request)
    version = await _pending(state, schedule_id)
    if version.paused_due_ms is None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"schedule {schedule_id!r} is not paused")
    return await _resume(state, version)


@router.delete(
    "/groups/{group}",
    response_model=GroupWritten,
    status_code=status.HTTP_202_ACCEPTED,
    responses=ERRORS,
    dependencies=[Depends(require_write)],
    summary="Cancel every pending schedule of a group",
)
async def cancel_group(request: Request, group: Group) -> GroupWritten:
    """One cancel per pending schedule of the group (paused ones included), those
    written just before the request too (see :func:`_members`)."""
    state = api_state(request)
    members = await _members(state, group)
    records = [await state.writers.cancel(p.topic, p.id, p.partition) for p in members]
    return GroupWritten(group=group, schedules=len(members), records=records)


@router.post(
    "/groups/{group}/pause",
    response_model=GroupWritten,
    status_code=status.HTTP_202_ACCEPTED,
    responses=ERRORS,
    dependencies=[Depends(require_write)],
    summary="Pause every pending schedule of a group",
)
async def pause_group(request: Request, group: Group) -> GroupWritten:
    """Each pending schedule of the group not paused yet is paused."""
    state = api_state(request)
    return await _each(state, group, paused=False, act=state.writers.pause)


@router.post(
    "/groups/{group}/resume",
    response_model=GroupWritten,
    status_code=status.HTTP_202_ACCEPTED,
    responses=ERRORS,
    dependencies=[Depends(require_write)],
    summary="Resume every paused schedule of a group",
)
async def resume_group(request: Request, group: Group) -> GroupWritten:
    """Each paused schedule of the group is resumed (see resuming one schedule)."""
    state = api_state(request)
    return await _each(state, group, paused=True, act=lambda p: _resume(state, p))


async def _each(
    state: ApiState,
    group: str,
    *,
    paused: bool,
    act: Callable[[Pending], Awaitable[Written]],
) -> GroupWritten:
    """``act`` on each pending schedule of ``group`` that is (or is not) ``paused``,
    with its body."""
    members = [p for p in await _members(state, group) if (p.paused_due_ms is not None) == paused]
    records = [await act(await _body(state, p)) for p in members]
    return GroupWritten(group=group, schedules=len(members), records=records)


async def _resume(state: ApiState, version: Pending) -> Written:
    _, history = await run_in_threadpool(state.store.get, version.id)
    fired = [v.due_ms for v in history if v.kind == "fired" and v.due_ms is not None]
    at = resume_point(version, fired, state.clock.now_ms())
    if at is None:  # a one-off whose catch-up policy skips what fell due meanwhile
        written = await state.writers.cancel(version.topic, version.id, version.partition)
        return written.model_copy(
            update={"warning": "it fell due while paused; its catch-up policy (none) cancels it"}
        )
    return await state.writers.resume(version, at)


async def _pending(state: ApiState, schedule_id: str) -> Pending:
    """The pending header-contract version of ``schedule_id``, with its body, as of the
    request: the catalog has read every schedule written before it (404 if none, 422
    for another contract, 503 when the catalog cannot get there in time)."""
    check_id(schedule_id)
    await run_in_threadpool(state.read_own_writes)
    current, _ = await run_in_threadpool(state.store.get, schedule_id)
    if not current:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"no pending schedule with id {schedule_id!r}"
        )
    version = max(current, key=lambda p: p.updated_ms)
    _check_header(state, version)
    return version


async def _body(state: ApiState, member: Pending) -> Pending:
    """``member`` (from a list, without body) with its payload and headers."""
    current, _ = await run_in_threadpool(state.store.get, member.id)
    for version in current:
        if version.topic == member.topic:
            return version
    return member


async def _members(state: ApiState, group: str) -> list[Pending]:
    """The pending header-contract schedules of ``group``, in due order (at most
    :data:`MAX_GROUP_SCHEDULES`), as of the request: the catalog has read every schedule
    written before it (503 when it cannot get there in time)."""
    await run_in_threadpool(state.read_own_writes)
    found: list[Pending] = []
    cursor = None
    while len(found) < MAX_GROUP_SCHEDULES:
        query = PendingQuery(group=group, limit=MAX_PAGE, cursor=cursor)
        page = await run_in_threadpool(state.store.pending, query)
        found.extend(p for p in page.items if state.config.topology.contract_of(p.topic) == HEADER)
        cursor = page.next_cursor
        if cursor is None:
            break
    return found[:MAX_GROUP_SCHEDULES]


def _check_header(state: ApiState, version: Pending) -> None:
    contract = state.config.topology.contract_of(version.topic)
    if contract != HEADER:
        raise InvalidScheduleError(
            f"schedule {version.id!r} came in by the {contract} contract; only header-contract "
            "schedules are paused and resumed"
        )
