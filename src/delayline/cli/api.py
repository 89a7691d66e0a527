"""``delayline api``: the REST API and the admin page."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from delayline.api.config import DEFAULT_MAX_BODY_BYTES
from delayline.cli._common import (
    add_topology,
    duration_arg,
    env_bool,
    env_flag,
    say,
    topology_from,
)
from delayline.cli._serving import add_listen_host, add_log_format
from delayline.cli.extras import require_extras
from delayline.core.logs import JSON
from delayline.core.units import parse_duration_ms

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``api``."""
    p = sub.add_parser(
        "api",
        help="serve the REST API and the admin page (/ui)",
        description="List, inspect, create, update and cancel schedules over HTTP. Reads "
        "come from a SQLite catalog kept current from the topics; writes go through the "
        "schedules topic. OpenAPI at /openapi.json, the admin page at /ui.",
    )
    add_topology(p, "schedules topic to follow (writes of new ids go to the first)")
    env_flag(
        p,
        "--catalog",
        env="DELAYLINE_CATALOG",
        default=".delayline/catalog.db",
        type=Path,
        help="SQLite catalog file (rebuilt from the topics when deleted)",
    )
    env_flag(
        p,
        "--catalog-retention",
        env="DELAYLINE_CATALOG_RETENTION",
        default="7d",
        type=duration_arg(parse_duration_ms),
        dest="catalog_retention_ms",
        metavar="DURATION",
        help="forget versions of finished schedules and dead letters older than this "
        "(0s: keep everything)",
    )
    add_listen_host(p, "--host", "DELAYLINE_API_HOST", "the API")
    env_flag(p, "--port", env="DELAYLINE_API_PORT", default=8080, type=int, help="listen port")
    env_flag(
        p,
        "--token",
        env="DELAYLINE_API_TOKEN",
        default=None,
        help="the bearer token writes need, and reads with --reads-need-token (without it "
        "the API refuses writes)",
    )
    p.add_argument(
        "--reads-need-token",
        action="store_true",
        default=env_bool("DELAYLINE_API_READS_NEED_TOKEN"),
        help="reads need the token too [env DELAYLINE_API_READS_NEED_TOKEN=1]",
    )
    env_flag(
        p,
        "--pipeline-url",
        env="DELAYLINE_PIPELINE_URL",
        default=None,
        help="the pipeline's metrics server (delayline run --metrics-port), for /info",
    )
    env_flag(
        p,
        "--request-timeout",
        env="DELAYLINE_API_REQUEST_TIMEOUT",
        default="10s",
        type=duration_arg(parse_duration_ms),
        dest="request_timeout_ms",
        metavar="DURATION",
        help="how long a write waits for Kafka",
    )
    env_flag(
        p,
        "--max-body-bytes",
        env="DELAYLINE_API_MAX_BODY_BYTES",
        default=DEFAULT_MAX_BODY_BYTES,
        type=int,
        help="larger request bodies are refused with 413 before they are read",
    )
    env_flag(
        p,
        "--retry-groups",
        env="DELAYLINE_API_RETRY_GROUPS",
        default="",
        metavar="GROUP[,GROUP]",
        help="retrying consumer groups (docs/retry.md) whose retries and dead letters "
        "/retries, /metrics and the admin page show",
    )
    add_log_format(p, " (uvicorn's lines too)")
    p.set_defaults(func=_api)


def _api(args: argparse.Namespace) -> int:
    require_extras("api", "api")
    from delayline.api.config import ApiConfig  # noqa: PLC0415 - FastAPI loads only for api
    from delayline.api.server import serve  # noqa: PLC0415 - FastAPI loads only for api

    config = ApiConfig(
        topology=topology_from(args),
        catalog_path=args.catalog,
        host=args.host,
        port=args.port,
        token=args.token or None,
        reads_need_token=args.reads_need_token,
        pipeline_url=args.pipeline_url or None,
        request_timeout_ms=args.request_timeout_ms,
        catalog_retention_ms=args.catalog_retention_ms or None,
        max_body_bytes=args.max_body_bytes,
        retry_groups=tuple(g.strip() for g in args.retry_groups.split(",") if g.strip()),
    )
    logging.getLogger("delayline").setLevel(min(logging.INFO, logging.getLogger().level))
    if config.token is None:
        log.warning("no --token: the API is read-only")
    # The JSON log's collector reads every line: the address goes there, as a log line.
    announce = log.info if args.log_format == JSON else say
    serve(config, on_ready=lambda url: announce(f"delayline api on {url} (admin page {url}/ui/)"))
    return 0
