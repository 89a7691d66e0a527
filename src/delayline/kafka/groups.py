"""Who is in a consumer group, and what each member owns."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from delayline.errors import KafkaUnavailableError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.errors import COORDINATOR_MOVING, kafka_error


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member of a consumer group.

    Attributes:
        instance_id: Its static member id (``group.instance.id``), if it has one.
        client_id: Its client id.
        host: The address the broker sees it from.
        partitions: The partitions assigned to it, as ``(topic, partition)``, sorted.
    """

    instance_id: str | None
    client_id: str
    host: str
    partitions: tuple[tuple[str, int], ...]


def group_members(
    bootstrap_servers: str, group: str, timeout_s: float, admin: AdminClient | None = None
) -> list[GroupMember]:
    """The members of ``group`` (none when the group does not exist); retried while its
    coordinator moves or loads, up to ``timeout_s``. ``admin``: a client to ask with (one
    is made for the call when ``None``), for a caller that asks often.

    Raises:
        KafkaUnavailableError: no answer within ``timeout_s``.
    """
    if admin is None:
        admin = AdminClient(kafka_client_config(bootstrap_servers))
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(deadline - time.monotonic(), 0.1)
        future = admin.describe_consumer_groups([group], request_timeout=left)[group]
        try:
            description = future.result(timeout=left)
            break
        except KafkaException as exc:
            error = kafka_error(exc)
            if error is not None and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return []
            moving = error is not None and error.code() in COORDINATOR_MOVING
            if not moving or time.monotonic() + 0.2 >= deadline:
                raise KafkaUnavailableError(f"consumer group {group}: {exc}") from exc
            time.sleep(0.2)
    members = []
    for m in description.members:
        owned = () if m.assignment is None else m.assignment.topic_partitions
        members.append(
            GroupMember(
                m.group_instance_id,
                m.client_id,
                m.host,
                tuple(sorted((tp.topic, tp.partition) for tp in owned)),
            )
        )
    return sorted(members, key=lambda m: (m.instance_id or "", m.client_id))
