"""What the API's request handlers share for the life of the process."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient
from starlette.requests import Request

from delayline.api.config import ApiConfig
from delayline.api.retry_watch import RetryWatch
from delayline.api.writes import Writers
from delayline.catalog import CatalogFollower, CatalogStore
from delayline.contract.contracts import HEADER
from delayline.core.clock import Clock
from delayline.errors import CatalogError, InvalidScheduleError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.reader import acknowledged_ends
from delayline.kafka.topics import cluster_brokers

CATALOG_WAIT_S = 5.0
"""The longest a request that decides from the catalog (pause, resume, a group's cancel,
pause or resume) waits for it to have read every schedule written before the request:
past it the answer is 503 with ``Retry-After``, never a 404 or 409 the catalog's lag
would have made up."""


@dataclass
class ApiState:
    """The catalog, its follower, the Kafka writers and the settings.

    Attributes:
        config: The API settings.
        store: The catalog the reads come from.
        follower: Keeps ``store`` current.
        writers: Write schedules and cancels to the schedules topics.
        clock: "Now" for dashboards and relative due times.
        retries: Counts of the retrying consumer groups it watches.
    """

    config: ApiConfig
    store: CatalogStore
    follower: CatalogFollower
    writers: Writers
    clock: Clock
    retries: RetryWatch | None = None
    _brokers: tuple[int, list[dict[str, object]]] = field(default=(0, []), repr=False)
    _admin: AdminClient | None = field(default=None, repr=False)
    _admin_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def brokers(self, max_age_ms: int = 10_000) -> list[dict[str, object]]:
        """The cluster's brokers, asked at most every ``max_age_ms`` (empty: unreachable)."""
        asked_ms, known = self._brokers
        now_ms = self.clock.now_ms()
        if now_ms - asked_ms > max_age_ms or not known:
            known = cluster_brokers(self.config.topology.bootstrap_servers, 2.0)
            self._brokers = (now_ms, known)
        return known

    def place_of(self, schedule_id: str) -> tuple[str, int | None]:
        """Where a new version of ``schedule_id`` goes: the topic and partition of its
        pending version (newest by record time), so compaction removes that version
        even when another partitioner wrote it; else the first schedules topic and the
        id's own partition (``None``).

        Raises:
            InvalidScheduleError: the pending version came in by another contract than
                the header one, the only one the API writes.
        """
        current = self.store.locate(schedule_id)
        if current:
            newest = max(current, key=lambda p: p.updated_ms)
            contract = self.config.topology.contract_of(newest.topic)
            if contract != HEADER:
                raise InvalidScheduleError(
                    f"schedule {schedule_id!r} came in by the {contract} contract on "
                    f"{newest.topic}; the API writes header-contract schedules only: write a "
                    f"new {contract} to {newest.topic}, or cancel it here"
                )
            return newest.topic, newest.partition
        return self.config.topology.schedules_topic, None

    def read_own_writes(self) -> None:
        """Read your writes: wait until the catalog holds every record Kafka acknowledged
        on the input topics before this call (their high watermarks, asked now; a
        transaction open then is waited for until it ends), at most
        :data:`CATALOG_WAIT_S` in all. Afterwards a schedule written before the call and
        not pending in the catalog is not pending. Blocking: run it off the event loop.

        Raises:
            CatalogError: the catalog did not get there in time (503).
            KafkaUnavailableError: Kafka did not say where the topics end (503).
        """
        deadline = time.monotonic() + CATALOG_WAIT_S
        follower = self.follower
        if follower.caught_up.wait(CATALOG_WAIT_S):
            left = max(0.1, deadline - time.monotonic())
            ends = acknowledged_ends(self._admin_client(), follower.followed_inputs(), left)
            if follower.wait_read(ends, deadline - time.monotonic()):
                return
        raise CatalogError(
            f"the catalog has not read the schedules topics up to this request within "
            f"{CATALOG_WAIT_S:g} s; retry in a moment"
        )

    def _admin_client(self) -> AdminClient:
        with self._admin_lock:
            if self._admin is None:
                servers = self.config.topology.bootstrap_servers
                self._admin = AdminClient(kafka_client_config(servers))
            return self._admin


def api_state(request: Request) -> ApiState:
    """The state of the app serving ``request``."""
    state: ApiState = request.app.state.api
    return state
