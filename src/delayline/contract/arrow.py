"""The envelope and timer-request contracts in the Spark pipeline.

The header contract is checked by Spark SQL alone (:mod:`delayline.contract.columns`).
A JSON envelope or a protobuf timer request is parsed by its Python parser
(:class:`delayline.contract.contracts.InputParser`), so each rule has one definition,
over Arrow batches: one Python call per batch of records, not one per record, and only
for the records of those topics (the others pass as nulls). A pipeline that reads only
header-contract topics has no Python stage at all.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from delayline.contract.columns import CANCEL, INVALID, SCHEDULE
from delayline.contract.contracts import InputParser
from delayline.contract.records import ConsumedRecord
from delayline.core.model import Cancel, Invalid, Parsed

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from delayline.contract.topology import Topology

PARSED = "contracted"
"""The column :func:`with_contracts` adds: the parser's result (null for records of
header-contract topics)."""
_FIELDS = (
    ("kind", "string"), ("id", "string"), ("due_ms", "int64"), ("target_topic", "string"),
    ("target_key", "binary"), ("payload", "binary"), ("fired_offset", "int64"),
    ("group", "binary"),
)  # fmt: skip
"""The fields of :data:`PARSED` and their Arrow types."""
_ARGS = ("topic", "partition", "offset", "timestamp_ms", "key", "value", "headers")


def with_contracts(records: DataFrame, topology: Topology) -> DataFrame:
    """Parse the records of envelope and timer-request topics; group them by schedule id.

    Args:
        records: The input topics as read (``source.read_schedules``).
        topology: Which topics speak which contract.

    Returns:
        ``records`` unchanged when every topic speaks the header contract; else with
        column :data:`PARSED` added and ``gkey`` set to the schedule id the parser found
        (the hold groups by it: an envelope's id is in its value, a timer request's is
        where it sits).
    """
    others = [*topology.envelope_topics, *topology.timer_request_topics]
    if not others:
        return records
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark's convention

    theirs = F.col("topic").isin(others)
    parse = _parser(InputParser(topology))
    parsed = records.withColumn(PARSED, parse(*(F.when(theirs, F.col(c)) for c in _ARGS)))
    group = F.col(PARSED).getField("group")
    return parsed.withColumn("gkey", F.coalesce(group, F.col("gkey")))


def parsed_field(name: str) -> Column:
    """One field of :data:`PARSED`."""
    from pyspark.sql import functions as F  # noqa: N812, PLC0415 - Spark's convention

    return F.col(PARSED).getField(name)


def _parser(parse: InputParser) -> Any:
    """The Arrow UDF that applies ``parse`` to each record of a batch."""
    import pyarrow as pa  # noqa: PLC0415 - only where Spark runs
    from pyspark.sql.functions import arrow_udf  # type: ignore[attr-defined]  # noqa: PLC0415

    def parse_batch(*columns: Any) -> Any:
        out: list[dict[str, Any] | None] = []
        for t, p, o, ts, k, v, h in zip(*(c.to_pylist() for c in columns), strict=True):
            if t is None:  # a header-contract record: Spark SQL checks it
                out.append(None)
                continue
            record = ConsumedRecord(
                t, p, o, ts, k, v, tuple((x["key"], x["value"]) for x in h or ())
            )
            parsed = parse(record)
            out.append(parsed_row(parsed, parse.group_key(record, parsed)))
        return pa.array(out, type=_arrow_type())

    # Spark tells an Arrow UDF from its type hints, which must be the classes themselves
    # (this module's hints are strings): one pyarrow Array per column, one returned.
    named = {name: pa.Array for name in _ARGS}
    parse_one = _with_signature(parse_batch, named)
    return arrow_udf(parse_one, _spark_type())


def _with_signature(func: Any, hints: dict[str, Any]) -> Any:
    """A wrapper of ``func(*columns)`` whose signature names each column, hinted ``hints``."""

    def wrapper(*columns: Any) -> Any:
        return func(*columns)

    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in hints]
    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**hints, "return": next(iter(hints.values()))}
    return wrapper


def parsed_row(parsed: Parsed, group: bytes) -> dict[str, Any]:
    """The :data:`PARSED` fields of a parser's result; ``group`` is what the hold groups
    the record by (:meth:`delayline.contract.contracts.InputParser.group_key`)."""
    row: dict[str, Any] = dict.fromkeys(
        ("id", "due_ms", "target_topic", "target_key", "payload", "fired_offset")
    )
    row["group"] = group
    if isinstance(parsed, Invalid):
        return {**row, "kind": INVALID}
    if isinstance(parsed, Cancel):
        return {**row, "kind": CANCEL, "id": parsed.id, "fired_offset": parsed.fired_offset}
    return {
        **row,
        "kind": SCHEDULE,
        "id": parsed.id,
        "due_ms": parsed.due_ms,
        "target_topic": parsed.target_topic,
        "target_key": parsed.target_key,
        "payload": parsed.payload,
    }


def _arrow_type() -> Any:
    import pyarrow as pa  # noqa: PLC0415 - only where Spark runs

    return pa.struct([(name, getattr(pa, kind)()) for name, kind in _FIELDS])


def _spark_type() -> Any:
    """The Spark type of :data:`PARSED` (a type object: a DDL string needs a session)."""
    from pyspark.sql.pandas.types import from_arrow_type  # noqa: PLC0415

    return from_arrow_type(_arrow_type())
