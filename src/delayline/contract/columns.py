"""The schedules-topic contract as Spark SQL expressions: validation without Python.

:func:`parsed` classifies every record of a micro-batch inside the JVM, so the hold
never waits on a Python worker: ``kind`` is ``schedule``, ``cancel`` or ``invalid``
exactly when :func:`delayline.contract.records.parse_record` returns a ``Schedule``, a
``Cancel`` or an ``Invalid``, and the parsed fields are equal (an integration test
compares the two on a few thousand generated records). The *reason* of an invalid
record is not computed here: the fire stage asks :func:`parse_record` for it when it
writes the dead letter, so every reason has one definition.

Headers leave this stage as read; the JVM hold encodes those it keeps as
:mod:`delayline.contract.codec` does (the hold's suite checks the two agree).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from delayline.contract import headers as h
from delayline.contract.topics import INTERNAL_PREFIX, MAX_TOPIC_NAME_LENGTH
from delayline.core.model import MAX_EPOCH_MS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SCHEDULE = "schedule"
CANCEL = "cancel"
INVALID = "invalid"

# Java regular expressions (Spark's): \z is the very end, where $ would also match
# before a final line break.
_WS = r"[ \t\n\r\f\x0B]*"
_EPOCH = rf"^{_WS}([+-]?)([0-9]*)(?:\.([0-9]*))?{_WS}\z"
_OFFSET = r"^[0-9]{1,18}\z"
_TOPIC = rf"^[a-zA-Z0-9._-]{{1,{MAX_TOPIC_NAME_LENGTH}}}\z"
_MAX_SECONDS_DIGITS = len(str(MAX_EPOCH_MS // 1000)) + 1  # more cannot fit in a long


def _sql(text: str) -> str:
    """A SQL string literal (names here are constants; quotes are escaped anyway)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _position(name: str) -> str:
    """1-based position of the first header called ``name``; 0 when there is none.

    Plain array functions, not lambdas: Spark generates code for these, while a
    higher-order function is interpreted row by row (and looks up the session
    configuration on each call: it made up a fifth of the pipeline's CPU).
    """
    return f"coalesce(array_position(headers.key, {_sql(name)}), 0)"


def _count(name: str) -> str:
    """How many headers are called ``name``."""
    return f"(size(headers.key) - size(array_remove(headers.key, {_sql(name)})))"


def _first_value(name: str) -> str:
    return f"get(headers.value, {_position(name)} - 1)"


def _utf8(binary: str) -> str:
    """Whether ``binary`` (not null) is valid UTF-8."""
    return f"is_valid_utf8(cast({binary} AS STRING))"


def _with_due_ms(frame: DataFrame, text: str) -> DataFrame:
    """``frame`` with column ``_due``: the epoch ms that the epoch header's text (column
    ``text``) says, as :func:`delayline.contract.headers.parse_epoch_ms` reads it, or
    null where that refuses it (validity: ``_due <= MAX_EPOCH_MS``).

    The text is taken apart once, each piece a column (its regular expression's groups,
    whether it matches at all, the whole seconds without leading zeros). The casts stay
    inside the ``CASE``: Spark's ANSI mode fails a cast of text that is no number, and
    only a valid text reaches them.
    """
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark's convention

    pattern = _sql(_EPOCH)
    parts = frame.withColumns(
        {
            "_sign": F.expr(f"regexp_extract({text}, {pattern}, 1)"),
            "_whole": F.expr(f"regexp_extract({text}, {pattern}, 2)"),
            "_frac": F.expr(f"regexp_extract({text}, {pattern}, 3)"),
            "_form": F.expr(f"{text} RLIKE {pattern}"),
        }
    ).withColumn("_digits", F.expr("regexp_replace(_whole, '^0+', '')"))
    millis = (
        "coalesce(cast(nullif(_digits, '') AS BIGINT), 0) * 1000"
        " + cast(rpad(substr(_frac, 1, 3), 3, '0') AS BIGINT)"
        " + CASE WHEN substr(_frac, 4) RLIKE '[1-9]' THEN 1 ELSE 0 END"
    )
    syntax = (
        "_form"
        " AND length(_whole) + length(_frac) > 0"
        " AND NOT (_sign = '-' AND concat(_whole, _frac) RLIKE '[1-9]')"
        f" AND length(_digits) <= {_MAX_SECONDS_DIGITS}"
    )
    return parts.withColumn("_due", F.expr(f"CASE WHEN {syntax} THEN {millis} END"))


def _target_ok(text: str) -> str:
    return (
        f"({text} RLIKE {_sql(_TOPIC)} AND {text} NOT IN ('.', '..')"
        f" AND NOT startswith({text}, {_sql(INTERNAL_PREFIX)}))"
    )


