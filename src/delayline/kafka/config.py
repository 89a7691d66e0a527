"""Settings every librdkafka client delayline creates starts from."""

from __future__ import annotations

import logging
from typing import Any

RDKAFKA_LOGGER = logging.getLogger("delayline.rdkafka")
"""librdkafka's own log lines (connection refused, retries) go here, not to stderr.

It is quiet unless raised to DEBUG (``delayline -v``): delayline reports the
errors that matter itself, in one line, with what to do.
"""
RDKAFKA_LOGGER.setLevel(logging.CRITICAL)


def kafka_client_config(bootstrap_servers: str, **extra: Any) -> dict[str, Any]:
    """Base settings for any librdkafka client delayline creates."""
    return {"bootstrap.servers": bootstrap_servers, "logger": RDKAFKA_LOGGER, **extra}
