"""Producer-side API: write schedules and cancels to the schedules topic."""

from delayline.client.aio import AsyncScheduler, Written
from delayline.client.api import ApiClient, ApiError
from delayline.client.config import ClientConfig, RetryPolicy
from delayline.client.partitioner import murmur2, partition_for
from delayline.client.sync import Scheduler
from delayline.core.recurrence import CatchUp, Recurrence

__all__ = [
    "ApiClient",
    "ApiError",
    "AsyncScheduler",
    "CatchUp",
    "ClientConfig",
    "Recurrence",
    "RetryPolicy",
    "Scheduler",
    "Written",
    "murmur2",
    "partition_for",
]
