"""The garbage collector's pauses, timed and exported; the start-up heap settled."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import generate_latest

from delayline.core.heap import PAUSE_BUCKETS_S, YOUNG_OBJECTS, GcPauses, settle
from delayline.pipeline.metrics import PipelineMetrics


@pytest.fixture
def pauses() -> Iterator[GcPauses]:
    timed = GcPauses().install()
    yield timed
    timed.uninstall()


def test_a_pause_lands_in_the_first_bucket_that_holds_it() -> None:
    pauses = GcPauses()
    pauses.observe(2, 0.004)
    pauses.observe(2, 0.025)  # a bound is its own bucket's (Prometheus' le)
    pauses.observe(0, 3.0)  # past every bound
    counts, sum_s = pauses.snapshot()[2]
    assert counts[0] == 1
    assert counts[PAUSE_BUCKETS_S.index(0.025)] == 1
    assert sum(counts) == 2
    assert sum_s == pytest.approx(0.029)
    assert pauses.snapshot()[0][0][-1] == 1
    assert pauses.longest_s == 3.0


def test_every_collection_is_timed_once_installed(pauses: GcPauses) -> None:
    before = sum(pauses.snapshot()[2][0])
    gc.collect()
    gc.collect()
    assert sum(pauses.snapshot()[2][0]) == before + 2
    pauses.install()  # twice: still one callback
    gc.collect()
    assert sum(pauses.snapshot()[2][0]) == before + 3
    pauses.uninstall()
    gc.collect()
    assert sum(pauses.snapshot()[2][0]) == before + 3


def test_settled_objects_are_left_out_of_collections() -> None:
    thresholds = gc.get_threshold()
    try:
        kept = [[i] for i in range(1_000)]  # tracked containers, alive now
        settled = settle()
        # The youngest generation waits for more objects; the older ones as they were.
        assert gc.get_threshold() == (YOUNG_OBJECTS, *thresholds[1:])
        assert settled >= len(kept)
        # Settled objects may still be freed by reference counting (another thread's
        # frame, say) between the two reads: the count never grows, and falls by few.
        assert settled - 100 <= gc.get_freeze_count() <= settled
        walked = {id(o) for o in gc.get_objects()}
        assert not any(id(k) in walked for k in kept)
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_the_pauses_are_exported_as_a_histogram_by_generation() -> None:
    gc.collect()  # whatever installed them (another test) or not, the family is there
    text = generate_latest(PipelineMetrics().registry).decode()
    for generation in "012":
        assert f'delayline_gc_pause_seconds_bucket{{generation="{generation}",le="+Inf"}}' in text
        assert f'delayline_gc_pause_seconds_count{{generation="{generation}"}}' in text
