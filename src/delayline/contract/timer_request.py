"""The timer-request contract (the durable Kafka timers design).

A record's key is the expiry second, Unix seconds as a decimal string of ASCII digits
(``"1893456000"``); its value is the protobuf message ``Future`` of
``future.proto`` (shipped beside this module, with the generated ``future_pb2``)::

    message Future { string callBackTopic = 1; string callBackKey = 2; bytes callBack = 3; }

When that second comes delayline delivers ``callBack`` to ``callBackTopic`` with key
``callBackKey`` (an empty key delivers a null key), every header of the request, and
delayline's output headers. A request already due when it arrives fires at once (the
original silently dropped those).

The schedule id is derived from where the request sits
(:func:`delayline.contract.ids.derived_id`, ``<topic>:<partition>:<offset>``), so a
request can be cancelled by that id (the original could not cancel at all): a
tombstone keyed by it in its own partition, as ``delayline cancel`` and the API write.
"""

from __future__ import annotations

import logging
import re

from google.protobuf.message import DecodeError

from delayline.contract.future_pb2 import Future
from delayline.contract.ids import derived_id
from delayline.contract.records import (
    ConsumedRecord,
    OutgoingRecord,
    parse_safely,
    parse_tombstone,
)
from delayline.contract.topics import target_topic_problem
from delayline.core.model import MAX_EPOCH_MS, Invalid, Parsed, Schedule
from delayline.errors import InvalidScheduleError

log = logging.getLogger(__name__)

_SECOND = re.compile(rb"[0-9]{1,12}")


def parse_timer_request(record: ConsumedRecord) -> Parsed:
    """Translate a timer-request record into the model; never raises."""
    return parse_safely(parse_timer_request_checked, record, "timer request")


def parse_timer_request_checked(record: ConsumedRecord) -> Parsed:
    """:func:`parse_timer_request` without its safety net (raises only on a bug)."""
    source = record.source
    if record.value is None:
        return parse_tombstone(record)
    if record.key is None or record.key == b"":
        return Invalid("missing expiry second (record key is empty)", source)
    if not _SECOND.fullmatch(record.key):
        shown = record.key[:40].decode("utf-8", "replace")
        return Invalid(f"expiry second (record key) is not Unix seconds: {shown!r}", source)
    due_ms = int(record.key) * 1000
    if due_ms > MAX_EPOCH_MS:
        return Invalid("expiry second (record key) is beyond year 9999", source)
    future = Future()
    try:
        future.ParseFromString(record.value)
    except DecodeError as exc:  # also a string field that is not UTF-8
        return Invalid(f"value is not a Future protobuf: {str(exc)[:120]}", source)
    if not future.callBackTopic:
        return Invalid("Future has no callBackTopic", source)
    problem = target_topic_problem(future.callBackTopic)
    if problem is not None:
        return Invalid(f"Future's callBackTopic is {problem}", source)
    return Schedule(
        id=derived_id(record.topic, record.partition, record.offset),
        due_ms=due_ms,
        target_topic=future.callBackTopic,
        target_key=future.callBackKey.encode("utf-8") or None,
        payload=future.callBack,
        headers=tuple(record.headers),
        source=source,
    )


def render_timer_request(
    topic: str, expiry_second: int, callback_topic: str, callback_key: str, callback: bytes
) -> OutgoingRecord:
    """The record a producer of the timers design writes (for ``delayline schedule``).

    Raises:
        InvalidScheduleError: the request would be dead-lettered (the reason says why).
    """
    if expiry_second < 0:
        raise InvalidScheduleError(f"expiry second {expiry_second} is negative")
    future = Future(callBackTopic=callback_topic, callBackKey=callback_key, callBack=callback)
    out = OutgoingRecord(topic, str(expiry_second).encode(), future.SerializeToString())
    check = parse_timer_request(ConsumedRecord(topic, 0, 0, 0, out.key, out.value))
    if isinstance(check, Invalid):
        raise InvalidScheduleError(check.reason)
    return out
