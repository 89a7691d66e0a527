"""The ``delayline`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from delayline import __version__
from delayline.cli import (
    acls,
    api,
    bench,
    broker,
    cluster,
    committer,
    jars,
    listing,
    oscillator,
    pause,
    produce,
    redis,
    run,
    tail,
    topics,
)
from delayline.cli._common import apply_kafka_config
from delayline.cli.extras import MissingExtraError, add_unavailable, missing_extras
from delayline.core.logs import JSON, LOG_FORMAT_ENV, TEXT
from delayline.core.logs import configure as configure_logging
from delayline.errors import ConfigError, DelaylineError
from delayline.kafka.config import RDKAFKA_LOGGER

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (also used to render docs)."""
    parser = argparse.ArgumentParser(
        prog="delayline",
        description="Durable delayed messages for Apache Kafka. A flag that configures a "
        "command can also be set by the environment variable named in its help; the flags "
        "of one action (a schedule's --id or --at, a listing's filters) cannot.",
    )
    parser.add_argument("--version", action="version", version=f"delayline {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more log output (-vv includes librdkafka)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        broker,
        acls,
        redis,
        topics,
        produce,
        pause,
        tail,
        listing,
        run,
        committer,
        cluster,
        oscillator,
        api,
        bench,
        jars,
    ):
        module.register(sub)
    _register_demo(sub)
    return parser


def _register_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``demo`` runs the pipeline and the API; its module imports them on import."""
    missing = missing_extras("pipeline", "api")
    if missing:
        add_unavailable(sub, "demo", missing, help="see delayline work")
        return
    from delayline.cli import demo  # noqa: PLC0415 - imports FastAPI and uvicorn

    demo.register(sub)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``delayline`` console script."""
    try:
        parser = build_parser()
    except ConfigError as exc:  # a bad environment variable, read while building flags
        print(f"delayline: error: {exc}", file=sys.stderr)
        return 2
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "ignores_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")  # as parse_args does
    _configure_logging(args)
    as_json = getattr(args, "log_format", TEXT) == JSON
    try:
        apply_kafka_config(args)
        return int(args.func(args))
    except MissingExtraError as exc:
        _fail(str(exc), as_json)  # one line: which extra to install
        return 1
    except DelaylineError as exc:
        hint = " (retriable)" if exc.retriable else ""
        _fail(f"delayline: error: {exc}{hint}", as_json)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception:
        if not as_json:
            raise
        log.exception("delayline: unexpected error")  # the traceback as exc_info
        return 1


def _fail(message: str, as_json: bool) -> None:
    """Say why the command failed: one line on stderr, a JSON log line in
    ``--log-format json``."""
    if as_json:
        log.error("%s", message)
    else:
        print(message, file=sys.stderr)


def _configure_logging(args: argparse.Namespace) -> None:
    """``-v`` and ``--log-format`` (on the commands that have it, whose format the
    processes they start inherit: Spark's JVM and its Python workers)."""
    level = (
        logging.WARNING
        if args.verbose == 0
        else logging.INFO
        if args.verbose == 1
        else logging.DEBUG
    )
    log_format = getattr(args, "log_format", None)
    if log_format is not None:
        os.environ[LOG_FORMAT_ENV] = log_format
    configure_logging(level, log_format or TEXT)
    if args.verbose >= 2:
        RDKAFKA_LOGGER.setLevel(logging.DEBUG)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
