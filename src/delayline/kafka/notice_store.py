"""Where a pipeline's notice rules live (:mod:`delayline.contract.notice`): a compacted
topic of one partition (:func:`~delayline.core.identifiers.notice_topic`), whose latest
record under :data:`NOTICE_KEY` is the rules. No such topic, or no such record: no rules
(every version is held, as before short notice).

The pipeline writes the rules at its start, pending and then settled
(:func:`delayline.pipeline.notice.settle_notice`); a committer asks
:meth:`NoticeFollower.rules` before it acts on versions it has read from the input.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from delayline.contract import OutgoingRecord
from delayline.contract.notice import NoticeRules
from delayline.errors import KafkaUnavailableError, TopicDeniedError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.produce import produce_one
from delayline.kafka.reader import acknowledged_ends, private_consumer, read_topic

log = logging.getLogger(__name__)

NOTICE_KEY = b"notice-rules"
"""The key of the rules' records (the topic's only key: compaction keeps the latest)."""


def write_notice_rules(
    bootstrap_servers: str, topic: str, rules: NoticeRules, timeout_s: float = 30.0
) -> int:
    """Write ``rules`` as the latest and wait for Kafka's acknowledgement (``acks=all``):
    once this returns, every :meth:`NoticeFollower.rules` that begins reads them.

    Returns:
        The offset they were written at.

    Raises:
        DeliveryError: Kafka refused them or did not acknowledge them in time.
    """
    record = OutgoingRecord(topic, NOTICE_KEY, rules.encode(), (), 0, None)
    _, offset, _ = produce_one(bootstrap_servers, record, int(timeout_s * 1000))
    log.info(
        "notice rules written to %s@%d: %d epoch(s)%s",
        topic, offset, len(rules.epochs), ", pending" if rules.pending else "",
    )  # fmt: skip
    return offset


class NoticeFollower:
    """The latest notice rules of one topic, read again only when the topic has grown.

    Guarantee: :meth:`rules` answers with what the topic held at some moment after the
    call began. So the rules it gives govern every version the caller read before
    calling (an epoch written later starts after every record then in the input:
    :func:`delayline.pipeline.notice.settle_notice` marks the rules pending before it
    reads where the input ends), unless they are pending: then nobody may act on them
    until a later call sees them settled.
    """

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self._admin: AdminClient | None = None
        """Made once the topic is found (a pipeline start without rules needs none)."""
        # Metadata through a consumer: an admin client's request for one topic creates
        # it on a broker that creates topics on use (not compacted: retention would
        # then delete the rules).
        self._metadata = private_consumer(bootstrap_servers, "delayline-notice")
        self._rules = NoticeRules()
        self._next = 0
        """The first offset not read yet."""
        self._seen = False
        """Whether the topic was found once: then a broker's metadata saying it is not
        there is out of date (it is never deleted while the rules matter)."""

    def rules(self, timeout_s: float = 10.0) -> NoticeRules:
        """The rules now (see the class). Costs a metadata request and an offset request
        when nothing was written since the last call.

        Raises:
            KafkaUnavailableError: Kafka did not answer in time.
            TopicDeniedError: the topic may not be described or read (ACLs).
            RecordFormatError, FormatVersionError: the latest record is not rules this
                release reads.
        """
        deadline = time.monotonic() + timeout_s
        if not self._exists(timeout_s):
            return self._rules
        if self._admin is None:
            self._admin = AdminClient(kafka_client_config(self.bootstrap_servers))
        end = acknowledged_ends(self._admin, [(self.topic, 0)], timeout_s)[(self.topic, 0)]
        if end <= self._next:
            return self._rules
        left_ms = max(int((deadline - time.monotonic()) * 1000), 1_000)
        records = read_topic(
            self.bootstrap_servers, self.topic, timeout_ms=left_ms, since={0: self._next}
        )
        for record in records:
            if record.key == NOTICE_KEY and record.value is not None:
                where = f"{self.topic}[0]@{record.offset}"
                self._rules = NoticeRules.decode(record.value, where)
            self._next = max(self._next, record.offset + 1)
        self._next = max(self._next, end)
        return self._rules

    def close(self) -> None:
        """Close the metadata consumer."""
        self._metadata.close()

    def _exists(self, timeout_s: float) -> bool:
        if self._seen:
            return True
        try:
            topics = self._metadata.list_topics(self.topic, timeout=timeout_s).topics
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"Kafka at {self.bootstrap_servers} did not answer: {exc}"
            ) from exc
        found = topics.get(self.topic)
        code = None if found is None or found.error is None else found.error.code()
        if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise TopicDeniedError(
                f"notice topic {self.topic}: not authorised to describe it (run "
                "`delayline acls` for the pipeline's principal)"
            )
        if found is None or code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        # Found, or about to be (no leader yet): the offsets request waits for a leader.
        self._seen = True
        return True


def read_notice_rules(bootstrap_servers: str, topic: str, timeout_s: float = 30.0) -> NoticeRules:
    """The latest rules in ``topic`` (none when it does not exist). Raises as
    :meth:`NoticeFollower.rules`."""
    follower = NoticeFollower(bootstrap_servers, topic)
    try:
        return follower.rules(timeout_s)
    finally:
        follower.close()
