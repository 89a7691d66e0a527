"""The ACLs delayline's principal needs, and how they are printed (pure)."""

from __future__ import annotations

import shlex

from confluent_kafka.admin import AclOperation  # type: ignore[attr-defined]

from delayline.cli import build_parser
from delayline.cli.acls import needs_of
from delayline.kafka.acls import GROUP, PREFIXED, TOPIC, TRANSACTIONAL_ID, _constant, required_acls
from delayline.kafka.acls import kafka_acls_commands as commands


def test_the_pipeline_of_the_flags_needs_its_topics_groups_and_transactional_ids() -> None:
    args = build_parser().parse_args(
        [
            "acls",
            "--principal",
            "User:d",
            "--query-name",
            "orders",
            "--schedules-topic",
            "s1",
            "--target-topic",
            "billing",
            "--hold",
            "buckets",
        ]
    )
    acls = {(a.resource, a.name, a.pattern): a.operations for a in required_acls(needs_of(args))}
    assert acls[(TOPIC, "s1", "literal")] == ("Read", "Write", "Describe", "DescribeConfigs")
    assert {"Create", "Alter"} <= set(acls[(TOPIC, "orders-inflight", "literal")])
    assert "Create" in acls[(TOPIC, "orders-wake", "literal")]
    assert "Alter" not in acls[(TOPIC, "orders-wake", "literal")], "never grown"
    assert {"Create", "Read", "Write"} <= set(acls[(TOPIC, "orders-notice", "literal")])
    assert "Create" not in acls[(TOPIC, "delayline-commits", "literal")], "made by an admin"
    assert acls[(TOPIC, "billing", "literal")] == ("Write", "Describe", "DescribeConfigs")
    assert "Read" not in acls[(TOPIC, "billing", "literal")]
    assert "Delete" in acls[(TOPIC, "delayline-bucket", PREFIXED)]
    assert acls[(TRANSACTIONAL_ID, "delayline-orders", PREFIXED)] == ("Write", "Describe")
    assert (GROUP, "spark-kafka-source-", PREFIXED) in acls
    assert not any(name == "cluster" for name, _, _ in acls)


def test_printed_as_kafka_acls_commands() -> None:
    args = build_parser().parse_args(["acls", "--principal", "User:d"])
    lines = commands(required_acls(needs_of(args)), "User:d", "b:9093", "admin.properties")
    words = shlex.split(lines[-1])
    assert words[:6] == ["kafka-acls.sh", "--bootstrap-server", "b:9093", "--command-config",
                         "admin.properties", "--add"]  # fmt: skip
    assert words[words.index("--transactional-id") + 1] == "delayline-delayline"
    assert words[-2:] == ["--resource-pattern-type", "prefixed"]


def test_every_operation_named_is_one_of_kafkas() -> None:
    args = build_parser().parse_args(["acls", "--principal", "User:d", "--hold", "buckets"])
    for acl in required_acls(needs_of(args)):
        for op in acl.operations:
            assert AclOperation[_constant(op)].name == _constant(op)
