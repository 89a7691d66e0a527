"""A ``foreachBatch`` function that the query's stop interrupts quietly, and the stop.

``StreamingQuery.stop()`` interrupts the stream thread. A Python ``foreachBatch``
function busy in a JVM call at that moment (a Spark job, a broadcast) gets py4j's
``Py4JJavaError`` naming the interruption, and Spark gets the Python traceback back as
the text of a ``Py4JException``. Spark tells that stop from a failure by matching the
text against ``py4j.protocol.Py4JJavaError: An error occurred while
calling((.|\\r\\n|\\r|\\n)*)(java.lang.InterruptedException|...)`` (SPARK-39218,
SPARK-48717). Java's regex engine recurses a few frames per character on that group:
on a 1 MiB thread stack it overflows past about 1,500 characters (measured here), and a
traceback holding a Java stack trace is several times longer. The stream thread then
dies with a ``StackOverflowError`` printed on the JVM's stderr (seen in CI on a Ctrl-C).

:func:`stoppable` keeps Spark's decision and shortens what it parses: an exception
that carries an interruption is raised again as :class:`BatchInterruptedError`, a few
hundred characters that still match. Any other exception passes through unchanged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from delayline.errors import DelaylineError

INTERRUPTIONS = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
"""The JVM exceptions Spark takes for its own stop (``StreamExecution.IO_EXCEPTION_NAMES``)."""

_PY4J_ERROR = "py4j.protocol.Py4JJavaError: An error occurred while calling"

BatchFunction = Callable[[Any, int], None]


class BatchInterruptedError(DelaylineError):
    """A batch interrupted by the query's stop; it runs again at the next start.

    Its message is made for Spark's stop detection (see the module docstring): the text
    py4j gives an interrupted call, then the interruption's class name.
    """


def interruption_in(exc: BaseException) -> str | None:
    """The JVM interruption a ``Py4JJavaError`` in ``exc``'s chain names, if any."""
    from py4j.protocol import Py4JJavaError  # noqa: PLC0415 - the pipeline extra's

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, Py4JJavaError):
            text = str(current)  # what py4j's traceback, and so Spark, would show
            for name in INTERRUPTIONS:
                if name in text:
                    return name
        current = current.__cause__ or current.__context__
    return None


def stoppable(batch: BatchFunction) -> BatchFunction:
    """``batch`` for ``foreachBatch``, its interruptions by the query's stop kept short.

    Guarantees: ``batch``'s outcome is Spark's to judge exactly as before (an
    interruption is still an interruption, any other failure still fails the query);
    only the length of an interruption's traceback changes.
    """

    def run(frame: Any, batch_id: int) -> None:
        try:
            batch(frame, batch_id)
        except Exception as exc:
            name = interruption_in(exc)
            if name is None:
                raise
            # ``from None``: the long original must not be printed after ours.
            raise BatchInterruptedError(
                f"{_PY4J_ERROR} foreachBatch of batch {batch_id}: {name}"
            ) from None

    return run


def stop_query(
    query: Any,
    spark: Any,
    *,
    idle: Callable[[], bool],
    drain_timeout_s: float,
    quiet: bool = True,
) -> None:
    """Let the batch in flight of the active streaming ``query`` finish (for up to
    ``drain_timeout_s``), then stop it.

    When batches take longer than the trigger interval the trigger is never idle, so
    this waits for the batch in flight to end, not for an idle trigger; ``idle`` says
    whether a trigger Spark calls active only waits (for a gate): nothing to end then.
    ``quiet``: Spark's and py4j's logs are silenced first, as the stop interrupts
    whatever Spark began meanwhile (the next batch, a broadcast of it: "Store broadcast
    ... fail" seen here), errors about the interruption, not the data; that batch runs
    again on the next start.
    """
    in_flight = _last_batch_id(query)
    deadline = time.monotonic() + drain_timeout_s
    while (
        query.status.get("isTriggerActive")
        and _last_batch_id(query) == in_flight
        and not idle()
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    if quiet and spark is not None:
        spark.sparkContext.setLogLevel("OFF")
        logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)
    query.stop()


def _last_batch_id(query: Any) -> int:
    progress = query.lastProgress
    return -1 if progress is None else int(progress["batchId"])
