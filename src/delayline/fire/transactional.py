"""Write each micro-batch's output in one Kafka transaction with a commit marker.

Exactly once rests on two facts. Spark replays a micro-batch after a crash with
the same input and batch timestamp, so it produces the same records. And the
records of a batch are committed atomically together with a marker
``(run, batch id)`` on the commits topic, so a replay finds the marker and
writes nothing. A fixed ``transactional.id`` per run fences a stalled earlier
instance: its open transaction is aborted when the new one initialises.
Readers must use ``isolation.level=read_committed``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Producer

from delayline.contract import OutgoingRecord
from delayline.errors import DelaylineError, KafkaUnavailableError
from delayline.kafka.config import kafka_client_config
from delayline.kafka.produce import produce
from delayline.kafka.reader import read_topic

log = logging.getLogger(__name__)


class FireError(DelaylineError):
    """A batch could not be committed; the pipeline stops and its replay retries it."""

    retriable = True


@dataclass(frozen=True, slots=True)
class FireConfig:
    """Settings of the transactional writer.

    Attributes:
        bootstrap_servers: Kafka bootstrap list.
        commits_topic: Compacted topic of commit markers, keyed by run.
        transactional_id: Stable per pipeline; a restarted pipeline must reuse it.
        transaction_timeout_ms: Broker aborts a transaction left open this long.
        timeout_ms: Bound on init, commit and marker reads.
    """

    bootstrap_servers: str
    commits_topic: str
    transactional_id: str
    transaction_timeout_ms: int = 60_000
    timeout_ms: int = 30_000


class TransactionalFirer:
    """Commits batches of records exactly once per ``(run, batch id)``."""

    def __init__(self, config: FireConfig) -> None:
        self.config = config
        self._producer = Producer(
            kafka_client_config(
                config.bootstrap_servers,
                **{
                    "transactional.id": config.transactional_id,
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    # Java-compatible placement of keyed deliveries.
                    "partitioner": "murmur2_random",
                    "transaction.timeout.ms": config.transaction_timeout_ms,
                },
            )
        )
        try:
            self._producer.init_transactions(config.timeout_ms / 1000)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"could not initialise transactions: {exc}") from exc
        self._committed: dict[str, int] = {}

    def last_committed(self, run: str) -> int:
        """Highest batch id committed for ``run`` (-1 if none), read once then tracked."""
        if run not in self._committed:
            latest = -1
            for record in read_topic(
                self.config.bootstrap_servers,
                self.config.commits_topic,
                timeout_ms=self.config.timeout_ms,
            ):
                if record.key == run.encode() and record.value:
                    latest = max(latest, int(json.loads(record.value)["batch_id"]))
            self._committed[run] = latest
            log.info("run %s: last committed batch %d", run, latest)
        return self._committed[run]

    def commit_batch(self, run: str, batch_id: int, records: Sequence[OutgoingRecord]) -> bool:
        """Write ``records`` and the marker of ``(run, batch_id)`` in one transaction.

        Returns:
            False when the batch was already committed (a replay), True otherwise.

        Raises:
            FireError: the transaction failed and was aborted; nothing is visible.
        """
        if batch_id <= self.last_committed(run):
            log.info("batch %d of run %s already committed; skipping its replay", batch_id, run)
            return False
        marker = OutgoingRecord(
            self.config.commits_topic,
            run.encode(),
            json.dumps(
                {
                    "batch_id": batch_id,
                    "records": len(records),
                    "committed_at_ms": time.time_ns() // 10**6,
                }
            ).encode(),
        )
        errors: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        try:
            self._producer.begin_transaction()
            for record in (*records, marker):
                produce(self._producer, record, on_delivery)
            self._producer.flush(self.config.timeout_ms / 1000)
            if errors:
                raise FireError(f"batch {batch_id}: {len(errors)} record(s) failed: {errors[0]}")
            self._producer.commit_transaction(self.config.timeout_ms / 1000)
        except (KafkaException, FireError) as exc:
            self._abort()
            raise FireError(f"batch {batch_id} of run {run} not committed: {exc}") from exc
        self._committed[run] = batch_id
        return True

    def close(self) -> None:
        """Release the producer (nothing is left open between batches)."""
        self._producer.flush(self.config.timeout_ms / 1000)

    def _abort(self) -> None:
        try:
            self._producer.abort_transaction(self.config.timeout_ms / 1000)
        except KafkaException as exc:  # the next init_transactions cleans up
            log.warning("abort failed: %s", exc)
