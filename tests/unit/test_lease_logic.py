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