def parsed(records: DataFrame) -> DataFrame:
    """Add the parsed columns to a frame of schedules-topic records.

    Args:
        records: Columns ``topic``, ``gkey``, ``key``, ``value``, ``partition``,
            ``offset``, ``timestamp_ms`` and ``headers`` (Kafka's array of
            ``key``/``value`` structs).

    Records of envelope and timer-request topics come parsed already (column
    :data:`delayline.contract.arrow.PARSED`); their fields are taken from there, and a
    schedule's ``value`` becomes what it delivers.

    Returns:
        The same columns plus ``kind``, ``id``, ``due_ms``,
        ``target_topic``, ``target_key``, ``fired_offset`` (set on a cancel that
        is delayline's own tombstone) and ``read_offset`` (where the record was read).
        ``offset`` is the version's place in the order of its id's versions: for a
        copy (header ``delayline-copy-of`` naming an earlier offset), the offset of
        the version it copies, as
        :attr:`delayline.contract.checks.ScheduleFields.version_offset` has it.
    """
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark's convention

    from delayline.contract.arrow import PARSED, parsed_field  # noqa: PLC0415 - it imports us

    # Each costly piece is a column of its own, computed once a record: Spark inlines a
    # projection into the next only where that repeats nothing costly. Written as one
    # expression, each header lookup and regular expression ran several times a record
    # (benchmarks/README.md, "The validation, each piece once").
    headers_type = records.schema["headers"].dataType
    records = records.withColumn(
        "headers", F.coalesce(F.col("headers"), F.array().cast(headers_type))
    )
    once = " AND ".join(f"{_count(name)} <= 1" for name in sorted(h.CONTROL_HEADERS))
    raw = records.withColumns(
        {
            "_epoch_raw": F.expr(_first_value(h.EPOCH)),
            "_topic_raw": F.expr(_first_value(h.TARGET_TOPIC)),
            "_target_key": F.expr(_first_value(h.TARGET_KEY)),
            "_copied": F.expr(f"cast({_first_value(h.COPY_OF)} AS STRING)"),
            # Only for tombstones (CASE evaluates it for those alone).
            "_fired": F.expr(
                f"CASE WHEN value IS NULL THEN cast({_first_value(h.FIRED_OFFSET)} AS STRING) END"
            ),
            "_once": F.expr(once),
        }
    )
    texts = raw.withColumns(
        {
            "_epoch": F.expr("cast(_epoch_raw AS STRING)"),
            "_topic": F.expr("cast(_topic_raw AS STRING)"),
        }
    )
    fields = _with_due_ms(texts, "_epoch")
    schedule_ok = (
        "_once AND _epoch_raw IS NOT NULL AND is_valid_utf8(_epoch)"
        f" AND coalesce(_due <= {MAX_EPOCH_MS}, false)"
        f" AND _topic_raw IS NOT NULL AND is_valid_utf8(_topic) AND {_target_ok('_topic')}"
    )
    kind = (
        f"CASE WHEN key IS NULL OR octet_length(key) = 0 OR NOT {_utf8('key')} THEN {_sql(INVALID)}"
        f" WHEN value IS NULL THEN {_sql(CANCEL)}"
        f" WHEN {schedule_ok} THEN {_sql(SCHEDULE)} ELSE {_sql(INVALID)} END"
    )
    # A copy (a rewrite) is ordered at the offset of the version it copies.
    copy_of = f"CASE WHEN _copied RLIKE {_sql(_OFFSET)} THEN cast(_copied AS BIGINT) END"
    columns: dict[str, Column] = {
        "kind": F.expr(kind),
        "due_ms": F.col("_due"),
        "target_topic": F.col("_topic"),
        "target_key": F.col("_target_key"),
        "copy_of": F.expr(copy_of),
        "fired_offset": F.expr(
            f"CASE WHEN _fired RLIKE {_sql(_OFFSET)} THEN cast(_fired AS BIGINT) END"
        ),
    }
    value, sid = F.col("value"), F.col("key").cast("string")
    if PARSED in records.columns:  # envelope and timer-request records, parsed in Python
        theirs = F.col(PARSED).isNotNull()
        for name in ("kind", "due_ms", "target_topic", "target_key", "fired_offset"):
            columns[name] = F.when(theirs, parsed_field(name)).otherwise(columns[name])
        columns["copy_of"] = F.when(~theirs, columns["copy_of"])  # compacted topics only
        sid = F.when(theirs, parsed_field("id")).otherwise(sid)
        # A schedule's value is what it delivers; anything else keeps the record's own.
        payload = theirs & (parsed_field("kind") == SCHEDULE)
        value = F.when(payload, parsed_field("payload")).otherwise(value)
    out = fields.withColumns(columns)
    schedule, not_invalid = F.col("kind") == SCHEDULE, F.col("kind") != INVALID
    copy = schedule & (F.col("copy_of") < F.col("offset"))
    return out.select(
        "topic", "gkey", "key", value.alias("value"), "partition",
        F.when(copy, F.col("copy_of")).otherwise(F.col("offset")).alias("offset"),
        "timestamp_ms",
        "headers",
        "kind",
        F.when(not_invalid, sid).alias("id"),
        F.when(schedule, F.col("due_ms")).alias("due_ms"),
        F.when(schedule, F.col("target_topic")).alias("target_topic"),
        F.when(schedule, F.col("target_key")).alias("target_key"),
        F.when(F.col("kind") == CANCEL, F.col("fired_offset")).alias("fired_offset"),
        F.col("offset").alias("read_offset"),
    )  # fmt: skip


def without_settled_tombstones(records: DataFrame, mark: str) -> DataFrame:
    """``records`` (as :func:`parsed` takes them) without delayline's own tombstones
    marked ``mark`` (:data:`delayline.contract.headers.PLAN`) unless marked for review
    too (:data:`~delayline.contract.headers.REVIEW`): what
    :attr:`delayline.holds.hold.Hold.tombstone_mark` says need not reach the hold. One
    plain expression a record, evaluated past ``value IS NULL`` for tombstones only."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark's convention

    # Exactly the own tombstones the committer's watch tells (a key that is an id, a
    # fired offset as the parser reads it), so none dropped here goes unreviewed there.
    settled = (
        f"value IS NULL AND {_first_value(h.PLAN)} = cast({_sql(mark)} AS BINARY)"
        f" AND {_position(h.REVIEW)} = 0 AND octet_length(key) > 0 AND {_utf8('key')}"
        f" AND cast({_first_value(h.FIRED_OFFSET)} AS STRING) RLIKE {_sql(_OFFSET)}"
    )
    return records.where(F.expr(f"NOT coalesce({settled}, false)"))
