"""A stop that interrupts a batch in flight: the query ends quietly, as a stop.

Spark tells a stop from a failure by a regex over the Python traceback, which overflows
the stream thread's stack on a long one (see :mod:`delayline.pipeline.interrupt`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from delayline.pipeline.interrupt import stoppable


def test_a_stop_interrupting_a_batch_ends_the_query_as_a_stop(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    started = threading.Event()

    def busy(frame: Any, batch_id: int) -> None:
        started.set()
        # A JVM call, on the stream thread (py4j's pinned threads): the stop interrupts it.
        spark.sparkContext._jvm.java.lang.Thread.sleep(120_000)

    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 1)
        .load()
        .writeStream.foreachBatch(stoppable(busy))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    assert started.wait(120), "no batch began"
    query.stop()
    assert not query.isActive
    assert query.exception() is None  # a stop, not a failure
    err = capfd.readouterr().err
    assert "StackOverflowError" not in err
    assert "Exception in thread" not in err
