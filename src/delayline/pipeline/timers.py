"""The waker of a pipeline started, and the timers a checkpoint holds given to it after
a (re)start (:mod:`delayline.pipeline.wake`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping

from delayline.committer.arrivals import Arrivals
from delayline.kafka.topics import ensure_wake_topic
from delayline.pipeline.config import PipelineConfig
from delayline.pipeline.need import Need
from delayline.pipeline.wake import Waker

log = logging.getLogger(__name__)


def start_waker(
    config: PipelineConfig, open_gate: Callable[[], None] | None, arrivals: Arrivals | None
) -> Waker:
    """Make the wake topic of the pipeline ``config`` describes and start its waker;
    with a gated source, it follows the need and calls ``open_gate`` after each wake."""
    ensure_wake_topic(config.topology.bootstrap_servers, config.wake_topic_name)
    need = None
    if config.gated:
        need = Need(config.lead_ms, config.batch_wait_ms, config.batch_records)
    waker = Waker(
        config.topology.bootstrap_servers,
        config.wake_topic_name,
        heartbeat_ms=config.heartbeat_interval_ms,
        poll_ms=config.trigger_interval_ms,
        need=need,
        arrivals=arrivals,
        open_gate=open_gate,
    )
    waker.start()
    return waker


def load_timers(
    waker: Waker,
    read_timers: Callable[[], Mapping[int, int] | Iterable[int]],
    first_batch_done: Callable[[], bool],
    where: str,
) -> None:
    """Give ``waker`` the timers ``read_timers`` returns (as :meth:`Waker.add` takes
    them) as its complete plan, once ``first_batch_done`` says the first batch is over
    (nothing if the waker stops first; the caller says when no batch is coming any
    more, a stopped or failed query). Blocks: meant for a thread of its own.

    Read after the first batch: reading every stored timer (20 s with 1M pending here)
    beside the first batch slowed that batch, the one a restart waits for. Until the
    timers are in, and when reading them fails, the waker wakes every trigger interval,
    so nothing is late. ``where`` names the timers' place in log lines.
    """
    while not first_batch_done():
        if waker.stopped:
            return
        time.sleep(0.2)
    started = time.monotonic()
    try:
        slots = read_timers()
    except Exception as exc:  # any failure: keep waking every trigger interval
        if not waker.stopped:  # not a read cut short by a stop
            log.warning(
                "could not read the timers in %s (%s); micro-batches keep running every "
                "trigger interval",
                where,
                (str(exc).splitlines() or [type(exc).__name__])[0],
            )
        return
    waker.add(slots, complete=True)
    log.info("timers in %s read in %.1f s", where, time.monotonic() - started)
