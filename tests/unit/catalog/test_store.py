"""The shared suite every catalog store passes (see conftest.STORES)."""

from __future__ import annotations

import base64
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from delayline.catalog import MAX_PAGE, CatalogStore, Pending, PendingQuery, SqliteCatalog
from delayline.contract.headers import WINDOW
from delayline.errors import CatalogError, ConfigError, FormatVersionError
from tests.unit.catalog.records import (
    SCHEDULES,
    cancel,
    changes,
    dead,
    fired,
    schedule,
)


def ids(store: CatalogStore, **query: object) -> list[str]:
    return [p.id for p in store.pending(PendingQuery(**query)).items]  # type: ignore[arg-type]


def kinds(store: CatalogStore, sid: str) -> list[str]:
    return [v.kind for v in store.get(sid)[1]]


def test_new_version_replaces_old_and_keeps_creation_time(store: CatalogStore) -> None:
    store.apply(changes(schedule("a", 0, 50_000, ts=1_000)), {(SCHEDULES, 0): 1})
    store.apply(changes(schedule("a", 1, 60_000, ts=5_000, payload=b"v2")), {(SCHEDULES, 0): 2})
    (current,), versions = store.get("a")
    assert (current.offset, current.due_ms, current.created_ms, current.updated_ms) == (
        1,
        60_000,
        1_000,
        5_000,
    )
    assert current.payload == b"v2"
    assert [v.kind for v in versions] == ["created", "updated"]
    assert store.positions() == {(SCHEDULES, 0): 2}


def test_cancel_removes_and_is_recorded_only_when_something_was_pending(
    store: CatalogStore,
) -> None:
    store.apply(changes(schedule("a", 0, 50_000), cancel("a", 1), cancel("ghost", 2)), {})
    assert store.get("a")[0] == []
    assert kinds(store, "a") == ["created", "cancelled"]
    assert kinds(store, "ghost") == []


def test_own_tombstone_spares_a_newer_version(store: CatalogStore) -> None:
    store.apply(
        changes(schedule("a", 0, 50_000), schedule("a", 1, 90_000), cancel("a", 2, fired_offset=0)),
        {},
    )
    (current,), _ = store.get("a")
    assert current.offset == 1
    store.apply(changes(cancel("a", 3, fired_offset=1)), {})
    assert store.get("a")[0] == []


def test_cancel_written_by_another_partitioner_removes_the_pending_version(
    store: CatalogStore,
) -> None:
    """Scheduled into partition 2 (a high offset), cancelled into partition 0 (a low one)."""
    store.apply(changes(schedule("a", 900, 50_000, partition=2, ts=1_000)), {})
    store.apply(changes(cancel("a", 3, partition=0, ts=2_000)), {})
    assert store.get("a")[0] == []
    assert kinds(store, "a") == ["created", "cancelled"]


def test_an_older_cancel_of_another_partition_spares_the_pending_version(
    store: CatalogStore,
) -> None:
    store.apply(changes(schedule("a", 0, 50_000, partition=2, ts=5_000)), {})
    store.apply(changes(cancel("a", 900, partition=0, ts=2_000)), {})
    (current,), _ = store.get("a")
    assert (current.partition, current.offset) == (2, 0)


def test_versions_across_partitions_are_ordered_by_timestamp(store: CatalogStore) -> None:
    """The follower reads partitions independently: an older version of another
    partition may arrive after a newer one and must not replace it."""
    store.apply(changes(schedule("a", 900, 50_000, partition=1, ts=1_000)), {})
    store.apply(changes(schedule("a", 5, 60_000, partition=3, ts=3_000, payload=b"v2")), {})
    store.apply(changes(schedule("a", 7, 70_000, partition=0, ts=2_000, payload=b"v1")), {})
    (current,), _ = store.get("a")
    assert (current.partition, current.offset, current.payload) == (3, 5, b"v2")


def test_own_tombstone_ends_only_the_version_of_its_partition(store: CatalogStore) -> None:
    store.apply(changes(schedule("a", 4, 50_000, partition=2, ts=5_000)), {})
    store.apply(changes(cancel("a", 9, fired_offset=6, partition=0, ts=6_000)), {})
    (current,), _ = store.get("a")
    assert (current.partition, current.offset) == (2, 4)


