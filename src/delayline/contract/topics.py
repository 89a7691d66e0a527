"""Kafka's topic-name rules, checked before a record is ever produced."""

from __future__ import annotations

import functools
import re

MAX_TOPIC_NAME_LENGTH = 249
INTERNAL_PREFIX = "__"
"""Kafka's own topics (``__consumer_offsets``, ``__transaction_state``...) start with it."""
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_problem(name: str) -> str | None:
    """Return why ``name`` is not a legal Kafka topic name, or ``None`` if it is.

    The rules are Kafka's own (``org.apache.kafka.common.internals.Topic``):
    1 to 249 characters of ASCII letters, digits, ``.``, ``_`` and ``-``, and
    neither ``.`` nor ``..``.
    """
    if not name:
        return "empty"
    if name in {".", ".."}:
        return f"{name!r} is not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"longer than {MAX_TOPIC_NAME_LENGTH} characters ({len(name)})"
    if not _LEGAL.fullmatch(name):
        return f"{_shown(name)} has characters other than ASCII letters, digits, '.', '_', '-'"
    return None


@functools.lru_cache(maxsize=4_096)
def target_topic_problem(name: str) -> str | None:
    """Return why delayline will not deliver to ``name``, or ``None`` if it may
    (remembered for the last 4,096 names: a deployment's targets are few, and every
    schedule read is checked).

    A target must satisfy :func:`topic_name_problem` and must not be internal to
    Kafka (a name starting with ``__``): the broker refuses records produced to
    such topics. delayline's own topic names are checked by :func:`topic_name_problem`
    alone. The result completes "the target topic is ...".
    """
    problem = topic_name_problem(name)
    if problem is not None:
        return f"not a valid topic name: {problem}"
    if name.startswith(INTERNAL_PREFIX):
        return (
            f"an internal Kafka topic: {_shown(name)} "
            f"(names starting with {INTERNAL_PREFIX!r} are reserved to Kafka)"
        )
    return None


def _shown(name: str) -> str:
    return repr(name if len(name) <= 60 else name[:60] + "...")


def allowed_targets_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot restrict target topics, or ``None`` if it can: it must be
    a regular expression (matched against the whole topic name)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"not a regular expression: {exc}"
    return None


def target_not_allowed(name: str, pattern: str | None) -> str | None:
    """Why ``name`` is not an allowed target under ``pattern`` (``--allowed-target-topics``,
    matched against the whole name), or ``None`` if it is (any name, without a pattern).
    The result completes "the target topic is ..."."""
    if pattern is None or _compiled(pattern).fullmatch(name):
        return None
    return f"not allowed: {_shown(name)} does not match --allowed-target-topics '{pattern}'"


def topic_matches(name: str, pattern: str | None) -> bool:
    """Whether ``name`` matches ``pattern`` as a whole (a regular expression checked by
    :func:`allowed_targets_problem`); no pattern matches nothing."""
    return pattern is not None and _compiled(pattern).fullmatch(name) is not None


@functools.lru_cache(maxsize=16)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)
