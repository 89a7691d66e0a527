"""Kafka's topic-name rules, checked before a record is ever produced."""

from __future__ import annotations

import re

MAX_TOPIC_NAME_LENGTH = 249
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


def _shown(name: str) -> str:
    return repr(name if len(name) <= 60 else name[:60] + "...")
