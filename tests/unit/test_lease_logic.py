"""How the query-name lease judges the members it finds (pure logic)."""

from __future__ import annotations

from delayline.pipeline.lease import Holder, judge


def test_members_are_judged_by_host_and_pid() -> None:
    here = Holder("host-a", 10, "/c").client_id()
    gone = Holder("host-a", 11, "/c").client_id()
    there = Holder("host-b", 10, "/c").client_id()
    running, maybe = judge([here, gone, there, "rdkafka"], "host-a", lambda pid: pid == 10)
    assert running == ["pid 10 on host host-a, checkpoint /c"]
    assert maybe == ["pid 10 on host host-b, checkpoint /c", "a client 'rdkafka'"]
    assert Holder.parse(Holder("h", 1, "/a|b").client_id()) == Holder("h", 1, "/a|b")


def test_a_member_that_is_this_process_is_a_dead_predecessor() -> None:
    """A container restarted in its pod: same host name, checkpoint and PID as the holder
    that died; it has not joined yet, so that member cannot be itself. Another PID, or
    another checkpoint (two pipelines of one process), is a running holder."""
    before = Holder("pod-0", 1, "/c").client_id()
    running, maybe = judge([before], "pod-0", lambda pid: True, Holder("pod-0", 1, "/c"))
    assert (running, maybe) == ([], [])
    for me in (Holder("pod-0", 7, "/c"), Holder("pod-0", 1, "/other")):
        running, _ = judge([before], "pod-0", lambda pid: True, me)
        assert running == ["pid 1 on host pod-0, checkpoint /c"]
