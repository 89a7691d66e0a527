"""The shared hold suite (tests/unit/holds) against the Redis hold, on a real Redis.

Each batch is one task of :meth:`RedisStore.run_task` (a fresh batch id), so the
records are folded and written, and the due schedules claimed, as a Spark task does.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from tests.unit.holds.conftest import MAX_LATENESS_MS, PARSE, Driver, Seen, from_row
from tests.unit.holds.test_contract_rules import *  # noqa: F403 - the suite itself
from tests.unit.holds.test_rules import *  # noqa: F403

from delayline.contract import ConsumedRecord
from delayline.holds.redis.config import RedisHoldConfig
from delayline.holds.redis.store import RedisStore


class RedisDriver:
    def __init__(self, url: str, lead_ms: int = 0) -> None:
        config = RedisHoldConfig(url=url, prefix=f"suite-{uuid.uuid4().hex[:8]}")
        self.store = RedisStore(config, PARSE, lead_ms, MAX_LATENESS_MS)
        self.batch_id = 0

    def batch(self, records: list[ConsumedRecord], now_ms: int) -> list[Seen]:
        self.batch_id += 1
        result = self.store.run_task("suite@run", "{}", self.batch_id, 0, records, now_ms)
        return [from_row(row) for row in result.events.to_pylist()]

    def held_offset(self, topic: str, schedule_id: str) -> int | None:
        held = self.store.held(topic, schedule_id.encode())
        return None if held is None or held.source is None else held.source.offset


@pytest.fixture
def make_hold(redis_url: str) -> Callable[..., Driver]:
    return lambda lead_ms=0: RedisDriver(redis_url, lead_ms)


@pytest.fixture
def hold(make_hold: Callable[[], Driver]) -> Driver:
    return make_hold()
