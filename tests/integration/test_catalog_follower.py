"""The catalog follower against a real broker: it applies each record once, resumes
where it stopped, and skips a record the store refuses without losing the others."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from tests.support import eventually

from delayline.catalog import CatalogFollower, FollowConfig, PendingQuery, SqliteCatalog
from delayline.catalog.events import Change, Upsert
from delayline.catalog.store import Position
from delayline.client import ClientConfig, Scheduler
from delayline.contract.topology import Topology
from delayline.dev.testing import create_topic, unique_topic


def topics(bootstrap: str) -> tuple[str, str]:
    compact = {"cleanup.policy": "compact"}
    schedules = create_topic(bootstrap, unique_topic("sched"), partitions=2, config=compact)
    return schedules, create_topic(bootstrap, unique_topic("dlq"))


def follow(store: SqliteCatalog, bootstrap: str, schedules: str, dlq: str) -> CatalogFollower:
    follower = CatalogFollower(
        store,
        FollowConfig(
            Topology(bootstrap, (schedules,), dead_letter_topic=dlq, history_topic=None),
            metadata_refresh_ms=500,
        ),
    )
    follower.start()
    return follower


def pending_ids(store: SqliteCatalog) -> list[str]:
    return sorted(p.id for p in store.pending(PendingQuery(limit=1000)).items)


def test_follows_resumes_and_applies_each_record_once(kafka_bootstrap: str, tmp_path: Path) -> None:
    schedules, dlq = topics(kafka_bootstrap)
    with Scheduler(ClientConfig(kafka_bootstrap, schedules)) as client:
        for i in range(5):
            client.schedule(f"f{i}", b"p", "t", delay=3600)
        client.cancel("f4")
    store = SqliteCatalog(tmp_path / "c.db")
    follower = follow(store, kafka_bootstrap, schedules, dlq)
    eventually(follower.caught_up.is_set, 30, "caught up")
    assert pending_ids(store) == ["f0", "f1", "f2", "f3"]
    follower.stop()

    with Scheduler(ClientConfig(kafka_bootstrap, schedules)) as client:
        client.schedule("f0", b"p2", "t", delay=7200)
    again = follow(store, kafka_bootstrap, schedules, dlq)
    eventually(lambda: [v.kind for v in store.get("f0")[1]] == ["created", "updated"], 30, "update")
    again.stop()
    assert [v.kind for v in store.get("f4")[1]] == ["created", "cancelled"]
    assert again.status().records_applied == 1  # only the new record: it resumed
    store.close()


class RefusesOneId(SqliteCatalog):
    """A real SQLite store that fails on one schedule id, as a broken record would."""

    def apply(self, changes: Sequence[Change], positions: dict[Position, int]) -> None:  # type: ignore[override]
        if any(isinstance(c, Upsert) and c.schedule.id == "poison" for c in changes):
            raise OverflowError("Python int too large to convert to SQLite INTEGER")
        super().apply(changes, positions)


def test_a_record_the_store_refuses_is_skipped_and_the_rest_applied(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    schedules, dlq = topics(kafka_bootstrap)
    with Scheduler(ClientConfig(kafka_bootstrap, schedules)) as client:
        for sid in ("a", "poison", "b", "c"):
            client.schedule(sid, b"p", "t", delay=3600)
    store = RefusesOneId(tmp_path / "c.db")
    follower = follow(store, kafka_bootstrap, schedules, dlq)
    eventually(follower.caught_up.is_set, 30, "caught up")
    follower.stop()
    assert pending_ids(store) == ["a", "b", "c"]
    status = follower.status()
    assert status.records_skipped == 1
    assert status.records_applied == 4
    # The error names the skipped record by its position, so an operator can find it.
    assert re.fullmatch(rf"skipped {schedules}/\d+/\d+: OverflowError: .*", status.last_error or "")
    store.close()
