"""Log lines as JSON: the fields, the traceback, the call's extra fields, and the
set-ups that choose the format (the command line's, a Spark worker's)."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from delayline.core.logs import (
    LOG_FORMAT_ENV,
    JsonFormatter,
    configure,
    formatter,
    json_line,
    log_to_stderr,
)

CREATED = 1_893_456_000.25  # 2030-01-01T00:00:00.250Z


def record(msg: str = "fired %d of %s", args: tuple[object, ...] = (3, "t")) -> logging.LogRecord:
    made = logging.LogRecord("delayline.fire", logging.WARNING, "x.py", 7, msg, args, None)
    made.created, made.msecs = CREATED, 250.0
    return made


def test_a_record_is_one_json_object_with_time_level_logger_and_message() -> None:
    line = JsonFormatter().format(record())
    assert "\n" not in line
    assert json.loads(line) == {
        "time": "2030-01-01T00:00:00.250Z",
        "level": "WARNING",
        "logger": "delayline.fire",
        "message": "fired 3 of t",
    }


def test_the_time_is_utc_with_milliseconds_whatever_the_local_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "Pacific/Auckland")
    late = record()
    late.created, late.msecs = 1_893_455_999.999, 999.0
    assert json.loads(JsonFormatter().format(late))["time"] == "2029-12-31T23:59:59.999Z"


def test_a_traceback_is_exc_info_text_on_the_same_line() -> None:
    try:
        raise ValueError('bad "value"\nsecond line')
    except ValueError:
        failed = record("batch %d failed", (9,))
        failed.exc_info = sys.exc_info()
    line = JsonFormatter().format(failed)
    assert "\n" not in line
    got = json.loads(line)
    assert got["message"] == "batch 9 failed"
    assert got["exc_info"].startswith("Traceback (most recent call last):")
    assert got["exc_info"].endswith('ValueError: bad "value"\nsecond line')


def test_extra_fields_that_json_carries_are_kept_others_left_out() -> None:
    logger = logging.getLogger("delayline.test_logs")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    try:
        extra = {
            "schedule_id": "order-42",
            "counts": {"fired": 3, "handed": [1, 2]},
            "partition": 1,
            "lateness": float("nan"),  # not JSON
            "client": object(),  # not JSON
            "level_name": None,
        }
        logger.warning("delivered", extra=extra)
    finally:
        logger.removeHandler(handler)
    got = json.loads(stream.getvalue())
    assert got.pop("time")
    assert got == {
        "level": "WARNING",
        "logger": "delayline.test_logs",
        "message": "delivered",
        "schedule_id": "order-42",
        "counts": {"fired": 3, "handed": [1, 2]},
        "partition": 1,
        "level_name": None,
    }


def test_an_extra_field_never_replaces_one_of_the_line_s_own() -> None:
    clash = record()
    clash.__dict__.update(level="DEBUG", time="yesterday", logger="other")
    got = json.loads(JsonFormatter().format(clash))
    assert (got["level"], got["time"], got["logger"]) == (
        "WARNING",
        "2030-01-01T00:00:00.250Z",
        "delayline.fire",
    )


@pytest.mark.parametrize(("name", "json_lines"), [("json", True), (" JSON ", True),
                                                  ("text", False), ("xml", False)])  # fmt: skip
def test_formatter_of_each_name(name: str, json_lines: bool) -> None:
    assert isinstance(formatter(name), JsonFormatter) is json_lines
    line = formatter(name).format(record())
    assert line.startswith("{") is json_lines
    if not json_lines:
        assert line.endswith(" WARNING delayline.fire: fired 3 of t")


def test_json_line_wraps_another_program_s_line() -> None:
    got = json.loads(json_line('Exception in thread "main" java.lang.Error: x', "spark.stderr"))
    assert (got["level"], got["logger"]) == ("WARNING", "spark.stderr")
    assert got["message"] == 'Exception in thread "main" java.lang.Error: x'
    assert got["time"].endswith("Z")


@pytest.fixture
def bare_logger(monkeypatch: pytest.MonkeyPatch) -> logging.Logger:
    """The ``delayline`` logger without handlers (as in a fresh Spark worker)."""
    logger = logging.getLogger("delayline")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logger.level)
    return logger


@pytest.mark.parametrize(("env", "json_lines"), [("json", True), ("text", False), (None, False)])
def test_a_spark_worker_logs_in_the_format_it_inherits(
    bare_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch, env: str | None, json_lines: bool
) -> None:
    if env is None:
        monkeypatch.delenv(LOG_FORMAT_ENV, raising=False)
    else:
        monkeypatch.setenv(LOG_FORMAT_ENV, env)
    log_to_stderr()
    log_to_stderr()  # once per process
    assert len(bare_logger.handlers) == 1
    assert bare_logger.level == logging.WARNING
    assert isinstance(bare_logger.handlers[0].formatter, JsonFormatter) is json_lines


def test_configure_sets_up_the_root_logger_once(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", root.level)
    configure(logging.INFO, "json")
    configure(logging.DEBUG, "text")  # as basicConfig: the first set-up stays
    assert len(root.handlers) == 1
    assert isinstance(root.handlers[0].formatter, JsonFormatter)
    assert root.level == logging.INFO


def test_the_jvm_s_stderr_lines_become_json_lines() -> None:
    pytest.importorskip("pyspark")
    from delayline.pipeline.session import as_json_line  # noqa: PLC0415 - pyspark

    own = b'{"time":"2030-01-01T00:00:00.250Z","level":"ERROR","logger":"o.a.s","message":"m"}\n'
    assert as_json_line(own) == own
    wrapped = as_json_line(b"OpenJDK 64-Bit Server VM warning: \xff sharing\n")
    assert wrapped.endswith(b"}\n")
    got = json.loads(wrapped)
    assert got["logger"] == "spark.stderr"
    assert got["message"] == "OpenJDK 64-Bit Server VM warning: \ufffd sharing"
