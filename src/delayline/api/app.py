"""The FastAPI application: routes, error answers, lifespan of catalog and writers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

import delayline
from delayline.api.auth import WritesDisabledError
from delayline.api.config import ApiConfig
from delayline.api.limits import BodyLimit, SecurityHeaders
from delayline.api.metrics import ApiMetrics
from delayline.api.retry_watch import RetryWatch
from delayline.api.routes import groups, ops, retries, schedules
from delayline.api.state import ApiState
from delayline.api.writes import Writers
from delayline.catalog import CatalogFollower, FollowConfig, SqliteCatalog
from delayline.core.clock import Clock, SystemClock
from delayline.errors import (
    AuthError,
    CatalogError,
    ConfigError,
    DelaylineError,
    InvalidScheduleError,
    NoSuchTopicError,
    TargetNotAllowedError,
    TopicMissingError,
)

log = logging.getLogger(__name__)

DESCRIPTION = """\
Pending schedules come from a catalog kept current from the schedules, history and
dead-letter topics. Writes go through the schedules topic, with the same contract as
every producer: the pipeline stays the only thing that fires. Writes need a bearer
token; reads too when the API runs with `--reads-need-token`.
"""


def create_app(config: ApiConfig, clock: Clock | None = None) -> FastAPI:
    """The API for ``config``. The catalog opens, and its follower starts, with the app."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        store = SqliteCatalog(config.catalog_path)
        follower = CatalogFollower(
            store,
            FollowConfig(config.topology, retention_ms=config.catalog_retention_ms),
            clock,
        )
        writers = Writers(config.topology.bootstrap_servers, config.request_timeout_ms, clock)
        retries = RetryWatch(config.topology.bootstrap_servers, config.retry_groups)
        app.state.api = ApiState(
            config, store, follower, writers, clock or SystemClock(), retries=retries
        )
        app.state.metrics = ApiMetrics(store, follower, clock, retries=retries)
        follower.start()
        retries.start()
        log.info("api serving catalog %s", config.catalog_path)
        try:
            yield
        finally:
            retries.stop()
            follower.stop()
            await writers.close()
            store.close()

    app = FastAPI(
        title="delayline",
        version=delayline.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.config = config
    app.include_router(groups.router)
    app.include_router(schedules.router)
    app.include_router(ops.router)
    app.include_router(retries.router)
    app.mount("/ui", StaticFiles(directory=_ui_dir(), html=True), name="ui")

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/")

    # Innermost: the route reads the body through it directly. Outside the metrics
    # middleware (Starlette's BaseHTTPMiddleware reads the body in a task group) a body
    # cut off past the limit reached FastAPI as an ExceptionGroup, answered 400.
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)

    @app.middleware("http")
    async def count(request: Request, call_next):  # type: ignore[no-untyped-def]
        metrics: ApiMetrics | None = getattr(request.app.state, "metrics", None)
        if metrics is None:
            return await call_next(request)
        return await metrics.middleware(request, call_next)

    # Added last, so outermost: every answer carries the headers, a refusal too.
    app.add_middleware(SecurityHeaders)
    app.add_exception_handler(DelaylineError, _delayline_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(UnicodeError, _unicode_error)
    return app


def _ui_dir() -> str:
    return str(resources.files("delayline.admin") / "static")


_STATUS: list[tuple[type[DelaylineError], int]] = [
    (WritesDisabledError, 403),
    (TargetNotAllowedError, 403),
    (AuthError, 401),
    (InvalidScheduleError, 422),
    (ConfigError, 400),
    (NoSuchTopicError, 404),
    (CatalogError, 503),
    # The pipeline (or `delayline topics create`) makes it: try again in a moment.
    (TopicMissingError, 503),
]


async def _delayline_error(_request: Request, exc: Exception) -> JSONResponse:
    code = next((c for kind, c in _STATUS if isinstance(exc, kind)), None)
    headers: dict[str, str] = {}
    if code is None:
        # Kafka unavailable, delivery failed: the caller may retry.
        retriable = isinstance(exc, DelaylineError) and exc.retriable
        code = 503 if retriable else 500
    if code == 503:
        headers["Retry-After"] = "5" if isinstance(exc, TopicMissingError) else "1"
    if code == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if code >= 500:
        log.warning("request failed: %s", exc)
    return JSONResponse({"detail": str(exc)}, status_code=code, headers=headers)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "request"
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return JSONResponse({"detail": "; ".join(problems) or "invalid request"}, status_code=422)


async def _unicode_error(_request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(
        {"detail": f"text is not valid Unicode (unpaired surrogate?): {exc}"}, status_code=400
    )
