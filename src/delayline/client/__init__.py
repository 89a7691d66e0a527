"""Producer-side API: write schedules and cancels to the schedules topic."""

from delayline.client.aio import AsyncScheduler, Written
from delayline.client.config import ClientConfig, RetryPolicy
from delayline.client.partitioner import murmur2, partition_for
from delayline.client.sync import Scheduler

__all__ = [
    "AsyncScheduler",
    "ClientConfig",
    "RetryPolicy",
    "Scheduler",
    "Written",
    "murmur2",
    "partition_for",
]
