"""The least privilege delayline's principal needs on a cluster that enforces ACLs.

:func:`required_acls` lists, per resource, the operations and why; the command line
prints them as ``kafka-acls`` commands (``delayline acls``) or creates them. Topics
are best created by an administrator (``delayline topics create`` with the admin's
properties); the pipeline then needs ``Create`` only on its own in-flight and wake
topics, which it creates at start.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

TOPIC = "topic"
GROUP = "group"
TRANSACTIONAL_ID = "transactional-id"
LITERAL = "literal"
PREFIXED = "prefixed"
GROUP_PREFIXES = ("delayline-", "spark-kafka-source-")
"""Consumer groups: delayline's own (the committer's offsets, the lease, readers that
assign partitions) and those Spark's Kafka source makes for each query."""


@dataclass(frozen=True, slots=True)
class Acl:
    """Operations allowed on one resource (or every resource of a name prefix).

    Attributes:
        resource: :data:`TOPIC`, :data:`GROUP` or :data:`TRANSACTIONAL_ID`.
        name: The resource's name, or its prefix.
        pattern: :data:`LITERAL` or :data:`PREFIXED`.
        operations: Kafka's operation names (``Read``, ``Write``...).
        why: What delayline does with it.
    """

    resource: str
    name: str
    pattern: str
    operations: tuple[str, ...]
    why: str


@dataclass(frozen=True, slots=True)
class AclNeeds:
    """What a pipeline (and its API and command line) touches.

    Attributes:
        input_topics: The schedules, envelope and timer-request topics.
        own_topics: Dead letters, commits, history (topics made by an administrator).
        made_topics: The pipeline's in-flight, wake and notice topics (it creates them).
        grown_topics: Those of them it may grow (the in-flight topic, to
            ``--inflight-partitions``).
        transactional_id: The prefix of every transactional id it uses.
        targets: Topics schedules are delivered to (literal names).
        target_prefixes: Prefixes of such topics.
        hold: The ACLs on the hold's own topics (the bucket hold's).
    """

    input_topics: Sequence[str]
    own_topics: Sequence[str]
    made_topics: Sequence[str]
    transactional_id: str
    grown_topics: Sequence[str] = ()
    targets: Sequence[str] = ()
    target_prefixes: Sequence[str] = ()
    hold: Sequence[Acl] = ()


READ_WRITE = ("Read", "Write", "Describe", "DescribeConfigs")


def required_acls(needs: AclNeeds) -> list[Acl]:
    """Every ACL the principal needs, and nothing more."""
    acls = [
        Acl(TOPIC, t, LITERAL, READ_WRITE,
            "read by the pipeline, the committer's watch and the API; cancels, delayline's "
            "tombstones and rewrites written")
        for t in needs.input_topics
    ]  # fmt: skip
    acls += [
        Acl(TOPIC, t, LITERAL, READ_WRITE, "written in each batch's transaction; read back")
        for t in needs.own_topics
    ]
    for t in needs.made_topics:
        ops: tuple[str, ...]
        if t in needs.grown_topics:
            ops = ("Create", "Alter", "AlterConfigs", *READ_WRITE)
            why = "created (grown, its record limit raised) at start; hand-over"
        else:
            ops, why = ("Create", *READ_WRITE), "created at start; wake-up, notice rules"
        acls.append(Acl(TOPIC, t, LITERAL, ops, why))
    delivery = ("Write", "Describe", "DescribeConfigs")
    why = "deliveries (its configuration decides how a refused one is dead-lettered)"
    acls += [Acl(TOPIC, t, LITERAL, delivery, why) for t in needs.targets]
    acls += [Acl(TOPIC, t, PREFIXED, delivery, why) for t in needs.target_prefixes]
    acls += needs.hold
    acls += [
        Acl(GROUP, prefix, PREFIXED, ("Read", "Describe"),
            "consumer offsets (the committer's), the query lease, Spark's source")
        for prefix in GROUP_PREFIXES
    ]  # fmt: skip
    acls.append(
        Acl(TRANSACTIONAL_ID, needs.transactional_id, PREFIXED, ("Write", "Describe"),
            "the fire tasks' and the committer's transactional producers")
    )  # fmt: skip
    return acls


def kafka_acls_commands(
    acls: Iterable[Acl], principal: str, bootstrap: str, command_config: str | None
) -> list[str]:
    """``kafka-acls.sh`` commands that add ``acls`` for ``principal``."""
    base = ["kafka-acls.sh", "--bootstrap-server", bootstrap]
    if command_config:
        base += ["--command-config", command_config]
    flag = {TOPIC: "--topic", GROUP: "--group", TRANSACTIONAL_ID: "--transactional-id"}
    out = []
    for acl in acls:
        words = [*base, "--add", "--allow-principal", principal]
        for op in acl.operations:
            words += ["--operation", op]
        words += [flag[acl.resource], acl.name]
        if acl.pattern == PREFIXED:
            words += ["--resource-pattern-type", "prefixed"]
        out.append(shlex.join(words))
    return out


def apply_acls(admin: object, acls: Iterable[Acl], principal: str, timeout_s: float = 30) -> int:
    """Create ``acls`` for ``principal`` through ``admin`` (a confluent-kafka
    ``AdminClient`` authorised to alter ACLs); how many bindings.

    Raises:
        KafkaException: the cluster refused one.
    """

    kinds = {TOPIC: ResourceType.TOPIC, GROUP: ResourceType.GROUP,
             TRANSACTIONAL_ID: ResourceType.TRANSACTIONAL_ID}  # fmt: skip
    patterns = {LITERAL: ResourcePatternType.LITERAL, PREFIXED: ResourcePatternType.PREFIXED}
    bindings = [
        AclBinding(
            kinds[acl.resource],
            acl.name,
            patterns[acl.pattern],
            principal,
            "*",
            AclOperation[_constant(op)],
            AclPermissionType.ALLOW,
        )
        for acl in acls
        for op in acl.operations
    ]
    for future in admin.create_acls(bindings).values():  # type: ignore[attr-defined]
        future.result(timeout_s)
    return len(bindings)


def _constant(operation: str) -> str:
    """``DescribeConfigs`` -> ``DESCRIBE_CONFIGS`` (confluent-kafka's enum names)."""
    out = ""
    for i, ch in enumerate(operation):
        if ch.isupper() and i:
            out += "_"
        out += ch.upper()
    return out