def test_fired_from_history_records_lateness(store: CatalogStore) -> None:
    store.apply(changes(schedule("a", 0, 50_000), fired("a", 0, 50_000, at_ms=50_420)), {})
    pending, versions = store.get("a")
    assert pending == []
    assert versions[-1].kind == "fired"
    assert versions[-1].lateness_ms == 420


def test_without_history_own_tombstone_is_recorded_as_finished(store: CatalogStore) -> None:
    records = (schedule("a", 0, 50_000), cancel("a", 1, fired_offset=0))
    store.apply(changes(*records, history_followed=False), {})
    assert kinds(store, "a") == ["created", "finished"]


def test_dead_letter_of_newer_invalid_record_keeps_held_version(store: CatalogStore) -> None:
    store.apply(changes(schedule("a", 0, 50_000), dead("a", 1, "missing header x")), {})
    (current,), versions = store.get("a")
    assert current.offset == 0
    assert versions[-1].kind == "dead-lettered"
    assert versions[-1].reason == "missing header x"
    store.apply(changes(dead("a", 0, "expired", offset=1)), {})
    assert store.get("a")[0] == []
    page = store.dead_letters()
    assert [d.reason for d in page.items] == ["expired", "missing header x"]
    assert page.items[0].source == f"{SCHEDULES}/0/0"


def test_dead_letters_filter_and_page(store: CatalogStore) -> None:
    store.apply(
        changes(
            *(dead(f"d{i}", i, "expired" if i % 2 else "bad", offset=i, at_ms=i) for i in range(7))
        ),
        {},
    )
    assert len(store.dead_letters(reason="expired").items) == 3
    first = store.dead_letters(limit=4)
    assert first.next_cursor is not None
    rest = store.dead_letters(limit=4, cursor=first.next_cursor)
    assert rest.next_cursor is None
    seen = [d.schedule_id for d in [*first.items, *rest.items]]
    assert seen == [f"d{i}" for i in reversed(range(7))]


