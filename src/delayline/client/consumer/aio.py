"""The retry helper for asyncio consumers (aiokafka's or confluent-kafka's records)."""

from __future__ import annotations

import asyncio

from confluent_kafka import Message

from delayline.client.consumer.retries import Retries


class AsyncRetries:
    """asyncio face of :class:`~delayline.client.consumer.Retries`, same guarantees:
    :meth:`failed` never blocks the event loop (it queues the write), :meth:`flush` waits
    for the acknowledgements in a thread; commit the offsets after it returned.

    Args:
        retries: The helper it wraps (built with the same arguments as for a blocking
            consumer).
    """

    def __init__(self, retries: Retries) -> None:
        self.retries = retries

    async def failed(self, message: Message, error: BaseException) -> str:
        """See :meth:`Retries.failed`: ``"retried"`` or ``"dead"``."""
        return await asyncio.to_thread(self.retries.failed, message, error)

    async def flush(self, timeout_s: float = 30.0) -> None:
        """See :meth:`Retries.flush`."""
        await asyncio.to_thread(self.retries.flush, timeout_s)
