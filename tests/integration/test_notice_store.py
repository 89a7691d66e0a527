"""The notice rules' topic on a real broker: what a pipeline's start writes there
(:func:`delayline.pipeline.notice.settle_notice`) and what a committer's follower reads
(:class:`delayline.kafka.notice_store.NoticeFollower`)."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclOperation,
    AclPermissionType,
    AdminClient,
)
from tests.support import ends_now, eventually, topic_acls

from delayline.contract.notice import Epoch, NoticeRules
from delayline.contract.topology import Topology
from delayline.dev.testing import create_topic, unique_topic
from delayline.errors import TopicConfigError, TopicDeniedError
from delayline.kafka.notice_store import NoticeFollower, read_notice_rules, write_notice_rules
from delayline.kafka.topics import ensure_notice_topic
from delayline.pipeline.config import PipelineConfig
from delayline.pipeline.notice import input_ends, run_notice, settle_notice


def _never() -> dict[str, dict[int, int]]:
    raise AssertionError("the input's ends were asked: a new epoch was written")


def _exists(bootstrap: str, topic: str) -> bool:
    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def test_no_rules_anywhere_and_no_notice_writes_nothing(kafka_bootstrap: str) -> None:
    topic = unique_topic("notice")
    assert read_notice_rules(kafka_bootstrap, topic) == NoticeRules()
    assert settle_notice(kafka_bootstrap, topic, 0, 2, _never) == NoticeRules()
    assert not _exists(kafka_bootstrap, topic), "the topic is made only to write rules"


def test_a_new_notice_is_marked_pending_before_the_input_ends_are_read(
    kafka_bootstrap: str,
) -> None:
    """A follower asked while the ends are read sees the rules pending; after, the epoch
    that starts at those ends. The same notice again writes nothing."""
    topic = unique_topic("notice")
    follower = NoticeFollower(kafka_bootstrap, topic)
    assert follower.rules() == NoticeRules()
    seen: list[NoticeRules] = []

    def ends() -> dict[str, dict[int, int]]:
        seen.append(follower.rules())
        return {"orders": {0: 7, 1: 3}}

    settled = settle_notice(kafka_bootstrap, topic, 5_000, 4, ends)
    assert seen == [NoticeRules(pending=True)]
    assert settled == NoticeRules((Epoch(5_000, 4, {"orders": {0: 7, 1: 3}}),))
    assert follower.rules() == settled
    assert read_notice_rules(kafka_bootstrap, topic) == settled
    written = ends_now(kafka_bootstrap, topic)

    assert settle_notice(kafka_bootstrap, topic, 5_000, 4, _never) == settled
    assert ends_now(kafka_bootstrap, topic) == written, "nothing written for the same rules"
    # Another partition count matters only while there is a notice.
    moved = {"orders": {0: 9, 1: 3}}
    again = settle_notice(kafka_bootstrap, topic, 5_000, 6, lambda: moved)
    assert again.epochs[-1] == Epoch(5_000, 6, moved)
    assert follower.rules() == again


def test_rules_left_pending_are_settled_by_the_next_start_and_a_notice_turned_off(
    kafka_bootstrap: str,
) -> None:
    """A start stopped between its two writes leaves the rules pending: the next start
    writes the epoch even though the notice did not change. Turning the notice off is an
    epoch of its own (the versions before it keep theirs)."""
    topic = unique_topic("notice")
    first = settle_notice(kafka_bootstrap, topic, 3_000, 2, lambda: {"orders": {0: 1}})
    write_notice_rules(kafka_bootstrap, topic, replace(first, pending=True))
    follower = NoticeFollower(kafka_bootstrap, topic)
    assert follower.rules().pending

    settled = settle_notice(kafka_bootstrap, topic, 3_000, 2, lambda: {"orders": {0: 4}})
    assert not settled.pending
    assert [e.start("orders", 0) for e in settled.epochs] == [1, 4]
    assert follower.rules() == settled

    off = settle_notice(kafka_bootstrap, topic, 0, 2, lambda: {"orders": {0: 6}})
    assert [e.notice_ms for e in off.epochs] == [3_000, 3_000, 0]
    assert off.short("orders", 0, 5, timestamp_ms=0, due_ms=1_000) is not None
    assert off.short("orders", 0, 6, timestamp_ms=0, due_ms=1_000) is None
    assert settle_notice(kafka_bootstrap, topic, 0, 9, _never) == off, "off is off"


def test_the_input_ends_count_records_of_open_transactions(kafka_bootstrap: str) -> None:
    """A version a committer reads later (once its transaction commits) lies before the
    ends an epoch starts at; a topic not there yet is left out (it starts at 0)."""
    topic = create_topic(kafka_bootstrap, unique_topic("notice-in"), partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": topic})
    producer.init_transactions(10)
    producer.begin_transaction()
    for _ in range(3):
        producer.produce(topic, key=b"k", value=b"v", partition=1)
    producer.flush(10)
    try:
        ends = input_ends(kafka_bootstrap, [topic, unique_topic("absent")])()
        assert ends == {topic: {0: 0, 1: 3}}
    finally:
        producer.abort_transaction(10)


def test_a_run_turns_off_the_rules_a_newer_release_wrote(kafka_bootstrap: str) -> None:
    """This release hands nothing over itself: its start ends a notice found in the
    topic, and its hold still judges the versions before by the notice they had."""
    schedules = create_topic(kafka_bootstrap, unique_topic("notice-sched"), partitions=2)
    config = PipelineConfig(
        Topology(bootstrap_servers=kafka_bootstrap, schedules_topics=(schedules,)),
        query_name=unique_topic("notice-run"),
    )
    assert run_notice(config) is None
    assert not _exists(kafka_bootstrap, config.notice_topic_name)

    newer = NoticeRules((Epoch(5_000, 2, {schedules: {0: 0}}),))
    ensure_notice_topic(kafka_bootstrap, config.notice_topic_name)
    write_notice_rules(kafka_bootstrap, config.notice_topic_name, newer)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(schedules, b"v", b"k", partition=0)
    assert producer.flush(10) == 0
    rules = run_notice(config)
    assert rules is not None
    assert rules.epochs == (
        newer.epochs[0],
        Epoch(0, config.inflight_partitions, {schedules: {0: 1, 1: 0}}),
    )
    assert run_notice(config) == rules, "settled: the next start writes nothing"


def test_a_notice_topic_that_is_not_compacted_is_refused(kafka_bootstrap: str) -> None:
    """Retention would delete the rules, and a version would then be judged without
    them."""
    topic = create_topic(kafka_bootstrap, unique_topic("notice"))
    with pytest.raises(TopicConfigError, match="must be compacted"):
        settle_notice(kafka_bootstrap, topic, 5_000, 2, _never)


def test_a_principal_denied_the_notice_topic_runs_without_rules(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture
) -> None:
    """ACLs made by an earlier ``delayline acls`` name no notice topic: the follower says
    so, and a run of this release (no notice of its own) starts anyway, warning."""
    schedules = create_topic(kafka_bootstrap, unique_topic("notice-sched"))
    config = PipelineConfig(
        Topology(bootstrap_servers=kafka_bootstrap, schedules_topics=(schedules,)),
        query_name=unique_topic("notice-denied"),
    )
    if not topic_acls(kafka_bootstrap, config.notice_topic_name,
                      [(AclOperation.ALL, AclPermissionType.DENY)]):  # fmt: skip
        pytest.skip("the broker enforces no ACLs ($DELAYLINE_TEST_BOOTSTRAP)")

    def denied() -> bool:
        try:
            read_notice_rules(kafka_bootstrap, config.notice_topic_name)
        except TopicDeniedError as exc:
            return "delayline acls" in str(exc)
        return False

    eventually(denied, 15, f"{config.notice_topic_name} denied, naming delayline acls")
    with caplog.at_level(logging.WARNING, logger="delayline.pipeline.notice"):
        assert run_notice(config) is None
    assert "running without notice rules" in caplog.text


@pytest.mark.parametrize("value", [b"{}", b"not json"])
def test_a_record_that_is_not_rules_is_named(kafka_bootstrap: str, value: bytes) -> None:
    topic = create_topic(kafka_bootstrap, unique_topic("notice"))
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, value, b"notice-rules", partition=0)
    assert producer.flush(10) == 0
    with pytest.raises(ValueError, match=rf"{topic}\[0\]@0: not notice rules"):
        read_notice_rules(kafka_bootstrap, topic)
