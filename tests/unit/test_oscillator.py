"""The oscillator's plan (which seconds it writes) and its settings."""

from __future__ import annotations

import pytest

from delayline.errors import ConfigError
from delayline.oscillator.service import OscillatorStats
from delayline.oscillator.ticks import TickPlan, tick_key, tick_second
from delayline.pipeline.config import PipelineConfig


def test_a_fresh_topic_starts_at_the_current_second() -> None:
    plan = TickPlan()
    assert list(plan.due(1_700_000_000_999)) == [1_700_000_000]


def test_every_second_after_the_newest_is_written_once() -> None:
    plan = TickPlan(100)
    assert list(plan.due(100_999)) == []
    assert plan.next_ms(100_999) == 101_000
    assert list(plan.due(101_000)) == [101]
    plan.seen(101, 101_400)
    assert list(plan.due(101_500)) == []


def test_a_pause_is_caught_up_second_by_second_oldest_first() -> None:
    plan = TickPlan(100)
    assert list(plan.due(105_200)) == [101, 102, 103, 104, 105]
    assert plan.next_ms(105_200) == 105_200  # due now


def test_a_tick_written_by_another_oscillator_is_not_written_again() -> None:
    plan = TickPlan(100)
    plan.seen(102, 102_100)  # the other one was quicker
    assert list(plan.due(102_500)) == []
    plan.seen(90, 102_500)  # an old one read late changes nothing
    assert plan.newest == 102


def test_a_tick_from_the_future_is_not_believed() -> None:
    """A stray record keyed like a tick, or a fast clock elsewhere: taken as written it
    would stop this oscillator until its own clock caught up."""
    plan = TickPlan(100)
    assert not plan.seen(999_999_999_999, 100_500)
    assert not plan.seen(106, 100_500)
    assert plan.seen(105, 100_500)  # a few seconds ahead: another host's clock
    assert plan.newest == 105


@pytest.mark.parametrize(
    ("key", "second"),
    [(b"1700000000", 1_700_000_000), (b"0", 0), (b"", None), (None, None), (b"-1", None),
     (b"1.5", None), (b"12a", None), (b"1" * 13, None)],
)  # fmt: skip
def test_tick_keys(key: bytes | None, second: int | None) -> None:
    assert tick_second(key) == second
    if second is not None:
        assert tick_key(second) == key


def test_metrics_text() -> None:
    text = OscillatorStats(last_tick_s=1_700_000_000, ticks_written=3).prometheus()
    assert "delayline_oscillator_last_tick_seconds 1700000000\n" in text
    assert "# TYPE delayline_oscillator_ticks_written_total counter\n" in text
    assert "delayline_oscillator_ticks_written_total 3\n" in text


def test_the_oscillator_waker_reads_the_oscillator_topic_by_default() -> None:
    assert PipelineConfig(waker="oscillator").wake_topic_name == "oscillator"
    assert PipelineConfig(waker="oscillator", wake_topic="ticks").wake_topic_name == "ticks"
    assert PipelineConfig().wake_topic_name == "delayline-wake"
    with pytest.raises(ConfigError, match="unknown waker"):
        PipelineConfig(waker="cron")


def test_the_oscillator_waker_needs_the_wake_mode() -> None:
    with pytest.raises(ConfigError, match="drop --waker oscillator"):
        PipelineConfig(waker="oscillator", wake=False)
