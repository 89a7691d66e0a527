"""Helpers every subcommand shares: env-backed flags, output, error exit."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from delayline.core.topology import (
    DEFAULT_BOOTSTRAP_SERVERS,
    DEFAULT_COMMITS_TOPIC,
    DEFAULT_DEAD_LETTER_TOPIC,
    DEFAULT_HISTORY_TOPIC,
    DEFAULT_SCHEDULES_TOPIC,
    Topology,
)
from delayline.core.units import parse_duration_ms
from delayline.errors import ConfigError


def env_flag(
    parser: argparse.ArgumentParser | Any,
    *names: str,
    env: str,
    help: str,
    default: Any = None,
    type: Callable[[str], Any] = str,
    **kwargs: Any,
) -> None:
    """Add a flag whose default comes from environment variable ``env``.

    The variable is named in ``--help``. argparse runs ``type`` on string
    defaults too, so a bad value in the environment is reported like a bad flag.
    """
    shown = "" if default is None else f"; default {default}"
    parser.add_argument(
        *names,
        default=os.environ.get(env, default),
        type=type,
        help=f"{help} [env {env}{shown}]",
        **kwargs,
    )


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def env_bool(env: str, default: bool = False) -> bool:
    """The boolean environment variable ``env``: 1/true/yes/on or 0/false/no/off;
    ``default`` when unset or empty, so an explicit false always wins.

    Raises:
        ConfigError: the variable holds something else.
    """
    raw = os.environ.get(env, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE or raw in _FALSE:
        return raw in _TRUE
    raise ConfigError(f"environment variable {env}={raw!r}: use 1/true/yes/on or 0/false/no/off")


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap-servers``, on every command that talks to Kafka."""
    env_flag(
        parser,
        "--bootstrap-servers",
        "-b",
        env="DELAYLINE_BOOTSTRAP_SERVERS",
        default=DEFAULT_BOOTSTRAP_SERVERS,
        help="Kafka bootstrap servers, host:port[,host:port]",
    )


def add_schedules_topic(parser: argparse.ArgumentParser) -> None:
    """``--schedules-topic``."""
    env_flag(
        parser,
        "--schedules-topic",
        env="DELAYLINE_SCHEDULES_TOPIC",
        default=DEFAULT_SCHEDULES_TOPIC,
        help="topic schedules are written to",
    )


TOPICS_ENV = "DELAYLINE_SCHEDULES_TOPICS"


def add_schedules_topics(parser: argparse.ArgumentParser, help: str) -> None:
    """``--schedules-topic``, repeatable, for commands that read every schedules topic."""
    parser.add_argument(
        "--schedules-topic",
        action="append",
        dest="schedules_topics",
        metavar="TOPIC",
        help=f"{help} [env {TOPICS_ENV}, comma-separated; default {DEFAULT_SCHEDULES_TOPIC}]",
    )


def schedules_topics(args: argparse.Namespace) -> tuple[str, ...]:
    """Flags win over the environment, which wins over the default."""
    if args.schedules_topics:
        return tuple(args.schedules_topics)
    from_env = [t.strip() for t in os.environ.get(TOPICS_ENV, "").split(",") if t.strip()]
    return tuple(from_env) or (DEFAULT_SCHEDULES_TOPIC,)


def add_topology(parser: argparse.ArgumentParser, schedules_help: str) -> None:
    """The cluster and topic flags every command that runs a component shares
    (``run``, ``api``, ``topics create``): one set of names and defaults."""
    add_bootstrap(parser)
    add_schedules_topics(parser, schedules_help)
    env_flag(
        parser,
        "--dead-letter-topic",
        env="DELAYLINE_DEAD_LETTER_TOPIC",
        default=DEFAULT_DEAD_LETTER_TOPIC,
        help="topic for rejected and expired records",
    )
    env_flag(
        parser,
        "--history-topic",
        env="DELAYLINE_HISTORY_TOPIC",
        default=DEFAULT_HISTORY_TOPIC,
        help="topic receiving a copy of every delivery, which the API's catalog follows "
        "(empty: none)",
    )
    env_flag(
        parser,
        "--commits-topic",
        env="DELAYLINE_COMMITS_TOPIC",
        default=DEFAULT_COMMITS_TOPIC,
        help="compacted topic of the pipeline's commit markers",
    )


def topology_from(args: argparse.Namespace) -> Topology:
    """The :class:`Topology` the flags of :func:`add_topology` describe.

    Raises:
        ConfigError: a topic name is invalid or two roles share a topic.
    """
    try:
        return Topology(
            bootstrap_servers=args.bootstrap_servers,
            schedules_topics=schedules_topics(args),
            dead_letter_topic=args.dead_letter_topic,
            history_topic=args.history_topic or None,
            commits_topic=args.commits_topic,
        )
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:  # pragma: no cover - argparse checked the types
        raise ConfigError(str(exc)) from exc


def add_timeout(parser: argparse.ArgumentParser) -> None:
    """``--timeout``: how long to wait for Kafka before giving up."""
    env_flag(
        parser,
        "--timeout",
        env="DELAYLINE_TIMEOUT",
        default="10s",
        type=duration_arg(parse_duration_ms),
        dest="timeout_ms",
        metavar="DURATION",
        help="how long to wait for Kafka to answer",
    )


def duration_arg(parse: Callable[[str], int]) -> Callable[[str], int]:
    """Wrap a parser so argparse reports its ValueError text verbatim."""

    def convert(text: str) -> int:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def say(message: str) -> None:
    """One line for people, on stdout."""
    print(message, flush=True)


def warn(message: str) -> None:
    """One warning line on stderr."""
    print(f"delayline: warning: {message}", file=sys.stderr, flush=True)
