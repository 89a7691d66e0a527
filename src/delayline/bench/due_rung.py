"""The ladder's ``due`` rung: the whole pipeline, every schedule falling due in the run.

The other rungs read schedules due an hour ahead, so nothing is raised, handed over or
delivered. Here each run writes its own schedules to a fresh schedules topic (before the
run's CPU is counted), due together a while after the pipeline can have read them all,
and the run lasts until the committer has delivered every one: what raising, handing
over and delivering add to the ``full`` rung below it. They fall due within
:data:`SPREAD_MS`, so the hold raises them early as the burst they are
(:data:`delayline.holds.fold.BURST_LEAD_MS`). The wait for the due time is counted too:
an idle pipeline costs a few % of a core, little beside the schedules' own CPU.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import SystemClock, ms_to_datetime
from delayline.kafka.topics import TopicsConfig, ensure_topics
from delayline.pipeline.config import PipelineConfig

READ_PER_S = 2_000
"""The slowest the pipeline is assumed to read here (the ``full`` rung read 4-6k/s): the
schedules fall due once ``count / READ_PER_S`` seconds have passed."""
SPREAD_MS = 10_000
"""The schedules are due evenly over this long."""
PAYLOAD = b"x" * 100


def due_run(config: PipelineConfig, count: int, n: int) -> PipelineConfig:
    """``config`` for run ``n`` of the rung: a schedules topic and a target of its own,
    the schedules written (``count``, due from ``count / READ_PER_S`` seconds on) and
    acknowledged."""
    topic = f"{config.query_name}-schedules"
    target = f"{topic}-target"
    topology = replace(config.topology, schedules_topics=(topic,))
    ensure_topics(TopicsConfig(topology, partitions=4, target_topics=(target,)))
    first_ms = SystemClock().now_ms() + count * 1000 // READ_PER_S
    client = Scheduler(ClientConfig(bootstrap_servers=topology.bootstrap_servers,
                                    schedules_topic=topic))  # fmt: skip
    with client:
        for i in range(count):
            at = ms_to_datetime(first_ms + i * SPREAD_MS // count)
            client.schedule(f"due-{n}-{i}", PAYLOAD, target, at=at)
        client.flush()
    return replace(config, topology=topology)


def delivered(pipeline: Any) -> int:
    """Schedules the pipeline (a :class:`delayline.pipeline.job.Pipeline`) delivered so
    far, by its own metrics (committed transactions only)."""
    value = pipeline.metrics.registry.get_sample_value("delayline_schedules_fired_total")
    return 0 if value is None else int(value)
