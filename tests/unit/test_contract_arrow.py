"""The Arrow stage that parses envelope and timer-request records in the pipeline, run
on Arrow arrays as Spark would hand them over (no JVM)."""

from __future__ import annotations

import pyarrow as pa

from delayline.contract.arrow import _parser
from delayline.contract.contracts import InputParser
from delayline.contract.topology import Topology

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def test_it_parses_their_records_and_leaves_the_others_to_spark_sql() -> None:
    udf = _parser(InputParser(Topology(envelope_topics=("env",), timer_request_topics=("t",))))
    assert udf.evalType == 250  # an Arrow UDF, built without a session
    rows = [
        ("env", 0, 5, 1_000, None, b'{"topic":"out","message":"m","countdown":2,"key":"k"}'),
        ("env", 1, 6, 1_000, b"x", b'{"id":"x","cancel":true}'),
        ("env", 1, 7, 1_000, b"x", b"not json"),
        ("t", 0, 8, 1_000, b"7", b"\x0a\x03out\x1a\x02cb"),
        (None, None, None, None, None, None),  # a header-contract record, masked out
    ]
    columns = [pa.array(c) for c in zip(*rows, strict=True)]
    headers = pa.array([[{"key": "h", "value": b"v"}]] * 4 + [None], HEADERS)
    out = udf.func(*columns[:4], pa.array(columns[4], pa.binary()), columns[5], headers)
    got = out.to_pylist()
    assert got[0] == {"kind": "schedule", "id": "env:0:5", "due_ms": 3_000, "target_topic": "out",
                      "target_key": b"k", "payload": b"m", "fired_offset": None,
                      "group": b"env:0:5"}  # fmt: skip
    assert (got[1]["kind"], got[1]["id"], got[1]["group"]) == ("cancel", "x", b"x")
    # An invalid record is grouped alone, by where it sits, never with schedule "x".
    assert (got[2]["kind"], got[2]["id"], got[2]["group"]) == ("invalid", None, b"env:1:7")
    assert (got[3]["kind"], got[3]["due_ms"], got[3]["payload"]) == ("schedule", 7_000, b"cb")
    assert got[4] is None
