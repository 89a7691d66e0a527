"""The JSON envelope contract (the Redis sorted-set "black box" design).

A record's value is a JSON object::

    {"topic": "orders", "message": "hello", "countdown": 120}

* ``topic`` (required): the target topic.
* ``message`` (required): the delivered value. A JSON string is delivered as its UTF-8
  bytes; any other JSON value (object, array, number, ``true``, ``false``, ``null``) as
  its compact JSON text: no white space, non-ASCII characters as they are, numbers as
  written (an exponent is upper case: ``1e5`` becomes ``1E+5``).
* ``countdown`` (seconds, a non-negative number) or ``at`` (the due time: ISO 8601 with a
  time zone, or Unix seconds as a number), exactly one of them. The due time of a
  countdown is the record's own timestamp plus the countdown, never the time delayline
  read it, so a restart or a lagging pipeline does not shift it. Fractions of a
  millisecond round up.
* ``key`` (optional string): the delivered record's key; absent or ``null``: no key.
* ``id`` (optional, a non-empty string): the schedule id. A later envelope with the same
  id replaces the schedule; ``{"id": "X", "cancel": true}`` or a tombstone (null value)
  keyed ``X`` cancels it. Without an id, the id is derived from where the record sits
  (:func:`delayline.contract.ids.derived_id`).

Every header of the record (``CALLER_SERVICE`` and any other) is carried to the
delivered record. Other fields are ignored. Anything else is :class:`Invalid` with a
reason; parsing never raises.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from decimal import MAX_EMAX, MIN_EMIN, Decimal, localcontext
from typing import Any

from delayline.contract.ids import derived_id, parse_derived_id
from delayline.contract.records import (
    ConsumedRecord,
    OutgoingRecord,
    parse_safely,
    parse_tombstone,
)
from delayline.contract.topics import target_topic_problem
from delayline.core.model import MAX_EPOCH_MS, Cancel, Invalid, Parsed, Schedule
from delayline.errors import DelaylineError, InvalidScheduleError, RecordFormatError

log = logging.getLogger(__name__)

MAX_ENVELOPE_BYTES = 1_048_576
"""Larger envelopes are dead-lettered: Kafka's default limit for one record is about
this, so the delivery would be refused anyway."""

MAX_DEPTH = 100
"""Envelopes nested deeper are dead-lettered."""
_MAX_SECONDS = MAX_EPOCH_MS // 1000 + 1
"""Larger numbers of seconds are refused before any arithmetic on them."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _RefusedError(DelaylineError):
    """Raised by the checks below; the message is the dead letter's reason."""


