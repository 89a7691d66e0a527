"""Settings of ``delayline api``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from delayline.core.topology import (
    DEFAULT_BOOTSTRAP_SERVERS,
    DEFAULT_DEAD_LETTER_TOPIC,
    DEFAULT_HISTORY_TOPIC,
    DEFAULT_SCHEDULES_TOPIC,
)


@dataclass(frozen=True, slots=True)
class ApiConfig:
    """What the API serves and where it reads and writes.

    Attributes:
        bootstrap_servers: Kafka bootstrap list.
        schedules_topics: Schedules topics; writes of new ids go to the first.
        history_topic: History topic the catalog follows; ``None`` for none.
        dead_letter_topic: Dead-letter topic the catalog follows.
        catalog_path: The SQLite catalog file.
        host: Address to listen on.
        port: Port to listen on (0: any free port).
        token: Bearer token writes need; ``None`` refuses every write.
        reads_need_token: Reads need the token too.
        pipeline_url: Base URL of the pipeline's metrics server, for ``/info``.
        request_timeout_ms: Bound on a write waiting for Kafka's acknowledgement.
        catalog_retention_ms: Forget versions of finished ids and dead letters older
            than this; ``None`` keeps everything.
    """

    bootstrap_servers: str = DEFAULT_BOOTSTRAP_SERVERS
    schedules_topics: tuple[str, ...] = (DEFAULT_SCHEDULES_TOPIC,)
    history_topic: str | None = DEFAULT_HISTORY_TOPIC
    dead_letter_topic: str | None = DEFAULT_DEAD_LETTER_TOPIC
    catalog_path: Path = field(default_factory=lambda: Path(".delayline/catalog.db"))
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    reads_need_token: bool = False
    pipeline_url: str | None = None
    request_timeout_ms: int = 10_000
    catalog_retention_ms: int | None = 7 * 86_400_000
