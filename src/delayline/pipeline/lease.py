"""One pipeline per query name: a lease in Kafka, checked before anything is created.

The query name fixes the transactional ids (``delayline-<query name>-...``), so two
pipelines of one name fence each other even on different checkpoints (which the
checkpoint lock, :mod:`delayline.pipeline.lock`, cannot see). The lease is membership of
the consumer group ``delayline-<query name>-lease``: a running pipeline keeps one
member in it (a consumer of its commits topic whose client id names its host, PID and
checkpoint), and a starting one first asks the group coordinator who is a member.

Guarantees and limits:

* A pipeline that runs, anywhere, is a member: a second start of its name is refused
  with a message naming it, before it creates a topic or a producer.
* A pipeline that died leaves a member behind for at most ``session_timeout_ms``. One
  of this host is judged by its PID at once (gone: ignored; alive: refused); one of
  another host is waited out, up to the session timeout, before the start is refused.
* Two starts in the same moment may both pass (neither is a member yet); the checkpoint
  lock still separates those on one checkpoint.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from delayline.core.identifiers import lease_group
from delayline.errors import DelaylineError, KafkaUnavailableError
from delayline.infra.procs import pid_alive
from delayline.kafka.config import kafka_client_config
from delayline.kafka.errors import COORDINATOR_MOVING, kafka_error

log = logging.getLogger(__name__)

CLIENT_PREFIX = "delayline-lease"


class QueryNameInUseError(DelaylineError):
    """Another pipeline runs with this query name; this one did not start."""


@dataclass(frozen=True, slots=True)
class Holder:
    """A member of the lease group, as its client id describes it."""

    host: str
    pid: int
    checkpoint: str

    def client_id(self) -> str:
        return f"{CLIENT_PREFIX}|{self.host}|{self.pid}|{self.checkpoint}"

    @staticmethod
    def parse(client_id: str) -> Holder | None:
        parts = client_id.split("|", 3)
        if len(parts) != 4 or parts[0] != CLIENT_PREFIX or not parts[2].isdigit():
            return None
        return Holder(parts[1], int(parts[2]), parts[3])

    def __str__(self) -> str:
        return f"pid {self.pid} on host {self.host}, checkpoint {self.checkpoint}"


def judge(
    client_ids: list[str], host: str, alive: Callable[[int], bool], me: Holder | None = None
) -> tuple[list[str], list[str]]:
    """The members that surely run (of this host, PID alive) and those that may (of
    another host, or not ours); members of this host whose PID is gone are left out, and
    so is one equal to ``me`` (this process, host, PID and checkpoint): it has not joined
    yet, so that member is a dead predecessor on the same checkpoint that had the same
    PID (a container restarted in its pod keeps its host name and volume, and its first
    process often gets the same PID)."""
    running, maybe = [], []
    for client_id in client_ids:
        holder = Holder.parse(client_id)
        if holder is None:
            maybe.append(f"a client {client_id!r}")
        elif holder.host != host:
            maybe.append(str(holder))
        elif holder != me and alive(holder.pid):
            running.append(str(holder))
    return running, maybe


class QueryLease:
    """The lease of one query name.

    Args:
        bootstrap_servers: Kafka bootstrap list.
        query_name: The pipeline's ``--query-name``.
        checkpoint: Its checkpoint directory (named to whoever is refused).
        session_timeout_ms: How long a dead holder stays a member (Kafka's own bound).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        query_name: str,
        checkpoint: str,
        session_timeout_ms: int = 10_000,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.group = lease_group(query_name)
        self.query_name = query_name
        self.session_timeout_ms = session_timeout_ms
        self.me = Holder(socket.gethostname(), os.getpid(), checkpoint)
        self._consumer: Consumer | None = None
        self._admin: AdminClient | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self, alive: Callable[[int], bool] = pid_alive) -> None:
        """Refuse if another pipeline holds the name; wait out a holder that may be dead.

        Raises:
            QueryNameInUseError: a live pipeline is a member of the lease group.
            KafkaUnavailableError: the group coordinator did not answer.
        """
        deadline = time.monotonic() + (self.session_timeout_ms + 3_000) / 1000
        while True:
            running, maybe = judge(self._members(), self.me.host, alive, self.me)
            holders = running + maybe
            if not holders:
                return
            if running or time.monotonic() >= deadline:
                raise QueryNameInUseError(
                    f"another pipeline runs with query name {self.query_name!r} "
                    f"({'; '.join(holders)}): stop it first, or give this one its own "
                    "--query-name and --checkpoint-dir"
                )
            log.info(
                "query name %s held by %s; waiting up to %d ms in case it died",
                self.query_name,
                "; ".join(holders),
                self.session_timeout_ms,
            )
            time.sleep(1)

    def hold(self, topic: str) -> None:
        """Become the group's member (through ``topic``, which must exist) until
        :meth:`release`."""
        consumer = Consumer(
            kafka_client_config(
                self.bootstrap_servers,
                **{
                    "group.id": self.group,
                    "client.id": self.me.client_id(),
                    "session.timeout.ms": self.session_timeout_ms,
                    "enable.auto.commit": False,
                    "auto.offset.reset": "latest",
                },
            )
        )
        # Paused as soon as assigned: membership is the point, not the records.
        consumer.subscribe([topic], on_assign=lambda c, parts: c.pause(parts))
        self._consumer = consumer
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, name="delayline-lease", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Leave the group (a clean stop frees the name at once)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _poll(self) -> None:
        # Membership lasts while the consumer polls; records are not wanted.
        while not self._stop.is_set():
            assert self._consumer is not None
            try:
                self._consumer.poll(1.0)
            except KafkaException as exc:
                log.debug("lease consumer: %s", exc)

    def _members(self, timeout_s: float = 30) -> list[str]:
        """Client ids of the group's members; retried while the coordinator moves or
        loads (a broker just started answers ``NOT_COORDINATOR`` for a while)."""
        if self._admin is None:  # one client for every look (check() may look for 13 s)
            self._admin = AdminClient(kafka_client_config(self.bootstrap_servers))
        admin = self._admin
        deadline = time.monotonic() + timeout_s
        while True:
            future = admin.describe_consumer_groups([self.group], request_timeout=10)[self.group]
            try:
                description = future.result(timeout=15)
            except KafkaException as exc:
                error = kafka_error(exc)
                if error is not None and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                    return []
                retriable = error is not None and (
                    error.retriable() or error.code() in COORDINATOR_MOVING
                )
                if not retriable or time.monotonic() >= deadline:
                    raise KafkaUnavailableError(f"lease group {self.group}: {exc}") from exc
                time.sleep(0.5)
                continue
            return [m.client_id for m in description.members]
