"""Delivery lanes overlap their groups but commit in order, and a failure stops the
groups after it from committing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from delayline.committer.lanes import Lanes
from delayline.fire.report import Delivered
from delayline.fire.topic_catalog import TopicCatalog


class _Writer:
    """Stands in for a lane's transactional writer."""

    def __init__(self) -> None:
        self.closed = False
        self.looked_up: set[str] = set()

    def close(self) -> None:
        self.closed = True

    def load_metadata(self, topics: Any) -> None:
        self.looked_up |= set(topics)

    def unseen(self, topics: Any) -> set[str]:
        return set(topics) - self.looked_up


def lanes_of(n: int) -> tuple[Lanes, list[_Writer]]:
    writers = [_Writer() for _ in range(n)]
    catalog = TopicCatalog(lambda topics, auth: {})
    return Lanes(writers, catalog), writers  # type: ignore[arg-type]


def drain(lanes: Lanes, expected: int, timeout_s: float = 5) -> list[Delivered]:
    out: list[Delivered] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < expected and time.monotonic() < deadline:
        out.extend(lanes.finished())
        time.sleep(0.005)
    return out


def test_a_later_group_written_first_still_commits_after_the_one_before() -> None:
    lanes, _ = lanes_of(2)
    commits: list[int] = []
    lock = threading.Lock()

    def job(n: int, write_s: float) -> Callable[[Any, Callable[[], None]], Delivered]:
        def run(_writer: Any, after_before: Callable[[], None]) -> Delivered:
            time.sleep(write_s)  # the first group writes slowly
            after_before()
            with lock:
                commits.append(n)
            return Delivered(n, 0)

        return run

    lanes.submit(job(1, 0.2))
    lanes.submit(job(2, 0.0))
    reports = drain(lanes, 2)
    assert commits == [1, 2]
    assert [r.delivered for r in reports] == [1, 2]
    lanes.close()


def test_a_failed_group_fails_the_next_and_is_raised_in_order() -> None:
    lanes, writers = lanes_of(2)
    committed: list[int] = []

    def failing(_writer: Any, after_before: Callable[[], None]) -> Delivered:
        raise RuntimeError("transaction aborted")

    def next_group(_writer: Any, after_before: Callable[[], None]) -> Delivered:
        after_before()
        committed.append(2)
        return Delivered(1, 0)

    lanes.submit(failing)
    lanes.submit(next_group)
    lanes.wait_ready(5)  # the first lane is next again once its group ended
    with pytest.raises(RuntimeError, match="aborted"):
        drain(lanes, 1)
    assert committed == [], "a group after a failed one must not commit"
    lanes.close()
    assert all(w.closed for w in writers)


def test_the_next_lane_is_ready_only_when_its_last_group_is_done() -> None:
    lanes, _ = lanes_of(2)
    release = threading.Event()

    def slow(_writer: Any, after_before: Callable[[], None]) -> Delivered:
        release.wait(5)
        return Delivered(1, 0)

    lanes.submit(slow)
    assert lanes.ready(), "the second lane is free"
    lanes.submit(slow)
    assert not lanes.ready(), "both lanes busy: the first is next"
    assert lanes.busy()
    release.set()
    lanes.wait_ready(5)
    assert lanes.ready()
    assert len(drain(lanes, 2)) == 2
    lanes.close()


def test_a_topic_is_unseen_while_any_lanes_producer_has_not_looked_it_up() -> None:
    lanes, writers = lanes_of(3)
    assert lanes.unseen(["orders"]) == {"orders"}
    lanes.load_metadata(["orders"])
    assert lanes.unseen(["orders", "refunds"]) == {"refunds"}
    writers[1].looked_up.clear()  # as a producer replaced after a fatal error
    assert lanes.unseen(["orders", "refunds"]) == {"orders", "refunds"}
