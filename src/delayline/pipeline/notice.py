"""The notice rules a run of the pipeline holds by (:mod:`delayline.contract.notice`),
settled at its start, before its committer and its Spark session."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from delayline.contract.notice import Epoch, NoticeRules
from delayline.errors import KafkaUnavailableError, TopicDeniedError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.notice_store import read_notice_rules, write_notice_rules
from delayline.kafka.reader import acknowledged_ends
from delayline.kafka.topics import ensure_notice_topic
from delayline.pipeline.config import PipelineConfig

log = logging.getLogger(__name__)

Ends = Callable[[], Mapping[str, Mapping[int, int]]]
"""Where each input topic's partitions end, asked when called."""


NOTICE_MS = 0
"""The notice this release runs with: none (every version is held; its committers hand
nothing over from the input themselves). Settled at each start, it also turns off the
rules a newer release wrote, from that start on."""


def run_notice(config: PipelineConfig) -> NoticeRules | None:
    """The rules a run of ``config`` holds by (:func:`settle_notice`), for its hold;
    ``None`` when no rules were ever written, or, with a warning, when the principal may
    not describe the notice topic (ACLs made by an earlier ``delayline acls``): a release
    with a notice needs those ACLs to write its rules, and this one has none."""
    bootstrap = config.topology.bootstrap_servers
    ends = input_ends(bootstrap, config.topology.input_topics)
    try:
        rules = settle_notice(
            bootstrap, config.notice_topic_name, NOTICE_MS, config.inflight_partitions, ends
        )
    except TopicDeniedError as exc:
        log.warning("%s; running without notice rules", exc)
        return None
    return rules if rules.epochs else None


def settle_notice(
    bootstrap_servers: str,
    topic: str,
    notice_ms: int,
    inflight_partitions: int,
    ends: Ends,
    timeout_s: float = 30.0,
) -> NoticeRules:
    """The rules this run holds by: those in ``topic`` when they already say
    ``notice_ms`` (and, with a notice, ``inflight_partitions``) and are not pending;
    otherwise a new epoch of them that governs the input from ``ends()`` on. Writes
    nothing while no rules were ever written and ``notice_ms`` is 0.

    A new epoch is written in two steps, so a committer never judges a version by rules
    that do not govern it: the rules marked pending first (a committer that sees them
    acts on none until they are settled), then ``ends()`` asked, then the rules with the
    epoch. A version a committer read before the pending mark lies before those ends;
    one it reads after is judged once the epoch is written. A run stopped between the
    two leaves them pending; the next run settles them.

    Must run with the pipeline's lease held (one writer of the rules at a time).

    Raises:
        KafkaUnavailableError, DeliveryError: Kafka did not answer, or refused a write.
        RecordFormatError, FormatVersionError: the topic holds rules this release does
            not read.
    """
    rules = read_notice_rules(bootstrap_servers, topic, timeout_s)
    if not rules.pending and _says(rules, notice_ms, inflight_partitions):
        return rules
    ensure_notice_topic(bootstrap_servers, topic, timeout_s)
    write_notice_rules(bootstrap_servers, topic, replace(rules, pending=True), timeout_s)
    settled = rules.then(Epoch(notice_ms, inflight_partitions, ends()))
    write_notice_rules(bootstrap_servers, topic, settled, timeout_s)
    log.info(
        "notice rules: epoch %d, notice %d ms, %d in-flight partition(s)",
        len(settled.epochs), notice_ms, inflight_partitions,
    )  # fmt: skip
    return settled


def _says(rules: NoticeRules, notice_ms: int, inflight_partitions: int) -> bool:
    """Whether ``rules``' last epoch already says this (none at all says no notice)."""
    if not rules.epochs:
        return notice_ms == 0
    last = rules.epochs[-1]
    if notice_ms == 0:
        return last.notice_ms == 0
    return last.notice_ms == notice_ms and last.inflight_partitions == inflight_partitions


def input_ends(bootstrap_servers: str, topics: Sequence[str], timeout_s: float = 30.0) -> Ends:
    """:data:`Ends` of ``topics``: each partition's acknowledged end (open transactions
    included: a version a committer may read later lies before it)."""

    def ends() -> dict[str, dict[int, int]]:
        admin = AdminClient(kafka_client_config(bootstrap_servers))
        try:
            metadata = admin.list_topics(timeout=timeout_s).topics
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"Kafka at {bootstrap_servers} did not answer: {exc}"
            ) from exc
        wanted = [(t, p) for t in topics if t in metadata for p in metadata[t].partitions]
        out: dict[str, dict[int, int]] = {}
        for (t, p), offset in acknowledged_ends(admin, wanted, timeout_s).items():
            out.setdefault(t, {})[p] = offset
        return out

    return ends
