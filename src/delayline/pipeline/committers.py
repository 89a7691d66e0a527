"""The committers of a pipeline: the one ``delayline run`` keeps, and those
``delayline committer`` runs beside it (:mod:`delayline.committer.service`).

Every committer of a pipeline is made here from the pipeline's settings, so they agree
on the group, the in-flight topic and what a delivery may do.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from typing import Any

from delayline.committer.arrivals import Arrivals
from delayline.committer.config import RUN_COMMITTER_NAME, CommitterConfig
from delayline.committer.service import Committer
from delayline.core.identifiers import committer_group, committer_name
from delayline.errors import KafkaUnavailableError
from delayline.fire.left_open import end_left_open
from delayline.kafka.groups import group_members
from delayline.kafka.topics import ensure_inflight_topic, partition_count
from delayline.pipeline.config import (
    DELIVER_FIRST_MAX_MS,
    DELIVER_FIRST_READY_MS,
    PipelineConfig,
)
from delayline.pipeline.metrics import PipelineMetrics

log = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT_MS = 10_000
"""How long a committer that died keeps its partitions: Kafka's least by default is 6 s
(``group.min.session.timeout.ms``); shorter would move partitions on a long pause."""
GROUP_LOOKUP_S = 0.5
"""How long ``/progress`` waits for the group's members (the API waits a second for it)."""


def committer_config(
    config: PipelineConfig,
    name: str,
    *,
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
    with_checkpoint: bool = True,
) -> CommitterConfig:
    """The settings of the committer called ``name`` of the pipeline ``config`` describes.

    ``with_checkpoint``: it may read the pipeline's checkpoint (it runs beside it), so
    after a restart its watch reads the input from where the replayed batch did.
    """
    topology = config.topology
    return CommitterConfig(
        bootstrap_servers=topology.bootstrap_servers,
        inflight_topic=config.inflight_topic_name,
        commits_topic=topology.commits_topic,
        transactional_id=config.transactional_id,
        dead_letter_topic=topology.dead_letter_topic,
        history_topic=topology.history_topic,
        max_lateness_ms=config.max_lateness_ms,
        allowed_targets=topology.allowed_target_topics,
        topology=topology,
        checkpoint_dir=config.checkpoint_dir if with_checkpoint else None,
        name=name,
        session_timeout_ms=session_timeout_ms,
        target_rates=config.target_rates,
        write_ahead_topics=config.write_ahead_topics,
    )


def start_committer(
    config: PipelineConfig,
    committer_settings: CommitterConfig,
    metrics: PipelineMetrics,
    arrivals: Arrivals | None = None,
) -> tuple[Committer, bool]:
    """Make the in-flight topic (or grow it to ``config.inflight_partitions``), then
    start a committer counted in ``metrics`` (whose watch tells ``arrivals``, if given).
    Returns it, and whether the topic was just made (so nothing was handed over before).

    Raises:
        ClockSkewError: the host's and the broker's clocks disagree too much.
        TopicConfigError: the in-flight topic cannot be made or grown.
    """
    made = ensure_inflight_topic(
        config.topology.bootstrap_servers, config.inflight_topic_name, config.inflight_partitions
    )
    name = committer_settings.name
    committer = Committer(
        committer_settings,
        on_delivered=lambda d: metrics.observe_committed(d, name),
        arrivals=arrivals,
    )
    topic, bootstrap = config.inflight_topic_name, config.topology.bootstrap_servers
    metrics.watch_committer(
        committer.status,
        lambda: group_view(committer),
        (topic, lambda: partition_count(bootstrap, topic, 5.0)),
    )
    committer.start()
    return committer, made == "created"


def start_run_committer(
    config: PipelineConfig, metrics: PipelineMetrics, arrivals: Arrivals | None
) -> tuple[Committer, bool]:
    """Start the committer ``delayline run`` keeps, whatever the lead: an earlier run may
    have handed schedules over. Returns it, and whether its in-flight topic was just
    made. A killed run's fire transactions are ended first, not when Spark replays its
    batch: until then the committer could not read the in-flight topic to its end."""
    end_left_open(
        config.topology.bootstrap_servers, config.transactional_id, config.shuffle_partitions
    )
    settings = committer_config(config, RUN_COMMITTER_NAME)
    return start_committer(config, settings, metrics, arrivals)


def deliver_first(committer: Committer, lead_ms: int) -> None:
    """Wait until ``committer`` has delivered what was handed over before this start,
    for a lead of ``lead_ms`` (see :attr:`PipelineConfig.deliver_first`)."""
    started = time.monotonic()
    if not committer.wait_ready(DELIVER_FIRST_READY_MS / 1000):
        log.info("committer not ready in %d ms: starting Spark", DELIVER_FIRST_READY_MS)
        return
    left = committer.status().pending
    if not left:
        return
    wait_ms = min(lead_ms + 1_000, DELIVER_FIRST_MAX_MS)
    log.info(
        "committer: delivering %d schedule(s) handed over before this start before Spark "
        "starts (waiting %d ms at most)",
        left,
        wait_ms,
    )
    left = committer.wait_caught_up(wait_ms / 1000)
    log.info(
        "starting Spark %.1f s after the committer%s",
        time.monotonic() - started,
        f" ({left} schedule(s) still pending)" if left else "",
    )


def group_view(committer: Committer) -> dict[str, Any]:
    """This committer's status and its group's members (what ``/progress`` shows)."""
    settings = committer.config
    group = committer_group(settings.transactional_id)
    status = committer.status()
    this = asdict(status)
    this["pacing"] = {topic: asdict(pacing) for topic, pacing in status.pacing}
    this["target_rates"] = settings.target_rates.describe()
    view: dict[str, Any] = {"group": group, "this": this}
    try:
        members = group_members(settings.bootstrap_servers, group, GROUP_LOOKUP_S)
    except KafkaUnavailableError as exc:
        log.debug("committer group %s not described: %s", group, exc)
        view["members"] = None
        return view
    view["members"] = [
        {
            "name": committer_name(settings.transactional_id, m.instance_id) or None,
            "host": m.host,
            "partitions": [p for topic, p in m.partitions if topic == settings.inflight_topic],
        }
        for m in members
    ]
    return view
