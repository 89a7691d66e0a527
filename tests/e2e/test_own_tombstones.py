"""delayline's own tombstones stop before the hold, unless the committer's watch asks.

The tombstone a hand-over writes carries the mark of the pipeline's start; the JVM hold
drops those of its own start before the shuffle (one row a schedule through the state),
reads every other (an earlier start's, a rebuild's), and reads the copy the watch writes
marked for review when a record of the id landed between the version and its tombstone.
Tombstones are written here by hand, with the shared pipeline's mark read off a real one.
"""

from __future__ import annotations

import time
import uuid

import pytest

from delayline.contract import ConsumedRecord, OutgoingRecord
from delayline.contract import headers as h
from delayline.dev.harness import DeliveryCollector
from delayline.kafka.produce import produce_one
from delayline.kafka.reader import read_topic
from tests.support import RunningPipeline, ends_now, eventually

Since = dict[int, int]
"""Where each partition of the schedules topic ended when a test began."""


def _records(pipeline: RunningPipeline, key: str, since: Since) -> list[ConsumedRecord]:
    """The records of ``key`` in the shared pipeline's schedules topic written after
    ``since`` (:func:`ends_now`), in offset order."""
    found = read_topic(pipeline.bootstrap, pipeline.topics.schedules, since=since)
    return sorted((r for r in found if r.key == key.encode()), key=lambda r: r.offset)


def _written(pipeline: RunningPipeline, sid: str, since: Since) -> list[ConsumedRecord]:
    """The records of ``sid``, once there are some."""
    return eventually(lambda: _records(pipeline, sid, since) or None, 30, f"the records of {sid}")


def _header(record: ConsumedRecord, name: str) -> bytes | None:
    return next((value for key, value in record.headers if key == name), None)


def _mark(pipeline: RunningPipeline, target: str, since: Since) -> bytes:
    """The mark on the tombstones this start of the pipeline hands over, read off the
    tombstone of a schedule it hands over now."""
    sid = f"mark-{uuid.uuid4().hex[:8]}"
    with pipeline.client() as client:
        client.schedule(sid, b"x", target, delay=1)
        client.flush()

    def marked() -> bytes | None:
        return next(
            (m for r in _records(pipeline, sid, since) if r.value is None
             for m in [_header(r, h.PLAN)] if m),
            None,
        )  # fmt: skip

    return eventually(marked, 90, f"the hand-over's tombstone of {sid}")


@pytest.fixture(scope="module")
def mark(pipeline: RunningPipeline) -> bytes:
    """The shared pipeline's start's mark, read once for the module's tests (one
    hand-over, its tombstone read back)."""
    return _mark(
        pipeline, pipeline.target(), ends_now(pipeline.bootstrap, pipeline.topics.schedules)
    )


def _own_tombstone(
    pipeline: RunningPipeline, version: ConsumedRecord, *more: tuple[str, bytes]
) -> int:
    """Write delayline's own tombstone of ``version`` after it; its offset."""
    headers = ((h.FIRED_OFFSET, str(version.offset).encode()), *more)
    record = OutgoingRecord(version.topic, version.key, None, headers, version.partition)
    return produce_one(pipeline.bootstrap, record, 10_000)[1]


def test_a_version_written_before_its_ids_marked_tombstone_is_reviewed_and_rewritten(
    pipeline: RunningPipeline, mark: bytes
) -> None:
    """v0, then v1 (an update), then the start's own tombstone of v0, as when v1 is
    written while the batch that raised v0 runs: the hold drops that tombstone, which
    would hide v1 from compaction; the watch writes it again marked for review, and the
    hold, reading that, writes v1 again after it. One copy, after the review: the
    tombstone itself never reached the hold (it would have asked for a copy too)."""
    target = pipeline.target()
    since = ends_now(pipeline.bootstrap, pipeline.topics.schedules)
    sid = f"review-{uuid.uuid4().hex[:8]}"
    with pipeline.client() as client:
        client.schedule(sid, b"v0", target, delay=3600)
        client.schedule(sid, b"v1", target, delay=3600)
        client.flush()
    v0, v1 = _written(pipeline, sid, since)
    tombstone = _own_tombstone(pipeline, v0, (h.PLAN, mark))

    def copied() -> list[ConsumedRecord] | None:
        after = [r for r in _records(pipeline, sid, since) if r.offset > tombstone]
        return after if any(r.value is not None for r in after) else None

    after = eventually(copied, 90, f"a copy of {sid}'s update after its tombstone")
    time.sleep(5)  # a second copy, if the hold had read the tombstone too, lands by now
    after = [r for r in _records(pipeline, sid, since) if r.offset > tombstone]
    review, copy = after
    assert review.value is None
    assert review.headers == ((h.FIRED_OFFSET, str(v0.offset).encode()), (h.PLAN, mark),
                              (h.REVIEW, b"1"))  # fmt: skip
    assert (copy.value, _header(copy, h.COPY_OF)) == (b"v1", str(v1.offset).encode())


def test_the_hold_skips_its_starts_own_tombstones_and_reads_any_other(
    pipeline: RunningPipeline, mark: bytes
) -> None:
    """Two schedules due in 10 s, each followed at once by delayline's own tombstone of
    it: one marked by this start, which the hold never reads (the schedule goes out),
    one marked by another start, which the hold reads as it always did, ending it."""
    target = pipeline.target()
    since = ends_now(pipeline.bootstrap, pipeline.topics.schedules)
    kept, ended = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("kept", "ended"))
    with DeliveryCollector(pipeline.bootstrap, [target]) as seen:
        with pipeline.client() as client:
            for sid in (kept, ended):
                client.schedule(sid, b"p", target, delay=10)
            client.flush()
        for sid, plan in ((kept, mark), (ended, b"another start")):
            _own_tombstone(pipeline, _written(pipeline, sid, since)[0], (h.PLAN, plan))
        seen.wait_for(lambda d: any(x.schedule_id == kept for x in d), timeout_s=60)
        time.sleep(3)
        delivered = [d.schedule_id for d in seen.snapshot() if d.schedule_id in (kept, ended)]
    assert delivered == [kept]
