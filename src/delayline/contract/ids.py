"""Schedule ids that delayline derives from where a record sits in Kafka.

A JSON envelope without an ``id`` and every timer request take the id
``<topic>:<partition>:<offset>`` of the record that asked for them: stable across
replays and rebuilds (a record never moves), unique within the topic, and enough to
find the record again. Kafka topic names cannot contain ``:``, so the id parses back
unambiguously; that is how a cancel of such an id reaches its exact partition.
"""

from __future__ import annotations

import re

from delayline.contract.topics import topic_name_problem

_DERIVED = re.compile(r"(?P<topic>[^:]+):(?P<partition>[0-9]{1,9}):(?P<offset>[0-9]{1,18})")


def derived_id(topic: str, partition: int, offset: int) -> str:
    """The schedule id of the record at ``topic``/``partition``/``offset``."""
    return f"{topic}:{partition}:{offset}"


def parse_derived_id(schedule_id: str) -> tuple[str, int, int] | None:
    """``(topic, partition, offset)`` of a derived id; ``None`` if ``schedule_id`` is not one."""
    match = _DERIVED.fullmatch(schedule_id)
    if match is None or topic_name_problem(match["topic"]) is not None:
        return None
    return match["topic"], int(match["partition"]), int(match["offset"])
