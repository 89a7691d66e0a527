"""Where delayline's log lines go, and in which format: one for the command line and
Spark's Python workers alike.

``text`` is :data:`FORMAT`; ``json`` is one JSON object per line (:class:`JsonFormatter`),
for a log collector. Spark's Python workers read the format from :data:`LOG_FORMAT_ENV`,
which the command line sets for the processes it starts.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TEXT = "text"
JSON = "json"
LOG_FORMATS = (TEXT, JSON)
LOG_FORMAT_ENV = "DELAYLINE_LOG_FORMAT"
"""``--log-format``'s variable; Spark's Python workers inherit it from the driver."""

_RECORD_FIELDS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
}
"""What every log record has: the rest came with the call's ``extra=``."""


class JsonFormatter(logging.Formatter):
    """A record as one JSON object on one line: ``time`` (UTC, ISO 8601 with
    milliseconds), ``level``, ``logger``, ``message``, ``exc_info`` (the traceback) and
    ``stack_info`` when the record has them, then each ``extra=`` field of the call whose
    value JSON can carry (others are left out; none overrides the fields above)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": utc_time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc_info"] = record.exc_text
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        for key, value in _extras(record):
            line.setdefault(key, value)
        return json.dumps(line, allow_nan=False)


def utc_time(record: logging.LogRecord) -> str:
    """When ``record`` was made: ``2030-01-01T00:00:00.250Z``."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


def _extras(record: logging.LogRecord) -> Iterator[tuple[str, Any]]:
    for key, value in record.__dict__.items():
        if key in _RECORD_FIELDS or key.startswith("_"):
            continue
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            continue
        yield key, value


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of ``log_format`` (:data:`LOG_FORMATS`; anything else reads as
    ``text``)."""
    if log_format.strip().lower() == JSON:
        return JsonFormatter()
    return logging.Formatter(FORMAT)


def log_format_in_env() -> str:
    """The format :data:`LOG_FORMAT_ENV` names (``text`` when unset or unknown)."""
    return JSON if os.environ.get(LOG_FORMAT_ENV, "").strip().lower() == JSON else TEXT


def json_line(text: str, logger: str, level: int = logging.WARNING) -> str:
    """``text``, a line another program wrote (without its newline), as a JSON log line
    of ``logger`` made now."""
    return JsonFormatter().format(logging.LogRecord(logger, level, "", 0, text, None, None))


def configure(level: int, log_format: str = TEXT) -> None:
    """Send records of ``level`` and above to stderr in ``log_format`` (the command
    line's set-up; as :func:`logging.basicConfig`, nothing changes where the root logger
    has a handler already)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format))
    logging.basicConfig(level=level, handlers=[handler])


def log_to_stderr() -> None:
    """Warnings of a Python worker reach the pipeline's stderr (once per process), in the
    format :data:`LOG_FORMAT_ENV` names."""
    root = logging.getLogger("delayline")
    # The package's own NullHandler (a library's default) does not count.
    if not any(not isinstance(h, logging.NullHandler) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(formatter(log_format_in_env()))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
