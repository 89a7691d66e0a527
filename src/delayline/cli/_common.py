"""Helpers every subcommand shares: env-backed flags, output, error exit."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from delayline.contract.topology import (
    DEFAULT_BOOTSTRAP_SERVERS,
    DEFAULT_COMMITS_TOPIC,
    DEFAULT_DEAD_LETTER_TOPIC,
    DEFAULT_HISTORY_TOPIC,
    DEFAULT_SCHEDULES_TOPIC,
    Topology,
)
from delayline.core.http import get_json
from delayline.core.units import parse_duration_ms, parse_positive_int
from delayline.errors import ApiUnavailableError, ConfigError, DelaylineError, HttpUnavailableError
from delayline.kafka.config import use_client_properties
from delayline.kafka.probe import PROBE_TIMEOUT_S, require_listening
from delayline.kafka.properties import KAFKA_CONFIG_ENV

T = TypeVar("T")


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


def env_switch_off(
    parser: argparse.ArgumentParser | Any, name: str, *, dest: str, env: str, help: str
) -> None:
    """Add ``--no-...`` flag ``name`` that turns ``dest`` (on by default) off, as does
    environment variable ``env`` set true (named in ``--help``)."""
    parser.add_argument(
        name,
        action="store_false",
        dest=dest,
        default=not env_bool(env),
        help=f"{help} [env {env}=1]",
    )


def one_of(values: Iterable[str]) -> Callable[[str], str]:
    """An argparse ``type`` accepting one of ``values`` (argparse checks ``choices`` only
    on the command line; a ``type`` also checks a default from the environment)."""
    allowed = tuple(values)

    def check(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return check


def stop_on_signals(logger: logging.Logger, what: str) -> threading.Event:
    """An event set by SIGTERM or SIGINT (logged: ``<SIGNAL> received: <what>``).

    The handler never waits for a lock: a second signal can arrive while the first one's
    ``Event.set`` holds the event's (non-reentrant) lock in the same thread, as when a
    supervisor and a terminal both pass on one Ctrl-C, and setting the event there would
    wait for itself forever. A short-lived thread sets it instead.
    """
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logger.info("%s received: %s", signal.Signals(signum).name, what)
        threading.Thread(target=stop.set, name="delayline-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


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
    """``--bootstrap-servers`` and ``--kafka-config``, on every command that talks to
    Kafka."""
    env_flag(
        parser,
        "--bootstrap-servers",
        "-b",
        env="DELAYLINE_BOOTSTRAP_SERVERS",
        default=DEFAULT_BOOTSTRAP_SERVERS,
        help="Kafka bootstrap servers, host:port[,host:port]",
    )
    add_kafka_config(
        parser,
        "Kafka client properties (the Java format Kafka's tools take with "
        "--command-config: security.protocol, sasl.*, ssl.*, ...) for every Kafka client "
        "delayline runs",
    )


def add_kafka_config(parser: argparse.ArgumentParser, help: str) -> None:
    """``--kafka-config FILE`` (:data:`KAFKA_CONFIG_ENV`), applied by
    :func:`apply_kafka_config` before the command runs."""
    env_flag(parser, "--kafka-config", env=KAFKA_CONFIG_ENV, metavar="FILE", help=help)


def apply_kafka_config(args: argparse.Namespace) -> None:
    """Load ``--kafka-config`` (when given) for this process and its children.

    Raises:
        KafkaConfigError: the file cannot be read or carried (the key and the reason).
    """
    path = getattr(args, "kafka_config", None)
    if path:
        use_client_properties(Path(path))


TOPICS_ENV = "DELAYLINE_SCHEDULES_TOPICS"
ENVELOPE_TOPICS_ENV = "DELAYLINE_ENVELOPE_TOPICS"
TIMER_REQUEST_TOPICS_ENV = "DELAYLINE_TIMER_REQUEST_TOPICS"


def add_schedules_topics(parser: argparse.ArgumentParser, help: str) -> None:
    """``--schedules-topic``, repeatable, for commands that read every schedules topic."""
    add_topics_flag(parser, "--schedules-topic", TOPICS_ENV, help, DEFAULT_SCHEDULES_TOPIC)


def add_topics_flag(
    parser: argparse.ArgumentParser, flag: str, env: str, help: str, default: str | None
) -> None:
    """A repeatable topic flag (``--envelope-topic``...) whose default is the
    comma-separated variable ``env``; read it with :func:`topics_from`."""
    shown = "" if default is None else f"; default {default}"
    parser.add_argument(
        flag,
        action="append",
        dest=_dest(flag),
        metavar="TOPIC",
        help=f"{help} [env {env}, comma-separated{shown}]",
    )


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_") + "s"


def topics_from(args: argparse.Namespace, flag: str, env: str) -> tuple[str, ...]:
    """The topics of ``flag`` (from :func:`add_topics_flag`): flags win over ``env``."""
    given = getattr(args, _dest(flag), None)
    if given:
        return tuple(given)
    return tuple(t.strip() for t in os.environ.get(env, "").split(",") if t.strip())


def schedules_topics(args: argparse.Namespace) -> tuple[str, ...]:
    """Flags win over the environment, which wins over the default."""
    return topics_from(args, "--schedules-topic", TOPICS_ENV) or (DEFAULT_SCHEDULES_TOPIC,)


def add_topology(parser: argparse.ArgumentParser, schedules_help: str) -> None:
    """The cluster and topic flags every command that runs a component shares
    (``run``, ``api``, ``topics create``): one set of names and defaults."""
    add_bootstrap(parser)
    add_schedules_topics(parser, schedules_help)
    add_topics_flag(
        parser,
        "--envelope-topic",
        ENVELOPE_TOPICS_ENV,
        'topic of JSON envelopes ({"topic", "message", "countdown"|"at"}), repeatable; '
        "see docs/contracts.md",
        None,
    )
    add_topics_flag(
        parser,
        "--timer-request-topic",
        TIMER_REQUEST_TOPICS_ENV,
        "topic of timer requests (key: the expiry second; value: protobuf Future), "
        "repeatable; see docs/contracts.md",
        None,
    )
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
    env_flag(
        parser,
        "--allowed-target-topics",
        env="DELAYLINE_ALLOWED_TARGET_TOPICS",
        default=None,
        metavar="REGEX",
        help="only deliver to target topics matching this regular expression as a whole, "
        "e.g. 'orders\\..*|billing-.*': the API refuses others (403) and the pipeline "
        "dead-letters them (default: any topic; see docs/security.md)",
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
            envelope_topics=topics_from(args, "--envelope-topic", ENVELOPE_TOPICS_ENV),
            timer_request_topics=topics_from(
                args, "--timer-request-topic", TIMER_REQUEST_TOPICS_ENV
            ),
            dead_letter_topic=args.dead_letter_topic,
            history_topic=args.history_topic or None,
            commits_topic=args.commits_topic,
            allowed_target_topics=args.allowed_target_topics or None,
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


def add_start_timeout(parser: argparse.ArgumentParser, env: str, default: str, what: str) -> None:
    """``--start-timeout DURATION`` (``dest="start_timeout_ms"``) of a ``start`` command
    that waits for ``what``."""
    env_flag(
        parser,
        "--start-timeout",
        env=env,
        default=default,
        type=duration_arg(parse_duration_ms),
        dest="start_timeout_ms",
        metavar="DURATION",
        help=f"how long to wait for {what}",
    )


def duration_arg(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a parser (of durations, counts, lists...): argparse reports
    its ValueError text verbatim, for a flag and for a default from the environment."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


positive_int = duration_arg(parse_positive_int)
"""An argparse type: a whole number of 1 or more (``1_000`` reads as 1000)."""


def check_kafka(args: argparse.Namespace) -> None:
    """Fail fast, with what to do, when nothing listens at ``--bootstrap-servers``
    (see :mod:`delayline.kafka.probe`); bounded by ``--timeout`` when the command has it.

    Raises:
        KafkaUnavailableError: every bootstrap address refused or did not answer.
    """
    timeout_ms = getattr(args, "timeout_ms", None)
    limit_s = PROBE_TIMEOUT_S if timeout_ms is None else min(PROBE_TIMEOUT_S, timeout_ms / 1000)
    require_listening(args.bootstrap_servers, limit_s)


DEFAULT_API_URL = "http://127.0.0.1:8080"
API_TIMEOUT_S = 10.0


READ_ACCESS_HELP = (
    "the bearer token delayline api was started with (its --token): these are reads, "
    "which need it only when the API runs with --reads-need-token"
)
WRITE_ACCESS_HELP = (
    "the bearer token delayline api was started with (its --token): this is a write, "
    "which always needs it (an API started without one refuses writes)"
)


def add_api(parser: argparse.ArgumentParser, token_help: str = READ_ACCESS_HELP) -> None:
    """``--api-url`` and ``--token`` (``token_help`` says when the command needs it), on
    every command that asks ``delayline api``."""
    env_flag(
        parser,
        "--api-url",
        env="DELAYLINE_API_URL",
        default=DEFAULT_API_URL,
        help="base URL of delayline api",
    )
    env_flag(parser, "--token", env="DELAYLINE_API_TOKEN", default=None, help=token_help)


class NotFoundError(DelaylineError):
    """The API knows no such schedule, or none pending."""


def api_unavailable(api_url: str, why: object) -> ApiUnavailableError:
    """The error for an API that did not answer: says which flag and variable point at it."""
    return ApiUnavailableError(
        f"delayline api at {api_url} did not answer ({why}); start it with `delayline api` "
        "or point --api-url (env DELAYLINE_API_URL) at it"
    )


def api_get(
    args: argparse.Namespace,
    path: str,
    params: Mapping[str, str | int] | None = None,
    timeout_s: float = API_TIMEOUT_S,
) -> tuple[int, Any]:
    """GET ``path`` from the API at ``args.api_url`` (standard library only, so the
    client-only install can ask too).

    Returns:
        The HTTP status and the decoded JSON body (``None`` when the body is not JSON).

    Raises:
        ApiUnavailableError: the API did not answer; the message names ``--api-url``.
    """
    if urllib.parse.urlsplit(args.api_url).scheme not in ("http", "https"):
        raise ConfigError(
            f"--api-url (env DELAYLINE_API_URL) {args.api_url!r}: use http://host:port"
        )
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    try:
        return get_json(
            args.api_url.rstrip("/") + path, params=params, headers=headers, timeout_s=timeout_s
        )
    except HttpUnavailableError as exc:
        raise api_unavailable(args.api_url, exc) from exc


def api_refused(status: int, body: Any) -> ConfigError:
    """The error for an answer other than the one expected, with the API's reason."""
    detail = body.get("detail") if isinstance(body, dict) else None
    hint = " (pass --token, env DELAYLINE_API_TOKEN)" if status == 401 else ""
    return ConfigError(f"delayline api answered {status}: {detail or 'no detail'}{hint}")


def say(message: str) -> None:
    """One line for people, on stdout."""
    print(message, flush=True)


def warn(message: str) -> None:
    """One warning line on stderr."""
    print(f"delayline: warning: {message}", file=sys.stderr, flush=True)
