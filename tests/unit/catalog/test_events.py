"""Records of the followed topics into catalog changes: never raises on any input."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from delayline.catalog.events import AddDeadLetter, Remove, Role, changes_for, parse_source
from delayline.contract import ConsumedRecord
from delayline.contract import headers as h

header_names = st.sampled_from(
    [h.EPOCH, h.TARGET_TOPIC, h.TARGET_KEY, h.SOURCE, h.ERROR, h.FIRED_OFFSET, "x"]
)
records = st.builds(
    ConsumedRecord,
    topic=st.just("t"),
    partition=st.integers(0, 5),
    offset=st.integers(0, 10**9),
    timestamp_ms=st.integers(0, 2**41),
    key=st.none() | st.binary(max_size=20),
    value=st.none() | st.binary(max_size=20),
    headers=st.lists(st.tuples(header_names, st.none() | st.binary(max_size=30))).map(tuple),
)


@given(records, st.sampled_from(list(Role)), st.booleans())
def test_any_record_of_any_topic_gives_changes_without_raising(
    record: ConsumedRecord, role: Role, history: bool
) -> None:
    changes = changes_for(record, role, history_followed=history)
    if role is Role.DEAD_LETTER:
        assert isinstance(changes[0], AddDeadLetter)


def test_parse_source() -> None:
    assert parse_source("orders/2/41") == ("orders", 2, 41)
    assert parse_source("a.b_c-d/0/0") == ("a.b_c-d", 0, 0)
    for bad in ["", "orders", "orders/2", "/2/41", "orders/x/1", "orders/1/-3"]:
        assert parse_source(bad) is None


def test_invalid_dead_letter_removes_only_the_exact_version() -> None:
    record = ConsumedRecord(
        "dlq", 0, 7, 1_000, b"id-1", b"v", ((h.ERROR, b"bad"), (h.SOURCE, b"sched/1/99"))
    )
    _, remove = changes_for(record, Role.DEAD_LETTER, history_followed=True)
    assert isinstance(remove, Remove)
    assert (remove.id, remove.topic, remove.partition, remove.offset, remove.mode) == (
        "id-1", "sched", 1, 99, "exact",
    )  # fmt: skip
