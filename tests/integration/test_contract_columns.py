"""The Spark SQL contract (contract.columns) agrees with the Python parser on every record.

A few thousand generated records, rich in edge cases (Unicode digits, odd white space,
bytes that are not UTF-8, duplicates, limits), go through both; kind and every parsed
field must be equal, and the headers encoded alike.
"""

from __future__ import annotations

import random
from typing import Any

from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

from delayline.contract import ConsumedRecord, parse_record
from delayline.contract import events as rows
from delayline.contract import headers as h
from delayline.contract.columns import (
    CANCEL,
    INVALID,
    SCHEDULE,
    parsed,
    without_settled_tombstones,
)
from delayline.contract.records import own_tombstone_of, skippable_tombstone
from delayline.core.model import Cancel, Invalid, Schedule

NOT_UTF8 = [b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\xaf", b"ok\x80"]
KEYS = [None, b"", b"id", "émoji-\U0001f600".encode(), *NOT_UTF8]
EPOCHS = [
    "1893456000", "1893456000.250", " 1893456000 ", "\t5\n", "5\x0b", "5\x1c", "\xa05",
    "\u0661\u0662", "nan", "inf", "-inf", "-0", "-0.000", "-0.001", "+5", "1e5", ".", "1.",
    ".5", "", "   ", "253402300799.999", "253402300799.9991", "253402300800",
    "0000000000000000000000001", "99999999999999999999", "1.0001", "1.0000000000000000000001",
    "5\n\n", "5 5", "0x10", "1_000",
]  # fmt: skip
TOPICS = ["t", "target.topic-1_x", "__x", "_x", ".", "..", "a" * 249, "a" * 250, "bad topic",
          "é", ""]  # fmt: skip
OFFSETS = ["12", "012", "+12", " 12", "1_2", "9" * 18, "9" * 19, "", "\u0661", "12\n"]


def _value(rng: random.Random, texts: list[str]) -> bytes | None:
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.1:
        return rng.choice(NOT_UTF8)
    if roll < 0.6:  # mostly well formed, so every kind is frequent
        return texts[0].encode()
    return rng.choice(texts).encode()


def _record(rng: random.Random, offset: int) -> ConsumedRecord:
    headers: list[tuple[str, bytes | None]] = []
    for name, texts, chance, twice in (
        (h.EPOCH, EPOCHS, 0.9, 0.05),
        (h.TARGET_TOPIC, TOPICS, 0.9, 0.05),
        (h.TARGET_KEY, ["k", ""], 0.4, 0.05),
        (h.FIRED_OFFSET, OFFSETS, 0.3, 0.1),
        ("x-other", ["a"], 0.3, 0.3),
    ):
        if rng.random() < chance:
            headers.append((name, _value(rng, texts)))
            if rng.random() < twice:
                headers.append((name, _value(rng, texts)))
    rng.shuffle(headers)
    value = None if rng.random() < 0.2 else rng.choice([b"", b"payload", b"\x00\xff"])
    key = b"id" if rng.random() < 0.6 else rng.choice(KEYS)
    return ConsumedRecord("s", rng.randrange(3), offset, 1_000 + offset, key, value, tuple(headers))


def _expected(record: ConsumedRecord) -> dict[str, Any]:
    got = parse_record(record)
    out: dict[str, Any] = {"kind": INVALID, "id": None, "due_ms": None, "target_topic": None,
                           "target_key": None, "fired_offset": None}  # fmt: skip
    if isinstance(got, Schedule):
        out.update(kind=SCHEDULE, id=got.id, due_ms=got.due_ms, target_topic=got.target_topic,
                   target_key=got.target_key)  # fmt: skip
    elif isinstance(got, Cancel):
        out.update(kind=CANCEL, id=got.id, fired_offset=got.fired_offset)
    else:
        assert isinstance(got, Invalid)
    return out


def test_spark_sql_parsing_agrees_with_the_python_parser(spark: Any) -> None:
    rng = random.Random(20261122)
    records = [_record(rng, offset) for offset in range(4_000)]
    frame = parsed(spark.createDataFrame([rows.source_row(x) for x in records], rows.SOURCE_SCHEMA))
    got = {row["offset"]: row for row in frame.collect()}
    kinds: dict[str, int] = {}
    for record in records:
        row = got[record.offset]
        want = _expected(record)
        seen = {name: row[name] for name in want}
        seen["target_key"] = None if seen["target_key"] is None else bytes(seen["target_key"])
        assert seen == want, (record, seen, want)
        headers = tuple(
            (x["key"], None if x["value"] is None else bytes(x["value"])) for x in row["headers"]
        )
        assert headers == record.headers, record
        kinds[want["kind"]] = kinds.get(want["kind"], 0) + 1
    # The generator reaches every kind often: the comparison is not vacuous.
    assert min(kinds.get(kind, 0) for kind in (SCHEDULE, CANCEL, INVALID)) > 300, kinds


def test_validation_runs_no_interpreted_function_per_record(spark: Any) -> None:
    """Spark interprets a higher-order function (a lambda) row by row; validation uses
    none, tombstones included."""
    records = [ConsumedRecord("s", 0, 1, 0, b"id", None, ((h.FIRED_OFFSET, b"3"),))]
    frame = parsed(spark.createDataFrame([rows.source_row(x) for x in records], rows.SOURCE_SCHEMA))
    plan = frame._jdf.queryExecution().optimizedPlan().toString().lower()
    assert "lambdafunction" not in plan
    assert "namedlambdavariable" not in plan
    assert frame.collect()[0]["fired_offset"] == 3


def test_a_start_drops_only_its_own_marked_tombstones_before_the_hold(spark: Any) -> None:
    """The tombstones this start handed over (its mark, no review) stop before the hold;
    another start's, a review, a producer's cancel, a schedule with the mark and records
    without headers go on, as :func:`skippable_tombstone` tells the watch."""
    fired = (h.FIRED_OFFSET, b"3")
    cases = {
        "own": ((fired, (h.PLAN, b"cafe")), None, True),
        "own, mark first": (((h.PLAN, b"cafe"), fired), None, True),
        "another start's": ((fired, (h.PLAN, b"beef")), None, False),
        "reviewed": ((fired, (h.PLAN, b"cafe"), (h.REVIEW, b"1")), None, False),
        "unmarked": ((fired,), None, False),
        "a cancel": ((), None, False),
        "a value": ((fired, (h.PLAN, b"cafe")), b"v", False),
        "a null mark": ((fired, (h.PLAN, None)), None, False),
        "no fired offset": (((h.PLAN, b"cafe"),), None, False),
        "a bad fired offset": (((h.FIRED_OFFSET, b"x3"), (h.PLAN, b"cafe")), None, False),
    }
    records = [
        ConsumedRecord("s", 0, offset, 0, name.encode(), value, headers)
        for offset, (name, (headers, value, _)) in enumerate(cases.items())
    ]
    source = spark.createDataFrame([rows.source_row(x) for x in records], rows.SOURCE_SCHEMA)
    kept = without_settled_tombstones(source, "cafe")
    names = {bytes(row["key"]).decode() for row in kept.collect()}
    assert names == {name for name, (_, _, dropped) in cases.items() if not dropped}
    for name, (headers, value, dropped) in cases.items():
        # What the hold drops is what the watch looks at (an own, skippable tombstone)
        # with this start's mark.
        own = own_tombstone_of(name.encode(), headers) is not None
        mine = (h.PLAN, b"cafe") in headers
        assert (value is None and own and skippable_tombstone(headers) and mine) == dropped, name
    headerless = spark.createDataFrame(
        [rows.source_row(ConsumedRecord("s", 0, 99, 0, b"k", None, ()))], rows.SOURCE_SCHEMA
    ).withColumn("headers", F.lit(None).cast(source.schema["headers"].dataType))
    assert without_settled_tombstones(headerless, "cafe").count() == 1
    plan = kept._jdf.queryExecution().optimizedPlan().toString().lower()
    assert "lambdafunction" not in plan
