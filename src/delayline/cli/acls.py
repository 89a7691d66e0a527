"""``delayline acls``: the ACLs delayline's principal needs, as ``kafka-acls`` commands."""

from __future__ import annotations

import argparse

from confluent_kafka.admin import AdminClient

from delayline.cli._common import (
    add_topics_flag,
    add_topology,
    env_flag,
    say,
    topics_from,
    topology_from,
)
from delayline.cli._holds import add_hold_flags, hold_settings_from
from delayline.errors import ConfigError
from delayline.holds.registry import hold_kind
from delayline.kafka.acls import AclNeeds, apply_acls, kafka_acls_commands, required_acls
from delayline.kafka.config import kafka_client_config
from delayline.pipeline.config import PipelineConfig

TARGETS_ENV = "DELAYLINE_ACL_TARGET_TOPICS"
PREFIXES_ENV = "DELAYLINE_ACL_TARGET_PREFIXES"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``acls``."""
    p = sub.add_parser(
        "acls",
        help="print (or create) the ACLs delayline's principal needs",
        description="The least privilege of a pipeline with these topics, its API and its "
        "command line, as kafka-acls commands (see docs/security.md). Create the topics "
        "as an administrator first (`delayline topics create`); the pipeline creates "
        "only its in-flight and wake topics.",
    )
    add_topology(p, "schedules topic the pipeline reads; repeat for several")
    env_flag(p, "--principal", env="DELAYLINE_ACL_PRINCIPAL", required=False,
             help="the principal delayline authenticates as, e.g. User:delayline")  # fmt: skip
    env_flag(p, "--query-name", env="DELAYLINE_QUERY_NAME", default="delayline",
             help="the pipeline's --query-name")  # fmt: skip
    add_hold_flags(p, "the pipeline's --hold", lambda kind: kind.acls)
    add_topics_flag(p, "--target-topic", TARGETS_ENV,
                    "a topic schedules are delivered to; repeat for several", None)  # fmt: skip
    add_topics_flag(p, "--target-prefix", PREFIXES_ENV,
                    "a prefix of topics delivered to; repeat for several", None)  # fmt: skip
    p.add_argument("--apply", action="store_true",
                   help="create them now, as --kafka-config's principal (an admin)")  # fmt: skip
    p.set_defaults(func=_acls)


def needs_of(args: argparse.Namespace) -> AclNeeds:
    """What the pipeline the flags describe touches."""
    kind = hold_kind(args.hold)
    settings = hold_settings_from(args)
    config = PipelineConfig(
        topology_from(args), query_name=args.query_name, hold=args.hold, hold_settings=settings
    )
    topology = config.topology
    own = [topology.dead_letter_topic, topology.commits_topic]
    if topology.history_topic:
        own.append(topology.history_topic)
    made = [config.inflight_topic_name, config.wake_topic_name, config.notice_topic_name]
    return AclNeeds(
        input_topics=topology.input_topics,
        own_topics=own,
        made_topics=made,
        grown_topics=[config.inflight_topic_name],
        transactional_id=config.transactional_id,
        targets=topics_from(args, "--target-topic", TARGETS_ENV),
        target_prefixes=topics_from(args, "--target-prefix", PREFIXES_ENV),
        hold=kind.acls(config.hold_settings) if kind.acls else (),
    )


def _acls(args: argparse.Namespace) -> int:
    if not args.principal:
        raise ConfigError("--principal is required (e.g. User:delayline)")
    needs = needs_of(args)
    acls = required_acls(needs)
    if not needs.targets and not needs.target_prefixes:
        say("# no --target-topic or --target-prefix: deliveries will be dead-lettered as "
            "not authorised until the principal may write their topics")  # fmt: skip
    if args.apply:
        admin = AdminClient(kafka_client_config(args.bootstrap_servers))
        count = apply_acls(admin, acls, args.principal)
        say(f"created {count} ACL bindings for {args.principal}")
        return 0
    for line in kafka_acls_commands(
        acls, args.principal, args.bootstrap_servers, args.kafka_config or None
    ):
        print(line)
    return 0
