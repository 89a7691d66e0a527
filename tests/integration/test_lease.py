"""The query name's lease against a real group coordinator."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest

from delayline.dev.testing import create_topic, unique_topic
from delayline.pipeline.lease import QueryLease, QueryNameInUseError

SESSION_MS = 6_000  # the broker's least group.min.session.timeout.ms


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    return create_topic(kafka_bootstrap, unique_topic("commits"))


@pytest.fixture
def name() -> str:
    return f"lease-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def holder(kafka_bootstrap: str, topic: str, name: str) -> Iterator[QueryLease]:
    lease = QueryLease(kafka_bootstrap, name, "/ckpt/one", session_timeout_ms=SESSION_MS)
    lease.check()
    lease.hold(topic)
    try:
        yield lease
    finally:
        lease.release()


def wait_member(lease: QueryLease, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not lease._members():  # joining takes a rebalance
        assert time.monotonic() < deadline, "the holder never became a member"
        time.sleep(0.2)


def test_a_running_holder_refuses_a_second_start_at_once_naming_it(
    kafka_bootstrap: str, holder: QueryLease, name: str
) -> None:
    wait_member(holder)
    second = QueryLease(kafka_bootstrap, name, "/ckpt/two", session_timeout_ms=SESSION_MS)
    began = time.monotonic()
    with pytest.raises(QueryNameInUseError) as refused:
        second.check()
    # Not a speed bound: refusing a holder that may be dead waits SESSION_MS + 3 s (9 s),
    # one known alive is refused after one look at the group, so under 6 s tells them apart.
    assert time.monotonic() - began < SESSION_MS / 1000, "a live local holder needs no wait"
    message = str(refused.value)
    assert f"pid {os.getpid()}" in message
    assert "/ckpt/one" in message
    assert "--query-name" in message


def test_a_holder_whose_process_is_gone_is_ignored_and_a_release_frees_the_name(
    kafka_bootstrap: str, holder: QueryLease, name: str
) -> None:
    wait_member(holder)
    second = QueryLease(kafka_bootstrap, name, "/ckpt/two", session_timeout_ms=SESSION_MS)
    second.check(alive=lambda _pid: False)  # as after a SIGKILL of the holder
    holder.release()
    second.check()  # a clean stop leaves the group at once


def test_another_name_is_free(kafka_bootstrap: str, holder: QueryLease) -> None:
    wait_member(holder)
    other = QueryLease(kafka_bootstrap, f"{holder.query_name}-b", "/ckpt/three")
    other.check()
