"""Finishing a silent pipeline's task records, as that pipeline.

A task record whose lease ended, of a run whose heartbeat is older than the lease, is
taken (SEIZE renews its lease) and its events written exactly as its owner would have:
the owner's run, batch and partition marker on the owner's commits topic, under the
owner's transactional id (whose initialisation fences every producer the owner had, so
it can never commit that batch afterwards), with the owner's topics, lead and maximum
lateness. If the owner had committed the batch, the marker says so and nothing is
written. The record is then marked done: the owner's replay, if it comes back, writes
nothing. What is handed over goes to the taker's in-flight topic, for its committer.

Heartbeats and leases compare the pipelines' clocks: keep them within a small part of
the lease (NTP). A pipeline taken over while alive is safe (it is fenced), only slower.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any, TypeVar

from delayline.contract.formats import REDIS_TASK
from delayline.contract.topology import Topology
from delayline.core.identifiers import partition_transactional_id
from delayline.errors import FormatVersionError
from delayline.holds.hold import Deliver, RunSettings
from delayline.holds.redis.config import RedisHoldConfig
from delayline.holds.redis.store import RedisStore, TaskRecord
from delayline.holds.registry import settings_of

log = logging.getLogger(__name__)

S = TypeVar("S", bound=RunSettings)


def owner_json(config: RunSettings) -> str:
    """What another pipeline needs to finish one of this pipeline's tasks as it."""
    t = config.topology
    return json.dumps(
        {
            "format": REDIS_TASK.current,
            "txn": config.transactional_id,
            "commits": t.commits_topic,
            "dead_letters": t.dead_letter_topic,
            "history": t.history_topic,
            "schedules": list(t.schedules_topics),
            "envelopes": list(t.envelope_topics),
            "timer_requests": list(t.timer_request_topics),
            "lead_ms": config.lead_ms,
            "max_lateness_ms": config.max_lateness_ms,
        }
    )


def as_owner(config: S, owner: dict[str, Any]) -> S:
    """``config`` (ours: cluster, in-flight topic) with the owner's topics and timing."""
    topology = Topology(
        bootstrap_servers=config.topology.bootstrap_servers,
        schedules_topics=tuple(owner["schedules"]),
        dead_letter_topic=owner["dead_letters"],
        history_topic=owner["history"],
        commits_topic=owner["commits"],
        envelope_topics=tuple(owner["envelopes"]),
        timer_request_topics=tuple(owner["timer_requests"]),
    )
    return replace(
        config,
        topology=topology,
        lead_ms=owner["lead_ms"],
        max_lateness_ms=owner["max_lateness_ms"],
    )


def take_over(
    store: RedisStore, config: RunSettings, run: str, now_ms: int, deliver: Deliver
) -> int:
    """Finish the task records of silent runs whose lease ended, through the fire stage
    ``deliver``; how many.

    A record that fails is logged and left: its lease (renewed when taken) ends again
    and it is tried again, by this or another pipeline.
    """
    seen = store.last_seen()
    lease = settings_of(config, RedisHoldConfig).lease_ms
    finished = ours = alive = 0
    expired = store.expired_tasks(now_ms)
    for key in expired:
        owner = store.task_run(key)
        if owner is None or owner == run:
            ours += owner == run
            continue  # gone, or ours: released once Spark is past it
        beat = seen.get(owner)
        if beat is not None and beat > now_ms - lease:
            alive += 1
            continue  # alive (an idle pipeline releases on its next batch)
        record = store.seize(key, now_ms)
        if record is None:
            continue
        try:
            written = _finish_as_owner(store, config, record, deliver)
        except FormatVersionError:
            raise  # a newer release's data: a later try meets it again; stop and say so
        except Exception as exc:  # any other failure: leave it for a later try
            log.warning(
                "could not finish batch %d partition %d of silent run %s (%s: %s); "
                "tried again once its lease ends",
                record.batch_id,
                record.partition,
                record.run,
                type(exc).__name__,
                exc,
            )
            continue
        store.finish(key)
        finished += 1
        log.warning(
            "took over batch %d partition %d of silent run %s: %s",
            record.batch_id,
            record.partition,
            record.run,
            written,
        )
    if expired and not finished:
        log.debug(
            "take-over: %d task record(s) past their lease, none taken (%d ours, %d of "
            "runs with a fresh heartbeat)",
            len(expired),
            ours,
            alive,
        )
    return finished


def _finish_as_owner(
    store: RedisStore, config: RunSettings, record: TaskRecord, deliver: Deliver
) -> str:
    owner = json.loads(record.owner)
    REDIS_TASK.check(int(owner.get("format", 1)), f"Redis task {record.run}/{record.partition}")
    theirs = as_owner(config, owner)
    events = store.record_events(record, theirs.max_lateness_ms)
    txn = partition_transactional_id(owner["txn"], record.partition)
    return deliver(events, theirs, record.partition, record.batch_id, record.run, txn)
