"""Flags the long-running commands share: where their HTTP servers listen, how they
log."""

from __future__ import annotations

import argparse

from delayline.cli._common import env_flag, one_of
from delayline.core.logs import LOG_FORMAT_ENV, LOG_FORMATS, TEXT

LOCAL_ONLY = "127.0.0.1"
"""Every server's default address: reachable from this host only."""
IN_A_CONTAINER = "(use 0.0.0.0 in a container, for probes and scrapes from outside it)"


def add_listen_host(parser: argparse.ArgumentParser, flag: str, env: str, what: str) -> None:
    """``flag``: the address ``what`` listens on (:data:`LOCAL_ONLY` by default)."""
    env_flag(
        parser,
        flag,
        env=env,
        default=LOCAL_ONLY,
        metavar="ADDRESS",
        help=f"address {what} listens on {IN_A_CONTAINER}",
    )


def add_metrics_address(parser: argparse.ArgumentParser, env_prefix: str, serves: str) -> None:
    """``--metrics-port`` (``<env_prefix>METRICS_PORT``; off by default) and
    ``--metrics-host`` (``<env_prefix>METRICS_HOST``) of a server of ``serves``."""
    env_flag(
        parser,
        "--metrics-port",
        env=f"{env_prefix}METRICS_PORT",
        default=None,
        type=int,
        metavar="PORT",
        help=f"serve {serves} on this port (default: off)",
    )
    add_listen_host(parser, "--metrics-host", f"{env_prefix}METRICS_HOST", "the metrics server")


def add_log_format(parser: argparse.ArgumentParser, also: str = "") -> None:
    """``--log-format text|json`` (:data:`~delayline.core.logs.LOG_FORMAT_ENV`), which
    :func:`delayline.cli.main` applies; ``also`` names other lines that follow it."""
    env_flag(
        parser,
        "--log-format",
        env=LOG_FORMAT_ENV,
        default=TEXT,
        type=one_of(LOG_FORMATS),
        metavar="{" + ",".join(LOG_FORMATS) + "}",
        help="log lines on stderr as text, or as json: one object per line with time (UTC), "
        "level, logger, message, exc_info when there is a traceback, and the log call's "
        f"extra fields{also}",
    )
