"""Arrow in Spark's Python workers, without pandas.

pyarrow imports pandas, when it is installed, the first time it turns Python objects
into an array (``pa.array`` of a list, ``RecordBatch.from_pylist``: its C++ converter
looks for pandas' missing-value types, and tries again on every call while the import
fails): about 47 MiB of a worker's memory (its peak RSS 68 -> 115 MiB here) and part of
its start, for nothing delayline's workers use. :func:`refuse_pandas` makes every import
of pandas fail in the worker that calls it; pyarrow then converts without it, each
conversion trying the import once more (7 us here, against a conversion's 10: a worker
converts a few columns a batch, never a row at a time).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

from delayline.errors import ImportRefusedError

REFUSED = "pandas is not imported in delayline's Python workers (core/arrow_workers.py)"
"""The message of a refused import."""


def refuse_pandas() -> None:
    """In a Spark task's Python worker, make every later import of pandas fail with
    :class:`~delayline.errors.ImportRefusedError` (an ``ImportError``); elsewhere do
    nothing (a driver needs pandas: PySpark's ``mapInArrow`` asks for it there).

    For delayline's tasks, before their first Arrow conversion: nothing they run needs
    pandas (a call that does, ``Table.to_pandas``, fails naming this). Calls after the
    first cost a look at the import path; nothing happens once pandas was imported (it
    stays usable)."""
    if "pandas" in sys.modules or any(isinstance(f, _RefusePandas) for f in sys.meta_path):
        return
    from pyspark import TaskContext  # noqa: PLC0415 - Spark's side only

    if TaskContext.get() is None:  # not in a task: a driver, a test calling a task's code
        return
    sys.meta_path.insert(0, _RefusePandas())


class _RefusePandas(MetaPathFinder):
    """Fails every import of pandas or of a module of it."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname.partition(".")[0] == "pandas":
            raise ImportRefusedError(REFUSED)
        return None
