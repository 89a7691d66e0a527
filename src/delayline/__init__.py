"""delayline: durable delayed messages for Apache Kafka.

A producer writes a schedule to a schedules topic; delayline delivers its payload
to the target topic at the due time, exactly once.
"""

import logging

from delayline.client import (
    ApiClient,
    AsyncScheduler,
    CatchUp,
    ClientConfig,
    Recurrence,
    RetryPolicy,
    Scheduler,
)
from delayline.core.model import Cancel, Invalid, Schedule
from delayline.core.version import VERSION
from delayline.errors import DelaylineError

__version__ = VERSION

# A library logs; the application decides where it goes.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "ApiClient",
    "AsyncScheduler",
    "Cancel",
    "CatchUp",
    "ClientConfig",
    "DelaylineError",
    "Invalid",
    "Recurrence",
    "RetryPolicy",
    "Schedule",
    "Scheduler",
    "__version__",
]
