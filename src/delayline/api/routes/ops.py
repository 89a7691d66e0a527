"""Dead letters, dashboard figures, info, health and metrics."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

import delayline
from delayline.api.auth import require_read
from delayline.api.pipeline_status import pipeline_status
from delayline.api.routes.schedules import ERRORS
from delayline.api.schemas import DeadLetterPage, StatsOut, dead_letter_out, stats_out, utc
from delayline.api.state import api_state
from delayline.catalog import MAX_PAGE
from delayline.core.units import format_duration_ms

router = APIRouter()


@router.get(
    "/dead-letters",
    response_model=DeadLetterPage,
    responses=ERRORS,
    dependencies=[Depends(require_read)],
    tags=["dead letters"],
    summary="Rejected and expired records",
)
def list_dead_letters(
    request: Request,
    reason: Annotated[str | None, Query(max_length=1024, description="Reason contains.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> DeadLetterPage:
    """Dead letters, newest first, each with its reason and the record it came from."""
    page = api_state(request).store.dead_letters(limit=limit, cursor=cursor, reason=reason)
    return DeadLetterPage(
        items=[dead_letter_out(d) for d in page.items], next_cursor=page.next_cursor
    )


@router.get(
    "/stats",
    response_model=StatsOut,
    responses=ERRORS,
    dependencies=[Depends(require_read)],
    tags=["operations"],
    summary="Dashboard figures",
)
def stats(request: Request, minutes: Annotated[int, Query(ge=1, le=1440)] = 30) -> StatsOut:
    """Pending and dead-letter counts, deliveries per minute and lateness histogram
    over the last ``minutes``."""
    state = api_state(request)
    return stats_out(state.store.stats(state.clock.now_ms(), window_minutes=minutes))


@router.get(
    "/info",
    responses=ERRORS,
    dependencies=[Depends(require_read)],
    tags=["operations"],
    summary="Version, brokers, topics, catalog and pipeline status",
)
async def info(request: Request) -> dict[str, Any]:
    """What this API talks to and how each part is doing."""
    state = api_state(request)
    config = state.config
    follow = state.follower.status()
    brokers = await run_in_threadpool(state.brokers)
    pipeline = await run_in_threadpool(pipeline_status, config.pipeline_url, state.clock.now_ms())
    return {
        "version": delayline.__version__,
        "bootstrap_servers": config.topology.bootstrap_servers,
        "brokers": brokers,
        "topics": {
            "schedules": list(config.topology.schedules_topics),
            "envelopes": list(config.topology.envelope_topics),
            "timer_requests": list(config.topology.timer_request_topics),
            "history": config.topology.history_topic,
            "dead_letter": config.topology.dead_letter_topic,
        },
        "catalog": {
            "path": str(config.catalog_path),
            "caught_up": follow.caught_up,
            "lag": follow.lag,
            "missing_topics": follow.missing_topics,
            "records_applied": follow.records_applied,
            "records_skipped": follow.records_skipped,
            "last_error": follow.last_error,
            "kafka_unreachable_since": None
            if follow.unreachable_since_ms is None
            else utc(follow.unreachable_since_ms),
        },
        "pipeline": pipeline,
        "writes_enabled": config.token is not None,
        "reads_need_token": config.reads_need_token,
    }


@router.get("/healthz", tags=["operations"], summary="Liveness")
def healthz() -> dict[str, str]:
    """200 while the process serves requests."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    tags=["operations"],
    summary="Readiness",
    responses={503: {"description": "Not ready yet; the body says why."}},
)
def readyz(request: Request) -> JSONResponse:
    """200 once the catalog has read every followed partition to its end, while Kafka
    answers; 503 with the reasons otherwise."""
    state = api_state(request)
    follow = state.follower.status()
    reasons = []
    if follow.unreachable_since_ms is not None:
        since = utc(follow.unreachable_since_ms).strftime("%Y-%m-%dT%H:%M:%SZ")
        away = format_duration_ms(max(0, state.clock.now_ms() - follow.unreachable_since_ms))
        reasons.append(
            f"Kafka unreachable since {since} (for {away}): {follow.unreachable_reason}; "
            "the catalog may be out of date and writes fail"
        )
    if not follow.caught_up:
        reasons.append("catalog still reading the topics")
        if follow.missing_topics:
            reasons.append(f"topics not found: {', '.join(follow.missing_topics)}")
        if follow.last_error:
            reasons.append(f"last error: {follow.last_error}")
    if not reasons:
        return JSONResponse({"status": "ready"})
    status = "starting" if follow.unreachable_since_ms is None else "unavailable"
    return JSONResponse({"status": status, "reasons": reasons}, status_code=503)


@router.get(
    "/metrics",
    tags=["operations"],
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {}}}},
)
def metrics(request: Request) -> Response:
    """The API's metrics in the Prometheus text format."""
    registry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
