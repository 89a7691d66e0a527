"""A known race of the rewrite rule (found by tests/e2e/test_fuzz.py), kept as a strict
expected failure: it passes, and so fails here, the day the rule is fixed."""

from __future__ import annotations

import pytest

from delayline.contract import ConsumedRecord
from delayline.contract import headers as h
from delayline.stores import fold as k
from delayline.stores.fold import fold

NOW = 1_000_000


def record(offset: int, value: bytes, *, valid: bool = True) -> ConsumedRecord:
    headers = ((h.EPOCH, b"2000"), (h.TARGET_TOPIC, b"target")) if valid else ()
    return ConsumedRecord("schedules", 0, offset, NOW - 5, b"x", value, headers)


@pytest.mark.xfail(
    strict=True,
    reason="the copy a REWRITE appends supersedes a newer version written before it lands",
)
def test_a_newer_version_written_before_the_rewrite_copy_lands_wins() -> None:
    first = fold(None, [record(0, b"A"), record(1, b"bad", valid=False)], NOW, lead_ms=5_000)
    assert [e.kind for e in first.events] == [k.DEAD, k.REWRITE, k.PLANNED]
    # B is written at offset 2 while that batch runs; the copy of A lands at offset 3.
    second = fold(first.held, [record(2, b"B"), record(3, b"A")], NOW + 500, lead_ms=5_000)
    assert second.held is not None
    assert second.held.payload == b"B"
