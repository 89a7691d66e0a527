"""The header contract's checks of a schedules-topic record: a schedule (its fields),
a cancel, or invalid with its reason.

:func:`delayline.contract.records.parse_record` builds the model from these; a reader
that only classifies records (the committer's watch reads every schedule written) takes
the fields as they are. One set of checks for both, so they cannot drift apart.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, NamedTuple

from delayline.contract import headers as h
from delayline.contract.topics import target_topic_problem
from delayline.core.model import Cancel, Headers, Invalid

if TYPE_CHECKING:
    from delayline.contract.records import ConsumedRecord


class ScheduleFields(NamedTuple):
    """A valid schedule record's fields, the :class:`Schedule` not built
    (:func:`schedule_fields`).

    Attributes:
        id: The schedule id.
        due_ms: Its due time.
        target_topic: Where it is delivered.
        target_key: The delivery's key.
        version_offset: Its place among its id's versions: its own offset or, for a copy
            (:data:`delayline.contract.headers.COPY_OF`), the offset of the version it
            copies when that is earlier (a copy-of header naming no earlier offset is
            ignored).
    """

    id: str
    due_ms: int
    target_topic: str
    target_key: bytes | None
    version_offset: int


def schedule_fields(record: ConsumedRecord) -> ScheduleFields | Cancel | Invalid:  # noqa: C901 - one check per reason
    """What :func:`delayline.contract.records.parse_record_checked` makes of ``record``,
    by the same checks, with a valid schedule's fields as they are (a reader that
    classifies records, the committer's watch, makes no schedule of each). Raises only
    on a bug."""
    schedule_id = record_id(record)
    if isinstance(schedule_id, Invalid):
        return schedule_id
    if record.value is None:
        return Cancel(schedule_id, fired_offset(record.headers), record.source)

    control: dict[str, bytes | None] = {}
    copy_of: bytes | _Absent | None = _ABSENT  # the first copy-of header's value
    for name, value in record.headers:
        if name in h.CONTROL_HEADERS:
            if name in control:
                return Invalid(f"header {name} appears more than once", record.source)
            control[name] = value
        elif name == h.COPY_OF and copy_of is _ABSENT:
            copy_of = value

    epoch_raw = control.get(h.EPOCH)
    if epoch_raw is None:
        return Invalid(f"missing header {h.EPOCH}", record.source)
    try:
        due_ms = h.parse_epoch_ms(epoch_raw.decode("utf-8"))
    except UnicodeDecodeError:
        return Invalid(f"header {h.EPOCH} is not valid UTF-8", record.source)
    except h.EpochError as exc:
        return Invalid(f"header {h.EPOCH} {exc}", record.source)

    topic_raw = control.get(h.TARGET_TOPIC)
    if topic_raw is None:
        return Invalid(f"missing header {h.TARGET_TOPIC}", record.source)
    try:
        target_topic = topic_raw.decode("utf-8")
    except UnicodeDecodeError:
        return Invalid(f"header {h.TARGET_TOPIC} is not valid UTF-8", record.source)
    problem = target_topic_problem(target_topic)
    if problem is not None:
        return Invalid(f"header {h.TARGET_TOPIC} is {problem}", record.source)

    version = record.offset if copy_of is _ABSENT else _version_offset(record.offset, copy_of)
    return ScheduleFields(schedule_id, due_ms, target_topic, control.get(h.TARGET_KEY), version)


def _version_offset(offset: int, copy_of: bytes | None) -> int:
    """The version offset of a record at ``offset`` whose first copy-of header says
    ``copy_of``: the offset it names if earlier, else its own."""
    copied = _offset_of(copy_of)
    return offset if copied is None or copied >= offset else copied


def record_id(record: ConsumedRecord) -> str | Invalid:
    """The schedule id in the record's key."""
    schedule_id = key_id(record.key)
    if schedule_id is not None:
        return schedule_id
    if not record.key:
        return Invalid("missing schedule id (record key is empty)", record.source)
    return Invalid("schedule id (record key) is not valid UTF-8", record.source)


def key_id(key: bytes | None) -> str | None:
    """The schedule id ``key`` holds (non-empty UTF-8), else ``None``."""
    if not key:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return None


def fired_offset(headers: Headers) -> int | None:
    """The first ``delayline-fired-offset`` header: 1 to 18 ASCII digits, else ``None``
    (a plain cancel). Strict, as the pipeline's Spark SQL check is."""
    return _offset_header(headers, h.FIRED_OFFSET)


def _offset_header(headers: Headers, name: str) -> int | None:
    """The offset in the first header ``name`` (the first only: the pipeline's SQL finds
    it with a plain array lookup, not a lambda run per record)."""
    for key, value in headers:
        if key == name:
            return _offset_of(value)
    return None


def _offset_of(value: bytes | None) -> int | None:
    """The offset an offset header's ``value`` names: 1 to 18 ASCII digits, else ``None``
    (``bytes.isdigit`` is ASCII only; one follows every delivery, so no regex)."""
    if value is None or not 0 < len(value) <= 18 or not value.isdigit():
        return None
    return int(value)


class _Absent(enum.Enum):
    ABSENT = enum.auto()


_ABSENT: Final = _Absent.ABSENT
"""No header of that name was seen (a header's value may itself be ``None``)."""
