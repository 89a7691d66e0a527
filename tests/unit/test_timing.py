"""Warnings that name a slow step."""

from __future__ import annotations

import logging

import pytest

from delayline.core.timing import warn_if_slow

log = logging.getLogger("delayline.test")


def test_a_slow_step_is_named_with_its_duration(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "delayline.test"), warn_if_slow(log, "flushing", 0):
        pass
    assert [r.getMessage().split(" took ")[0] for r in caplog.records] == ["flushing"]
    assert caplog.records[0].getMessage().endswith(" s")


def test_a_quick_step_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "delayline.test"), warn_if_slow(log, "flushing", 60):
        pass
    assert caplog.records == []


def test_a_step_that_fails_slowly_is_named_too(caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, "delayline.test"),
        pytest.raises(RuntimeError),
        warn_if_slow(log, "committing", 0),
    ):
        raise RuntimeError("broker gone")
    assert caplog.records[0].getMessage().startswith("committing took")
