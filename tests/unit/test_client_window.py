"""The clients' ``window_ms=``: the ``delayline-window`` header they write, and a window
refused before anything is queued. No broker: nothing listens at the bootstrap address,
and nothing may be sent to it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest

from delayline.client import AsyncScheduler, ClientConfig, Scheduler
from delayline.client._core import SchedulerCore, own_of
from delayline.contract import ConsumedRecord, parse_record
from delayline.contract.headers import GROUP, WINDOW
from delayline.contract.pacing import MAX_WINDOW_MS, WindowError, window_of
from delayline.core.model import Schedule
from delayline.core.recurrence import Recurrence
from delayline.errors import InvalidScheduleError

NOWHERE = ClientConfig(bootstrap_servers="127.0.0.1:9")
"""The discard port: a client that reached for the cluster would fail the test."""
DUE = 1_893_456_000_000


@pytest.fixture
def scheduler(monkeypatch: pytest.MonkeyPatch) -> Iterator[Scheduler]:
    made = Scheduler(NOWHERE)
    sent: list[str] = []
    monkeypatch.setattr(made, "_send", lambda schedule_id, _record: sent.append(schedule_id))
    yield made
    assert sent == [], "a refused schedule was queued"
    made.close()


def written(core: SchedulerCore, window_ms: int | None) -> tuple[tuple[str, bytes | None], ...]:
    """The headers of the schedules-topic record for a schedule with ``window_ms``."""
    core._partitions = 3  # the schedules topic's partitions, as if looked up
    _, record = core.schedule_record(
        "a", b"p", "orders", DUE, None, [("trace", "t1")], None, own_of(None, "g", window_ms)
    )
    return tuple(record.headers)


@pytest.mark.parametrize(
    ("window_ms", "text"), [(1500, b"1500ms"), (900_000, b"15m"), (MAX_WINDOW_MS, b"1h")]
)
def test_the_window_is_written_as_its_header_and_read_back(window_ms: int, text: bytes) -> None:
    core = SchedulerCore(NOWHERE, None)
    headers = written(core, window_ms)
    assert [v for n, v in headers if n == WINDOW] == [text]
    assert [v for n, v in headers if n == GROUP] == [b"g"]  # the other own headers stay
    record = ConsumedRecord("s", 0, 0, 0, b"a", b"p", headers)
    parsed = parse_record(record)  # as the pipeline reads it
    assert isinstance(parsed, Schedule)
    assert window_of(parsed.headers) == window_ms


def test_without_a_window_there_is_no_header() -> None:
    assert all(name != WINDOW for name, _ in written(SchedulerCore(NOWHERE, None), None))
    assert own_of(Recurrence(every_ms=60_000), None, None) == (("delayline-every", b"1m"),)


@pytest.mark.parametrize(
    ("window_ms", "says"),
    [
        (0, "within 1ms..1h, not 0ms"),
        (-5, "within 1ms..1h"),
        (MAX_WINDOW_MS + 1, "within 1ms..1h, not 1h"),
        (1.5, "must be an int of milliseconds"),
        (True, "must be an int of milliseconds"),
    ],
)
def test_a_refused_window_fails_before_anything_is_queued(
    scheduler: Scheduler, window_ms: Any, says: str
) -> None:
    with pytest.raises(WindowError, match=re.escape(says)) as refused:
        scheduler.schedule("a", b"p", "orders", delay=60, window_ms=window_ms)
    assert isinstance(refused.value, InvalidScheduleError)  # what callers already catch


def test_the_async_client_refuses_it_before_asking_the_cluster() -> None:
    async def attempt() -> None:
        async with AsyncScheduler(NOWHERE) as client:
            with pytest.raises(WindowError, match=re.escape("within 1ms..1h, not 2h")):
                await client.schedule("a", b"p", "orders", delay=60, window_ms=2 * MAX_WINDOW_MS)
            assert not client._core.partitions_known  # it never looked the topic up

    asyncio.run(attempt())
