"""Optional extras: which commands need one, and one clear line when it is missing.

``pip install delayline`` is the client (confluent-kafka only): ``import delayline``,
``delayline --help`` and the commands that only talk to Kafka work with it. The
pipeline, the API and the benchmark bring their dependencies as extras (pyproject.toml);
a command that needs one checks for it before importing anything heavy.
"""

from __future__ import annotations

import argparse
import importlib.util

from delayline.errors import DelaylineError

PIPELINE_MODULES = ("pyspark", "pandas", "pyarrow", "google.protobuf", "prometheus_client")

EXTRAS: dict[str, tuple[str, ...]] = {
    # delayline run: Spark (pandas, pyarrow, protobuf for transformWithStateInPandas),
    # prometheus_client for its metrics server.
    "pipeline": PIPELINE_MODULES,
    # delayline committer: its metrics server; numpy, its watch's memory of a backlog.
    "committer": ("prometheus_client", "numpy"),
    # delayline api; httpx for the demo, which calls the API as a user would.
    "api": ("fastapi", "uvicorn", "prometheus_client", "httpx"),
    # delayline bench: starts the pipeline, records the pyspark version, plots.
    "bench": (*PIPELINE_MODULES, "matplotlib"),
}
"""Each extra of pyproject.toml, by the modules that show it is installed."""


class MissingExtraError(DelaylineError):
    """A command needs an optional extra that is not installed."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package, or a broken __spec__
        return False


def missing_extras(*extras: str) -> list[str]:
    """Those of ``extras`` (names in :data:`EXTRAS`) not installed here."""
    return [extra for extra in extras if not all(map(_installed, EXTRAS[extra]))]


def missing_message(command: str, extras: list[str]) -> str:
    """The line shown, e.g. ``delayline run needs the pipeline extra: pip install
    'delayline[pipeline]'``."""
    names = " and ".join(extras)
    noun = "extra" if len(extras) == 1 else "extras"
    return (
        f"delayline {command} needs the {names} {noun}: pip install 'delayline[{','.join(extras)}]'"
    )


def require_extras(command: str, *extras: str) -> None:
    """Call before a command imports what ``extras`` provide.

    Raises:
        MissingExtraError: one of them is not installed; the message says what to install.
    """
    missing = missing_extras(*extras)
    if missing:
        raise MissingExtraError(missing_message(command, missing))


def add_unavailable(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    command: str,
    extras: list[str],
    help: str,
) -> None:
    """Register ``command``, whose module cannot even be imported without ``extras``,
    as a command that says which extras to install, whatever its arguments."""
    message = missing_message(command, extras)
    parser = sub.add_parser(
        command,
        help=f"{help} [not installed: pip install 'delayline[{','.join(extras)}]']",
        description=message,
    )

    def unavailable(_args: argparse.Namespace) -> int:
        raise MissingExtraError(message)

    parser.set_defaults(func=unavailable, ignores_arguments=True)