@pytest.mark.parametrize("sort", ["due", "id", "created"])
@pytest.mark.parametrize("descending", [False, True])
def test_walking_every_page_yields_each_schedule_once_in_order(
    store: CatalogStore, sort: str, descending: bool
) -> None:
    # Few distinct due and creation times, so ties must be broken consistently.
    records = [schedule(f"s{i:03d}", i, 10_000 + (i % 7) * 1_000, ts=i % 5) for i in range(250)]
    store.apply(changes(*records), {})
    walked: list[tuple[object, ...]] = []
    cursor = None
    while True:
        page = store.pending(
            PendingQuery(sort=sort, descending=descending, limit=60, cursor=cursor)  # type: ignore[arg-type]
        )
        key: Callable[[Pending], tuple[object, ...]] = {
            "due": lambda p: (p.due_ms, p.id),
            "id": lambda p: (p.id,),
            "created": lambda p: (p.created_ms, p.id),
        }[sort]
        walked.extend(key(p) for p in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(walked) == 250
    assert walked == sorted(walked, reverse=descending)
    assert len(set(walked)) == 250


def test_filters(store: CatalogStore) -> None:
    records = [
        schedule("order-1", 0, 10_000, target="orders"),
        schedule("order-2", 1, 20_000, target="orders"),
        schedule("refund-1", 2, 30_000, target="refunds"),
        schedule("xorder-3", 3, 40_000, target="orders"),
    ]
    store.apply(changes(*records), {})
    assert ids(store, id_prefix="order-") == ["order-1", "order-2"]
    assert ids(store, id_contains="order-") == ["order-1", "order-2", "xorder-3"]
    assert ids(store, due_from_ms=20_000, due_to_ms=40_000) == ["order-2", "refund-1"]
    assert ids(store, target_topic="orders", sort="id", descending=True) == [
        "xorder-3",
        "order-2",
        "order-1",
    ]
    assert ids(store, id_prefix="order-", target_topic="refunds") == []


@pytest.mark.parametrize("limit", [0, MAX_PAGE + 1])
def test_limit_out_of_range_is_a_config_error(store: CatalogStore, limit: int) -> None:
    with pytest.raises(ConfigError, match="limit"):
        store.pending(PendingQuery(limit=limit))
    with pytest.raises(ConfigError, match="limit"):
        store.dead_letters(limit=limit)


@pytest.mark.parametrize(
    "cursor", ["%%%", "bm90IGpzb24", "WzFd", "WyJhIiwgMSwgMl0", "W251bGwsMSwyXQ"]
)
def test_foreign_cursors_are_config_errors(store: CatalogStore, cursor: str) -> None:
    with pytest.raises(ConfigError, match="cursor"):
        store.pending(PendingQuery(cursor=cursor, sort="due"))


def test_apply_is_all_or_nothing(store: CatalogStore) -> None:
    store.apply(changes(schedule("a", 0, 1)), {(SCHEDULES, 0): 1})
    broken = [*changes(schedule("b", 1, 1)), object()]
    with pytest.raises(CatalogError, match="not a catalog change"):
        store.apply(broken, {(SCHEDULES, 0): 2})  # type: ignore[arg-type]
    assert ids(store) == ["a"]
    assert store.positions() == {(SCHEDULES, 0): 1}


def test_stats(store: CatalogStore) -> None:
    minute = 60_000
    now = 100 * minute + 30_000
    records = [
        schedule("a", 0, 1),
        schedule("b", 1, 1),
        schedule("c", 2, 1),
        fired("a", 0, 99 * minute, at_ms=99 * minute + 50),
        fired("b", 1, 100 * minute, at_ms=100 * minute + 700, offset=1),
        fired("old", 9, 10 * minute, at_ms=10 * minute, offset=2),
        dead("z", 5, "bad"),
    ]
    store.apply(changes(*records), {})
    stats = store.stats(now, window_minutes=3)
    assert stats.pending == 1
    assert stats.dead_letters == 1
    assert stats.fired_per_minute == [(98 * minute, 0), (99 * minute, 1), (100 * minute, 1)]
    assert sum(stats.lateness_counts) == 2
    assert len(stats.lateness_counts) == len(stats.lateness_buckets_ms) + 1
    bucket_50 = next(i for i, b in enumerate(stats.lateness_buckets_ms) if b >= 50)
    bucket_700 = next(i for i, b in enumerate(stats.lateness_buckets_ms) if b >= 700)
    assert stats.lateness_counts[bucket_50] == 1
    assert stats.lateness_counts[bucket_700] == 1


def test_readers_run_beside_the_writer(store: CatalogStore) -> None:
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while not done.is_set():
                page = store.pending(PendingQuery(limit=MAX_PAGE))
                # A page is one consistent snapshot: whole batches of 10 only.
                assert len(page.items) % 10 == 0
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    for batch in range(50):
        store.apply(changes(*(schedule(f"s{batch}-{i}", batch * 10 + i, 5) for i in range(10))), {})
    done.set()
    reader.join()
    assert errors == []
    assert len(store.pending(PendingQuery(limit=MAX_PAGE)).items) == 500


def test_sqlite_file_survives_reopen_and_refuses_other_schema(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    first = SqliteCatalog(path)
    first.apply(changes(schedule("a", 0, 1)), {(SCHEDULES, 0): 1})
    first.close()
    again = SqliteCatalog(path)
    assert again.positions() == {(SCHEDULES, 0): 1}
    assert ids(again) == ["a"]
    again.close()
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 99")
    with pytest.raises(FormatVersionError, match="written by a newer delayline") as raised:
        SqliteCatalog(path)
    assert "delete it: it is rebuilt" in str(raised.value)


def test_a_catalog_of_an_older_schema_is_rebuilt_from_the_topics(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    first = SqliteCatalog(path)
    first.apply(changes(schedule("a", 0, 1)), {(SCHEDULES, 0): 1})
    first.close()
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 2")  # before delivery windows were kept
    again = SqliteCatalog(path)
    assert again.positions() == {}  # read again from the start of every topic
    assert ids(again) == []
    again.close()


def test_the_window_a_schedule_states_is_listed(store: CatalogStore) -> None:
    store.apply(
        changes(
            schedule("w", 0, 5_000, extra=((WINDOW, b"15m"),)),
            schedule("refused", 1, 6_000, extra=((WINDOW, b"2h"),)),  # a dead letter when due
            schedule("plain", 2, 7_000),
        ),
        {},
    )
    listed = {p.id: p.window_ms for p in store.pending(PendingQuery()).items}
    assert listed == {"w": 900_000, "refused": None, "plain": None}
    (current,), _ = store.get("w")
    assert current.window_ms == 900_000


def test_prune_forgets_old_history_but_never_what_is_pending(store: CatalogStore) -> None:
    store.apply(
        changes(
            schedule("kept", 0, 90_000, ts=1_000),
            schedule("gone", 1, 50_000, ts=1_000),
            fired("gone", 1, 50_000, at_ms=50_100),
            dead("x", 7, "bad", at_ms=2_000),
            schedule("new", 2, 90_000, ts=80_000),
        ),
        {},
    )
    removed = store.prune(before_ms=60_000)
    assert removed == 4  # two versions of "gone"; the dead letter and its version for "x"
    assert kinds(store, "gone") == []
    assert kinds(store, "x") == []
    assert kinds(store, "kept") == ["created"]  # old, but still pending
    assert kinds(store, "new") == ["created"]
    assert store.dead_letters().items == []
    assert store.prune(before_ms=60_000) == 0


def test_cursor_of_one_order_is_refused_by_another(store: CatalogStore) -> None:
    store.apply(changes(*(schedule(f"s{i}", i, 1_000 + i) for i in range(5))), {})
    cursor = store.pending(PendingQuery(limit=2)).next_cursor
    assert cursor is not None
    for other in (
        PendingQuery(cursor=cursor, sort="created"),
        PendingQuery(cursor=cursor, descending=True),
    ):
        with pytest.raises(ConfigError, match="another sort order"):
            store.pending(other)


@pytest.mark.parametrize(
    "cursor",
    [
        # {"k": "due_ms,id,topic", "d": false, "v": [huge, "a", "b"]}
        "eyJrIjogImR1ZV9tcyxpZCx0b3BpYyIsICJkIjogZmFsc2UsICJ2IjogWzk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5LCAiYSIsICJiIl19",
        "W" * 4 + "1" * 3,
    ],
)
def test_cursors_with_huge_numbers_or_deep_nesting_are_config_errors(
    store: CatalogStore, cursor: str
) -> None:
    deep = base64.urlsafe_b64encode(b"[" * 100_000).decode()
    for bad in (cursor, deep):
        with pytest.raises(ConfigError, match="cursor"):
            store.pending(PendingQuery(cursor=bad))


def test_prefix_filter_is_exact_at_the_edges(store: CatalogStore) -> None:
    names = ["ab", "ab\U0010ffff", "ab\U0010ffffz", "ac", "a\U0010ffff"]
    store.apply(changes(*(schedule(n, i, 5) for i, n in enumerate(names))), {})
    assert ids(store, id_prefix="ab", sort="id") == ["ab", "ab\U0010ffff", "ab\U0010ffffz"]
    assert ids(store, id_prefix="a\U0010ffff") == ["a\U0010ffff"]
    with pytest.raises(ConfigError, match="NUL"):
        store.pending(PendingQuery(id_prefix="a\x00"))


def test_versions_are_listed_without_payloads_and_capped(store: CatalogStore) -> None:
    records = [schedule("hot", i, 10_000 + i, payload=b"x" * 100) for i in range(1_005)]
    store.apply(changes(*records), {})
    (current,), versions = store.get("hot")
    assert current.payload == b"x" * 100
    assert current.offset == 1_004
    assert len(versions) == 1_000
    assert versions[-1].offset == 1_004
    assert {v.payload_size for v in versions} == {100}
    assert [p.offset for p in store.locate("hot")] == [1_004]
