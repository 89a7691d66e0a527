"""``delayline topics create``: the schedules, commits, dead-letter and history topics."""

from __future__ import annotations

import argparse

from delayline.cli._common import (
    add_timeout,
    add_topology,
    check_kafka,
    env_flag,
    say,
    topology_from,
)
from delayline.cli._holds import add_hold_flags, hold_settings_from
from delayline.holds.registry import hold_kind
from delayline.kafka.topics import CLUSTER_DEFAULT, TopicsConfig, ensure_topics


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``topics`` command group."""
    parser = sub.add_parser("topics", help="manage delayline's topics")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        help="create missing topics and check existing ones",
        description="Create delayline's topics: the schedules and commits topics "
        "(compacted), the envelope and timer-request topics, the dead-letter and history "
        "topics (not compacted), each --target-topic, and with --hold buckets the bucket "
        "topics; existing topics are checked for the right cleanup.policy. `delayline run` "
        "makes its own in-flight and wake topics at its start.",
    )
    add_topology(create, "schedules topic to create; repeat for several")
    env_flag(
        create,
        "--partitions",
        env="DELAYLINE_PARTITIONS",
        default=4,
        type=int,
        help="partitions of each topic created",
    )
    env_flag(
        create,
        "--replication-factor",
        env="DELAYLINE_REPLICATION_FACTOR",
        default=CLUSTER_DEFAULT,
        type=int,
        help="replicas of each topic created (default: the cluster's default.replication.factor)",
    )
    create.add_argument(
        "--target-topic",
        action="append",
        dest="target_topics",
        default=[],
        metavar="TOPIC",
        help="also create this topic delayline delivers to, when missing (repeat for "
        "several; delayline never creates a target itself)",
    )
    add_hold_flags(
        create,
        "the hold the pipeline will run with: a hold that keeps schedules in topics of its "
        "own (buckets) has them created (and checked) too",
        lambda kind: kind.topics,
    )
    add_timeout(create)
    create.set_defaults(func=_create)


def _create(args: argparse.Namespace) -> int:
    config = TopicsConfig(
        topology=topology_from(args),
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        timeout_ms=args.timeout_ms,
        target_topics=tuple(args.target_topics),
    )
    check_kafka(args)
    for name, what in ensure_topics(config).items():
        say(f"{name}: {what}")
    kind = hold_kind(args.hold)
    if kind.topics is not None:
        settings = hold_settings_from(args)
        bootstrap = config.topology.bootstrap_servers
        for line in kind.topics(
            bootstrap, settings, args.replication_factor, args.timeout_ms / 1000
        ):
            say(line)
    return 0
