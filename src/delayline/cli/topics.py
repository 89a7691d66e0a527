"""``delayline topics create``: the schedules, dead-letter and history topics."""

from __future__ import annotations

import argparse

from delayline.cli._common import add_bootstrap, add_schedules_topic, add_timeout, env_flag, say
from delayline.core.topology import (
    DEFAULT_COMMITS_TOPIC,
    DEFAULT_DEAD_LETTER_TOPIC,
    DEFAULT_HISTORY_TOPIC,
)
from delayline.kafka.topics import TopicsConfig, ensure_topics


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``topics`` command group."""
    parser = sub.add_parser("topics", help="manage delayline's topics")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        help="create missing topics and check existing ones",
        description="Create the schedules (compacted), dead-letter and history topics; "
        "existing topics are checked for the right cleanup.policy.",
    )
    add_bootstrap(create)
    add_schedules_topic(create)
    env_flag(
        create,
        "--dead-letter-topic",
        env="DELAYLINE_DEAD_LETTER_TOPIC",
        default=DEFAULT_DEAD_LETTER_TOPIC,
        help="topic for rejected records",
    )
    env_flag(
        create,
        "--commits-topic",
        env="DELAYLINE_COMMITS_TOPIC",
        default=DEFAULT_COMMITS_TOPIC,
        help="compacted topic of the pipeline's commit markers",
    )
    env_flag(
        create,
        "--history-topic",
        env="DELAYLINE_HISTORY_TOPIC",
        default=DEFAULT_HISTORY_TOPIC,
        help="topic recording what fired ('' for none)",
    )
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
        default=1,
        type=int,
        help="replicas of each topic created",
    )
    add_timeout(create)
    create.set_defaults(func=_create)


def _create(args: argparse.Namespace) -> int:
    config = TopicsConfig(
        bootstrap_servers=args.bootstrap_servers,
        schedules_topic=args.schedules_topic,
        dead_letter_topic=args.dead_letter_topic,
        history_topic=args.history_topic or None,
        commits_topic=args.commits_topic,
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        timeout_ms=args.timeout_ms,
    )
    for name, what in ensure_topics(config).items():
        say(f"{name}: {what}")
    return 0
