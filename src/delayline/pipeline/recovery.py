"""Riding out an outage: which query failures restart the query, and for how long.

A Kafka broker that restarts (or a network that drops for a while) fails the batch in
flight: a fire task's transaction times out, or Spark's Kafka source does. Nothing is
lost then (the batch commits atomically or not at all, and a new query replays it from
the checkpoint), so the pipeline starts the query again, after a growing pause,
instead of exiting, for as long as :attr:`PipelineConfig.outage_timeout_ms` allows. A
failure that waiting cannot cure (a damaged checkpoint, a full disk, a bug) ends the
pipeline at once with the root error, not Spark's wall of stack traces.
"""

from __future__ import annotations

import importlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from delayline.core.units import format_duration_ms
from delayline.errors import DelaylineError

FIRST_PAUSE_MS = 2_000
"""The pause before the first restart of a streak; it doubles up to :data:`MAX_PAUSE_MS`."""
MAX_PAUSE_MS = 30_000
UNKNOWN = "unknown"
"""The :attr:`Failure.name` of an error the text does not name in a known way."""
NO_SPACE = "NoSpaceLeft"
"""The :attr:`Failure.name` of a full disk (an ``IOException`` has no class of ours)."""

# Errors of the Kafka clients inside Spark that a broker coming back cures.
_RETRIABLE_JAVA = frozenset(
    {
        "TimeoutException",
        "NetworkException",
        "DisconnectException",
        "NotLeaderOrFollowerException",
        "LeaderNotAvailableException",
        "CoordinatorNotAvailableException",
        "CoordinatorLoadInProgressException",
        "NotCoordinatorException",
    }
)
_OURS = re.compile(r"^(delayline(?:\.\w+)+)\.(\w+): (.*)$", re.MULTILINE)
_JAVA_KAFKA = re.compile(r"^(?:Caused by: )?org\.apache\.kafka\.common\.errors\.(\w+): (.*)$", re.M)
_NO_SPACE = re.compile(r"No space left on device", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Failure:
    """The root cause of a failed query, as far as its error text tells.

    Attributes:
        name: The error's class name (``"KafkaUnavailableError"``), or ``"unknown"``.
        message: Its message, one line.
        retriable: Whether waiting and restarting the query may cure it.
    """

    name: str
    message: str
    retriable: bool

    def __str__(self) -> str:
        return self.message if self.name == UNKNOWN else f"{self.name}: {self.message}"


def diagnose(text: str) -> Failure:
    """Find the root cause in the text of a query's exception (Spark wraps the error a
    fire task raised, with its Python traceback, in Java exceptions)."""
    if _NO_SPACE.search(text):
        line = next(ln for ln in text.splitlines() if _NO_SPACE.search(ln))
        return Failure(NO_SPACE, line.strip(), retriable=False)
    ours = _OURS.findall(text)
    if ours:
        # The last one printed is the error raised: tracebacks print causes first.
        module, name, message = ours[-1]
        return Failure(name, message.strip(), _is_retriable(module, name))
    java = _JAVA_KAFKA.findall(text)
    if java:
        name, message = java[-1]
        return Failure(name, message.strip(), name in _RETRIABLE_JAVA)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return Failure(UNKNOWN, first, retriable=False)


def _is_retriable(module: str, name: str) -> bool:
    """The ``retriable`` flag of delayline's own error class ``module.name``."""
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return False
    return isinstance(found, type) and issubclass(found, DelaylineError) and found.retriable


class Recovery:
    """Whether a failed query starts again, and after how long.

    A streak of failures begins with the first failure after a batch that completed;
    retriable failures restart the query until the streak is ``outage_timeout_ms``
    old. Time is passed in (epoch or monotonic milliseconds, consistently).

    Args:
        outage_timeout_ms: The longest streak ridden out; 0 never restarts.
    """

    def __init__(self, outage_timeout_ms: int) -> None:
        self.outage_timeout_ms = outage_timeout_ms
        self._streak_began: int | None = None
        self._pause_ms = FIRST_PAUSE_MS
        self.restarts = 0
        """Queries restarted so far."""

    def failed(self, failure: Failure, now_ms: int) -> int | None:
        """The pause before restarting after ``failure``, or ``None``: give up."""
        if not failure.retriable or self.outage_timeout_ms <= 0:
            return None
        if self._streak_began is None:
            self._streak_began = now_ms
            self._pause_ms = FIRST_PAUSE_MS
        left = self._streak_began + self.outage_timeout_ms - now_ms
        if left <= 0:
            return None
        pause = min(self._pause_ms, left)
        self._pause_ms = min(self._pause_ms * 2, MAX_PAUSE_MS)
        self.restarts += 1
        return pause

    def progressed(self) -> None:
        """A batch completed: the next failure begins a new streak."""
        self._streak_began = None


def no_space_message(checkpoint: Path, failure: Failure) -> str:
    """What to do about a full disk, naming the checkpoint and the space left there."""
    try:
        free = f"{shutil.disk_usage(checkpoint).free // 1024} KiB free there now"
    except OSError as exc:
        free = f"its filesystem: {exc.strerror}"
    return (
        f"No space left on device: the checkpoint {checkpoint} ({free}) or Spark's local "
        "directories filled up. Free space there and start the pipeline again: the "
        f"failed batch is replayed and nothing is lost. ({failure.message})"
    )


def given_up(failure: Failure, outage_timeout_ms: int, checkpoint: Path) -> str:
    """Why the pipeline gave up after ``failure`` (:meth:`Recovery.failed` said so)."""
    if failure.retriable and outage_timeout_ms:
        return (
            f"{failure} (still failing after {format_duration_ms(outage_timeout_ms)} of "
            "restarts; nothing was lost: start the pipeline again once Kafka answers)"
        )
    if failure.name == NO_SPACE:
        return no_space_message(checkpoint, failure)
    return str(failure)


def rebuild_hint(checkpoint: Path) -> str:
    """What to do when the query failed before its first batch, while it read
    ``checkpoint``."""
    return (
        f"\n\nThe query failed before its first batch, while it read the checkpoint "
        f"{checkpoint}. If the checkpoint is damaged (a disk that filled up, a truncated "
        "or edited file), start with --rebuild: it deletes the checkpoint and rebuilds "
        "the pending schedules from the schedules topics, and nothing already delivered "
        "is delivered again."
    )