class _DuplicateError(RecordFormatError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def parse_envelope(record: ConsumedRecord) -> Parsed:
    """Translate an envelope-topic record into the model; never raises."""
    return parse_safely(parse_envelope_checked, record, "envelope")


def parse_envelope_checked(record: ConsumedRecord) -> Parsed:
    """:func:`parse_envelope` without its safety net: every malformed input is refused
    by an explicit check with its own reason, so this raises only on a bug."""
    if record.value is None:
        return parse_tombstone(record)
    try:
        return _parse(record, record.value)
    except _RefusedError as exc:
        return Invalid(str(exc), record.source)


def _parse(record: ConsumedRecord, value: bytes) -> Schedule | Cancel:
    source = record.source
    if len(value) > MAX_ENVELOPE_BYTES:
        raise _RefusedError(
            f"envelope is {len(value)} bytes, over the {MAX_ENVELOPE_BYTES}-byte limit"
        )
    body = _json(value)
    schedule_id = _id(body, record)
    cancel = body.get("cancel", False)
    if not isinstance(cancel, bool):
        raise _RefusedError("envelope field 'cancel' is not true or false")
    if cancel:
        if "id" not in body:
            raise _RefusedError("envelope cancel without an 'id'")
        return Cancel(schedule_id, None, source)
    topic = _string_field(body, "topic")
    if topic is None:
        raise _RefusedError("envelope has no 'topic'")
    problem = target_topic_problem(topic)
    if problem is not None:
        raise _RefusedError(f"envelope field 'topic' is {problem}")
    if "message" not in body:
        raise _RefusedError("envelope has no 'message'")
    key = _string_field(body, "key")
    return Schedule(
        id=schedule_id,
        due_ms=_due_ms(body, record.timestamp_ms),
        target_topic=topic,
        target_key=None if key is None else _utf8(key, "key"),
        payload=_message(body["message"]),
        headers=tuple(record.headers),
        source=source,
    )


def _json(value: bytes) -> dict[str, Any]:
    """The envelope's JSON object."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise _RefusedError("envelope is not valid UTF-8") from None
    if _depth(text) > MAX_DEPTH:
        # Checked first: how deep Python's parser may go depends on the caller's stack,
        # and every reader of an envelope (the pipeline, the catalog) must agree.
        raise _RefusedError(f"envelope is nested deeper than {MAX_DEPTH} levels")
    try:
        body = json.loads(
            text,
            parse_float=Decimal,
            parse_int=_int,
            parse_constant=_not_json,
            object_pairs_hook=_unique,
        )
    except _DuplicateError as exc:
        raise _RefusedError(f"envelope field {exc.name!r} appears more than once") from None
    except ArithmeticError:  # decimal.InvalidOperation: an exponent past Decimal's range
        raise _RefusedError("envelope holds a number out of range") from None
    except ValueError as exc:
        raise _RefusedError(f"envelope is not JSON: {str(exc)[:120]}") from None
    if not isinstance(body, dict):
        raise _RefusedError("envelope is not a JSON object")
    return body


# The closing quote is optional: required, an unterminated string of escapes made each
# attempt scan to the end (quadratic: a minute for 80 kB); malformed text is refused by
# the parser anyway.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?')
_BRACKET = re.compile(r"[\[\]{}]")


def _depth(text: str) -> int:
    """How deeply arrays and objects nest in ``text`` (brackets inside strings aside;
    for malformed text an estimate, which the parser then refuses anyway)."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _int(text: str) -> int | Decimal:
    # Python refuses to convert integers of more than 4300 digits; as a Decimal such a
    # number is still one (and is refused by the range checks where it matters).
    return Decimal(text) if len(text) > 100 else int(text)


def _not_json(name: str) -> Any:
    raise RecordFormatError(f"{name} is not JSON")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise _DuplicateError(name)
        out[name] = value
    return out


def _string_field(body: dict[str, Any], name: str) -> str | None:
    """An optional string field (absent or null: ``None``)."""
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise _RefusedError(f"envelope field {name!r} is not a string")
    return value


def _id(body: dict[str, Any], record: ConsumedRecord) -> str:
    if "id" not in body:
        return derived_id(record.topic, record.partition, record.offset)
    value = body["id"]
    if not isinstance(value, str) or not value:
        raise _RefusedError("envelope field 'id' is not a non-empty string")
    _utf8(value, "id")
    derived = parse_derived_id(value)
    if derived is not None and derived[0] == record.topic:
        # It would name another envelope of this topic, one written without an id.
        raise _RefusedError(f"envelope field 'id' has the form of this topic's own ids: {value!r}")
    return value


def _utf8(text: str, name: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # JSON allows escaping a lone surrogate; UTF-8 does not
        raise _RefusedError(
            f"envelope field {name!r} is not valid Unicode (a lone surrogate)"
        ) from None


def _message(value: Any) -> bytes:
    """The delivered bytes of ``message`` (see the module's rule)."""
    return _utf8(value if isinstance(value, str) else compact_json(value), "message")


def compact_json(value: Any) -> str:
    """``value`` (as parsed here: numbers as ``int`` or ``Decimal``) as compact JSON text."""
    if isinstance(value, dict):
        inner = ",".join(f"{_string(k)}:{compact_json(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(compact_json(v) for v in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return str(value)  # int or Decimal, as written (Decimal keeps the digits)


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _due_ms(body: dict[str, Any], timestamp_ms: int) -> int:
    has_countdown, has_at = "countdown" in body, "at" in body
    if has_countdown and has_at:
        raise _RefusedError("envelope has both 'countdown' and 'at'")
    if has_countdown:
        due_ms = timestamp_ms + ceil_ms(_seconds(body["countdown"], "countdown"))
    elif has_at:
        at = body["at"]
        due_ms = _iso_ms(at) if isinstance(at, str) else ceil_ms(_seconds(at, "at"))
    else:
        raise _RefusedError("envelope has neither 'countdown' nor 'at'")
    if due_ms > MAX_EPOCH_MS:
        raise _RefusedError("envelope's due time is beyond year 9999")
    if due_ms < 0:  # a countdown from a record without a timestamp (-1)
        raise _RefusedError("envelope's due time is before 1970 (the record has no timestamp)")
    return due_ms


def _seconds(value: Any, name: str) -> int | Decimal:
    """A non-negative number of seconds."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        raise _RefusedError(f"envelope field {name!r} is not a number")
    if value < 0:
        raise _RefusedError(f"envelope field {name!r} is negative")
    if value > _MAX_SECONDS:
        raise _RefusedError(f"envelope field {name!r} is beyond year 9999")
    return value


def ceil_ms(seconds: int | Decimal) -> int:
    """Seconds as milliseconds, any fraction of a millisecond rounded up (exactly)."""
    if isinstance(seconds, int):
        return seconds * 1000
    with localcontext() as ctx:
        # Exact: no rounding of the digits, no underflow of a tiny fraction to 0.
        ctx.prec = len(seconds.as_tuple().digits) + 20
        ctx.Emin, ctx.Emax = MIN_EMIN, MAX_EMAX
        return int((seconds * 1000).to_integral_value(rounding="ROUND_CEILING"))


def _iso_ms(text: str) -> int:
    """Epoch ms of an ISO 8601 time with a zone (fractions of a ms round up)."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise _RefusedError(
            "envelope field 'at' is neither ISO 8601 nor a number of Unix seconds"
        ) from None
    if at.tzinfo is None or at.utcoffset() is None:
        raise _RefusedError("envelope field 'at' has no time zone (add Z or +HH:MM)")
    try:
        since = at - _EPOCH
    except OverflowError:  # a year-1 time with a zone east of UTC
        raise _RefusedError("envelope field 'at' is before 1970") from None
    micros = (since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds
    if micros < 0:
        raise _RefusedError("envelope field 'at' is before 1970")
    return -(-micros // 1000)


def render_envelope(
    topic: str,
    target_topic: str,
    message: Any,
    *,
    countdown_s: int | float | None = None,
    at: int | float | str | None = None,
    key: str | None = None,
    schedule_id: str | None = None,
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> OutgoingRecord:
    """The record a producer of the envelope design writes (for ``delayline schedule``):
    keyed by ``schedule_id`` when there is one, so its versions share a partition.

    Exactly one of ``countdown_s`` (seconds from the record's timestamp) and ``at``
    (Unix seconds, or ISO 8601 text with a zone). ``message`` may hold ``Decimal``
    numbers (written with their digits).

    Raises:
        InvalidScheduleError: the envelope would be dead-lettered (the reason says why).
    """
    if (countdown_s is None) == (at is None):
        raise InvalidScheduleError("give exactly one of a countdown and a due time ('at')")
    body: dict[str, Any] = {"topic": target_topic, "message": message}
    if countdown_s is not None:
        body["countdown"] = countdown_s
    else:
        body["at"] = at
    if key is not None:
        body["key"] = key
    if schedule_id is not None:
        body["id"] = schedule_id
    try:
        value = compact_json(body).encode()
    except UnicodeEncodeError as exc:
        raise InvalidScheduleError(f"the envelope is not valid Unicode: {exc}") from exc
    record_key = None if schedule_id is None else schedule_id.encode()
    check = parse_envelope(ConsumedRecord(topic, 0, 0, 0, record_key, value, headers))
    if isinstance(check, Invalid):
        raise InvalidScheduleError(check.reason)
    return OutgoingRecord(topic, record_key, value, headers)
