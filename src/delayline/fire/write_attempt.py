"""One attempt at a writer's transaction, written: its records produced one by one,
flushed and committed, or else what became of each of them.

What an attempt writes, and how its failures are judged, are the pure helpers of
:mod:`delayline.fire.attempts`; the retries are
:meth:`delayline.fire.transactional.TransactionalFirer.deliver`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from confluent_kafka import KafkaException

from delayline.contract import OutgoingRecord
from delayline.core.timing import warn_if_slow
from delayline.fire.attempts import Owners, failure_of, fates, reporter, write_order
from delayline.fire.producer import FireProducer
from delayline.fire.refusals import COLLATERAL, Failure, Sent
from delayline.kafka.produce import produce

log = logging.getLogger(__name__)

Placed = Mapping[OutgoingRecord, tuple[int, int]]
"""Records written in an open transaction, to their partition and offset."""


def write_attempt(
    txn: FireProducer,
    label: str,
    plan: list[OutgoingRecord],
    owners: Owners,
    serial: set[str],
    before_commit: Callable[[Placed], None] | None,
    track: frozenset[OutgoingRecord],
    reports: bool,
    last_topics: Collection[str],
) -> tuple[list[Sent], Failure | None] | None:
    """One transaction: ``None`` once committed, else each record's fate and the
    transaction's own error. Records to ``serial`` topics go one per batch; records to
    ``last_topics`` after the others are acknowledged.

    Without ``reports`` only the records of ``track`` get a delivery report (a Python
    callback per record cost the committer a tenth of its time): a record that fails
    then fails the commit (librdkafka fails the commit of a transaction with any
    failed delivery), and the caller writes the transaction again with reports."""
    errors: dict[int, Failure] = {}
    alone: set[int] = set()
    placed: dict[OutgoingRecord, tuple[int, int]] = {}
    timeout_s = txn.timeout_s
    producer = txn.producer

    def on_delivery(k: int, record: OutgoingRecord) -> Callable[[Any, Any], None] | None:
        tracked = bool(track) and record in track
        if not (reports or tracked):
            return None
        return reporter(k, record, errors, placed, tracked)

    calls = reports or bool(track)
    txn_error: Failure | None = None
    order, held = write_order(plan, last_topics)
    try:
        producer.begin_transaction()
        for i, k in enumerate(order):
            record = plan[k]
            if i == held and i:
                # The first record to an input topic waits for the others' acks.
                producer.flush(timeout_s)
            try:
                produce(producer, record, on_delivery(k, record) if calls else None)
            except KafkaException as exc:  # judged alone, before queueing
                errors[k] = failure_of(exc)
                alone.add(k)
                continue
            if serial and record.topic in serial:
                alone.add(k)
                producer.flush(timeout_s)
        with warn_if_slow(log, f"{label}: flushing {len(plan)} records"):
            producer.flush(timeout_s)
        # With records purged only, the transaction failed and the commit says why
        # (librdkafka fails the commit of a transaction with any failed delivery).
        # Such a doomed transaction neither waits nor checks its records' places
        # (a record failed with it was never placed): it fails at once.
        if all(e.code in COLLATERAL for e in errors.values()):
            _commit(txn, label, None if errors else before_commit, placed)
            if not errors:
                return None
    except KafkaException as exc:
        txn_error = txn.failed(exc)
    return fates(plan, owners, alone, errors), txn_error


def _commit(
    txn: FireProducer, label: str, before_commit: Callable[[Placed], None] | None, placed: Placed
) -> None:
    # No consumer offsets go with the transaction: librdkafka's
    # send_offsets_to_transaction can block past its timeout once the group
    # coordinator restarts (confluentinc/librdkafka#5456); here it hung the
    # committer for minutes after a broker restart. Readers commit theirs after.
    if before_commit is not None:
        try:
            before_commit(placed)
        except Exception:
            # Not Kafka's failure (the group before failed): left open, this
            # transaction would hold back read_committed readers until it timed out.
            txn.abort()
            raise
    with warn_if_slow(log, f"{label}: committing"):
        txn.producer.commit_transaction(txn.timeout_s)
