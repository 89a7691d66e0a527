"""Reading one's own writes through the catalog: the follower's wait for given offsets
is woken by each applied batch and always bounded; the API's wait says 503, never a
made-up 404, when the catalog does not get there. No broker: nothing listens at the
bootstrap address, and nothing may be asked of it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from delayline.api import state
from delayline.api.config import ApiConfig
from delayline.api.state import ApiState
from delayline.api.writes import Writers
from delayline.catalog import CatalogFollower, FollowConfig, SqliteCatalog
from delayline.contract.topology import Topology
from delayline.core.clock import SystemClock
from delayline.errors import CatalogError

NOWHERE = Topology("127.0.0.1:9")
SCHEDULES = ("delayline-schedules", 0)
DEAD_LETTERS = ("delayline-dead-letters", 0)


@pytest.fixture
def follower(tmp_path: Path) -> Iterator[CatalogFollower]:
    store = SqliteCatalog(tmp_path / "catalog.db")
    yield CatalogFollower(store, FollowConfig(NOWHERE))
    store.close()


def test_a_wait_ends_when_a_batch_reaches_the_offsets(follower: CatalogFollower) -> None:
    follower._publish_read({SCHEDULES: 3}, {})
    assert follower.wait_read({SCHEDULES: 3}, 0)
    later = threading.Timer(0.2, follower._publish_read, ({SCHEDULES: 7}, {}))
    later.start()
    began = time.monotonic()
    assert follower.wait_read({SCHEDULES: 7}, 5)
    assert time.monotonic() - began < 2  # woken by the batch, not by the timeout
    later.join()


def test_a_wait_is_bounded_and_never_goes_back(follower: CatalogFollower) -> None:
    follower._publish_read({SCHEDULES: 10}, {})
    follower._publish_read({SCHEDULES: 4}, {})  # a restarted consumer, not yet read far
    assert follower.wait_read({SCHEDULES: 10}, 0)
    began = time.monotonic()
    assert not follower.wait_read({SCHEDULES: 11}, 0.3)
    assert 0.25 < time.monotonic() - began < 2


def test_a_partition_whose_tail_is_transaction_markers_counts_as_read_to_its_end(
    follower: CatalogFollower,
) -> None:
    follower._publish_read({SCHEDULES: 5, DEAD_LETTERS: 2}, {SCHEDULES: 6})
    assert follower.wait_read({SCHEDULES: 6}, 0)
    assert follower.followed_inputs() == [SCHEDULES]


def test_the_api_wait_is_bounded_without_a_running_follower(
    follower: CatalogFollower, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never started (as for a catalog followed elsewhere): 503 within the bound,
    without asking Kafka."""
    monkeypatch.setattr(state, "CATALOG_WAIT_S", 0.3)
    config = ApiConfig(topology=NOWHERE, catalog_path=tmp_path / "catalog.db", port=0)
    api = ApiState(config, follower.store, follower, Writers("127.0.0.1:9", 1000), SystemClock())
    began = time.monotonic()
    with pytest.raises(CatalogError, match=r"within 0\.3 s; retry in a moment"):
        api.read_own_writes()
    assert time.monotonic() - began < 2
    assert api._admin is None
