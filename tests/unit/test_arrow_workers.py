"""A Spark task's Python worker converts Python objects to Arrow without importing
pandas; a driver keeps it (each case in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

CONVERT = """
import sys
{before}
import pyarrow as pa
for _ in range(2):
    pa.array([b"id-1", None])
    pa.RecordBatch.from_pylist([{{"partition": 1, "notes": ["x"]}}])
print("pandas" in sys.modules)
"""
REFUSE = (
    "from pyspark import TaskContext\n"
    "TaskContext._setTaskContext(TaskContext())  # as Spark's worker does for a task\n"
    "from delayline.core.arrow_workers import refuse_pandas\n"
    "refuse_pandas()"
)


def _run(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_converting_python_objects_imports_pandas_unless_refused_in_a_task() -> None:
    assert _run(CONVERT.format(before="")) == ["True"]  # what it saves
    assert _run(CONVERT.format(before=REFUSE)) == ["False"]
    outside_a_task = REFUSE.replace("TaskContext._setTaskContext", "# ")
    assert _run(CONVERT.format(before=outside_a_task)) == ["True"]


def test_a_call_that_needs_pandas_fails_naming_why() -> None:
    code = CONVERT.format(before=REFUSE) + (
        "try:\n"
        '    pa.table({"a": [1]}).to_pandas()\n'
        "except ImportError as exc:\n"
        '    print("core/arrow_workers.py" in str(exc))\n'
    )
    assert _run(code) == ["False", "True"]


def test_nothing_changes_once_pandas_is_imported() -> None:
    code = CONVERT.format(before="import pandas\n" + REFUSE)
    code += 'print(type(pa.table({"a": [1]}).to_pandas()).__name__)\n'
    assert _run(code) == ["True", "DataFrame"]
