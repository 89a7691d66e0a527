"""Every error delayline raises derives from ``DelaylineError`` (some also from
``ValueError``, where callers expect one): no bare built-in exception is raised, and
every exception class delayline defines joins the tree."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

import delayline
from delayline.errors import DelaylineError

SRC = Path(delayline.__file__).parent
BUILTIN_ERRORS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
ALLOWED = {"NotImplementedError", "StopIteration", "KeyboardInterrupt", "SystemExit"}
"""Python's protocols, not errors: an abstract method, an iterator's end, a signal."""


def raised_builtins(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = call.id if isinstance(call, ast.Name) else None
            if name in BUILTIN_ERRORS and name not in ALLOWED:
                found.append(f"{path.relative_to(SRC)}:{node.lineno} raises {name}")
    return found


def test_no_builtin_exception_is_raised() -> None:
    found = [hit for path in sorted(SRC.rglob("*.py")) for hit in raised_builtins(path)]
    assert found == []


def test_every_exception_class_joins_the_tree() -> None:
    outside = []
    for info in pkgutil.walk_packages([str(SRC)], "delayline."):
        if info.name.endswith("__main__"):
            continue  # runs the command line when imported
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra this environment lacks
            continue
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != info.name or not issubclass(cls, BaseException):
                continue
            if not issubclass(cls, DelaylineError):
                outside.append(f"{info.name}.{name}")
    assert outside == []
