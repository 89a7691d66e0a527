"""A cancel acknowledged 20 ms or more before its schedule's due time wins, with no
exception, while 3,000 schedules a second of other traffic keep the pipeline's hand-over
transactions open in the schedules partitions; neither a ``read_committed`` nor a
``read_uncommitted`` reader of the target sees a cancelled schedule, or anything early."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

from confluent_kafka import Producer

from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import DeliveryCollector
from delayline.kafka.config import kafka_client_config
from tests.support import RunningPipeline

LOAD_PER_S = 3_000
LOAD_S = 18
PROBES = 40
PROBE_SPACING_MS = 250
FIRST_PROBE_MS = 7_000
"""After the load starts: the pipeline is handing over load schedules by then."""
CANCEL_AHEAD_MS = 70
"""When each cancel is written before its due time; its acknowledgement then comes
20-70 ms before it (measured here under this load: the producer's round trip)."""
GUARANTEE_MS = 20
"""A cancel acknowledged at least this long before the due time wins (the contract)."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def write_load(pipeline: RunningPipeline, target: str, stop: threading.Event) -> int:
    """Schedules at :data:`LOAD_PER_S` a second for :data:`LOAD_S`, each due 2-4 s after
    it is written (handed over all along); returns how many."""
    written = 0
    started = time.monotonic()
    tenth = LOAD_PER_S // 10
    with pipeline.client() as client:
        while not stop.is_set() and written < LOAD_PER_S * LOAD_S:
            for _ in range(tenth):
                client.schedule(
                    f"load-{target}-{written}",
                    b"load",
                    target,
                    delay=timedelta(milliseconds=2_000 + (written * 7) % 2_000),
                )
                written += 1
            # A tenth of a second's worth, then wait for the next tenth.
            time.sleep(max(0.0, started + written / LOAD_PER_S - time.monotonic()))
    return written


def test_a_cancel_acknowledged_20_ms_before_due_wins_under_load(
    pipeline: RunningPipeline,
) -> None:
    load_target = pipeline.target()
    target = pipeline.target()
    start = now_ms()
    dues = {
        f"probe-{target}-{i}": start + FIRST_PROBE_MS + i * PROBE_SPACING_MS for i in range(PROBES)
    }
    acked: dict[str, int] = {}
    stop = threading.Event()
    loaded: list[int] = []
    load = threading.Thread(target=lambda: loaded.append(write_load(pipeline, load_target, stop)))
    with (
        DeliveryCollector(pipeline.bootstrap, [target]) as committed,
        DeliveryCollector(pipeline.bootstrap, [target], read_committed=False) as uncommitted,
    ):
        with pipeline.client() as client:
            for sid, due in dues.items():
                client.schedule(sid, b"probe", target, at=ms_to_datetime(due))
        load.start()
        canceller = Producer(kafka_client_config(pipeline.bootstrap, **{
            "enable.idempotence": True, "acks": "all", "linger.ms": 0,
            "partitioner": "murmur2_random",
        }))  # fmt: skip
        try:
            for sid, due in dues.items():
                time.sleep(max(0.0, (due - CANCEL_AHEAD_MS - now_ms()) / 1000))

                def on_ack(err: object, _msg: object, sid: str = sid) -> None:
                    assert err is None, f"cancel of {sid} not written: {err}"
                    acked[sid] = now_ms()

                canceller.produce(pipeline.topics.schedules, None, sid.encode(), on_delivery=on_ack)
                canceller.flush(10)
        except BaseException:
            stop.set()  # the load ends with the test
            raise
        finally:
            load.join()
        time.sleep(3)  # a delivery of the last probe, if any, would have come by now
        seen = {"read_committed": committed.snapshot(), "read_uncommitted": uncommitted.snapshot()}

    assert loaded, "the load was not written"
    assert loaded[0] == LOAD_PER_S * LOAD_S, f"load written: {loaded[0]}"
    in_time = {sid for sid, at in acked.items() if dues[sid] - at >= GUARANTEE_MS}
    ahead = sorted(dues[sid] - at for sid, at in acked.items())
    # Not a vacuous test: most cancels must fall under the guarantee.
    assert len(in_time) >= PROBES // 2, f"acknowledged before due (ms): {ahead}"
    for reader, deliveries in seen.items():
        delivered = Counter(d.schedule_id for d in deliveries)
        lost = sorted(sid for sid in in_time if delivered[sid])
        assert not lost, (
            f"{reader}: {len(lost)} of {len(in_time)} cancels acknowledged >= {GUARANTEE_MS} ms "
            f"before due were delivered anyway: {lost[:5]}"
        )
        early = [d.schedule_id for d in deliveries if d.arrival_ms < dues[d.schedule_id or ""]]
        assert not early, f"{reader}: seen before due: {early}"
