"""The transactional producer of a fire writer, over its life.

Made with its transactions initialised (which fences every earlier producer of its
``transactional.id`` and aborts what one left open), its failed transactions aborted,
and replaced by a new one of the same id once a fatal error leaves it unusable. What an
attempt writes with it is :mod:`delayline.fire.write_attempt`'s.
"""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException, Producer

from delayline.errors import KafkaUnavailableError
from delayline.fire.attempts import failure_of, is_fatal
from delayline.fire.refusals import Failure
from delayline.kafka.config import kafka_client_config
from delayline.kafka.topics import INFLIGHT_MAX_BYTES
from delayline.kafka.transactions import transactional_producer

log = logging.getLogger(__name__)

REQUEST_FRAMING_BYTES = 64 * 1024
"""Room for a produce request's framing beside its largest record batch."""


class FireProducer:
    """A writer's transactional producer, and whether it hit a fatal error.

    Args:
        bootstrap_servers: Kafka bootstrap list.
        transactional_id: Stable per pipeline; a restarted pipeline must reuse it.
        transaction_timeout_ms: Broker aborts a transaction left open this long.
        timeout_ms: Bound on init, flush, commit and abort.
        linger_ms: How long the producer gathers records before sending them.

    Attributes:
        producer: The producer now; a new one after a fatal error (read it afresh for
            each transaction).
        fatal: The producer hit a fatal error: :meth:`abort` replaces it.
        timeout_s: ``timeout_ms`` in seconds.
        looked_up: Target topics :attr:`producer` looked up ahead of its deliveries
            (emptied when the producer is replaced).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        transactional_id: str,
        *,
        transaction_timeout_ms: int,
        timeout_ms: int,
        linger_ms: int,
    ) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._transactional_id = transactional_id
        self._transaction_timeout_ms = transaction_timeout_ms
        self._linger_ms = linger_ms
        self.timeout_s = timeout_ms / 1000
        self.fatal = False
        self.looked_up: set[str] = set()
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        """A transactional producer with its transactions initialised (which fences, and
        aborts the open transaction of, any earlier producer of the same id)."""
        settings = kafka_client_config(
            self._bootstrap_servers,
            **{
                "transactional.id": self._transactional_id,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": self._linger_ms,
                # Java-compatible placement of keyed deliveries.
                "partitioner": "murmur2_random",
                "transaction.timeout.ms": self._transaction_timeout_ms,
                # A transaction begun while the broker still writes the previous
                # one's markers is refused (CONCURRENT_TRANSACTIONS) and retried
                # after this: librdkafka's 100 ms default held a delivery after a
                # restart 100 ms (seen once in six runs of the restart test, none
                # in ten since); Java's producer waits 20 ms for this case.
                "retry.backoff.ms": 10,
                # A delivery to a missing topic is refused, never creates it.
                "allow.auto.create.topics": False,
                # The largest in-flight record, and a request's framing (what each
                # topic takes is checked before, and by its broker).
                "message.max.bytes": INFLIGHT_MAX_BYTES + REQUEST_FRAMING_BYTES,
            },
        )
        try:
            return transactional_producer(settings, self.timeout_s)
        except KafkaException as exc:
            raise KafkaUnavailableError(f"could not initialise transactions: {exc}") from exc

    def failed(self, exc: KafkaException) -> Failure:
        """The transaction's error; notes a fatal one and reads the delivery reports
        that arrived during the commit."""
        self.fatal = self.fatal or is_fatal(exc)
        try:
            self.producer.poll(0)
        except KafkaException as late:
            self.fatal = self.fatal or is_fatal(late)
        return failure_of(exc)

    def abort(self) -> None:
        """Abort the open transaction; after a fatal error, replace the producer instead
        (the new one aborts what the old left open)."""
        if not self.fatal:
            try:
                self.producer.abort_transaction(self.timeout_s)
                return
            except KafkaException as exc:
                self.fatal = is_fatal(exc)
                if not self.fatal:  # the next init_transactions cleans up
                    log.warning("abort failed: %s", exc)
                    return
        # A fatal error (e.g. INVALID_TXN_STATE on commit) leaves this producer unusable:
        # a new one with the same transactional.id fences it and aborts what it left open.
        log.warning("transactional producer hit a fatal error; starting a new one")
        self.producer.flush(0)
        self.producer = self._new_producer()
        self.looked_up = set()
        self.fatal = False

    def close(self) -> None:
        """Release the producer (nothing is left open between batches)."""
        self.producer.flush(self.timeout_s)
