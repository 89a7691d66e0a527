"""Settings of ``delayline api``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from delayline.contract.topology import Topology
from delayline.errors import ConfigError

DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024
"""A schedule's payload may be as large as a Kafka record (1 MB by default); in JSON, as
base64, that is about 1.4 MB."""


@dataclass(frozen=True, slots=True)
class ApiConfig:
    """What the API serves and where it reads and writes.

    Attributes:
        topology: The cluster and topics: writes of new ids go to the first
            schedules topic; the catalog follows every schedules topic, the history
            topic (if any) and the dead-letter topic.
        catalog_path: The SQLite catalog file.
        host: Address to listen on.
        port: Port to listen on (0: any free port).
        token: Bearer token writes need; ``None`` refuses every write.
        reads_need_token: Reads need the token too.
        pipeline_url: Base URL of the pipeline's metrics server, for ``/info``.
        request_timeout_ms: Bound on a write waiting for Kafka's acknowledgement.
        catalog_retention_ms: Forget versions of finished ids and dead letters older
            than this; ``None`` keeps everything.
        max_body_bytes: Larger request bodies are refused with 413 before they are
            read.
        retry_groups: Retrying consumer groups (docs/retry.md) whose retries and dead
            letters ``/retries``, ``/metrics`` and the admin page show.
    """

    topology: Topology = field(default_factory=Topology)
    catalog_path: Path = field(default_factory=lambda: Path(".delayline/catalog.db"))
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = field(default=None, repr=False)  # never in a log line
    reads_need_token: bool = False
    pipeline_url: str | None = None
    request_timeout_ms: int = 10_000
    catalog_retention_ms: int | None = 7 * 86_400_000
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    retry_groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise ConfigError(
                f"--max-body-bytes {self.max_body_bytes} is too small for any schedule: "
                "give at least 1024"
            )
        if self.reads_need_token and self.token is None:
            raise ConfigError(
                "reads need a token (--reads-need-token) but none is set: "
                "start the API with --token (env DELAYLINE_API_TOKEN)"
            )
