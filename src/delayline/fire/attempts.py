"""One attempt at a batch's transaction: what it writes, and what its failures say.

Pure helpers of :class:`delayline.fire.transactional.TransactionalFirer` and
:func:`delayline.fire.write_attempt.write_attempt`: the records an attempt writes in
batch order (a refused delivery as its dead letter), each record's delivery callback,
and how a Kafka failure is judged (fatal, unreachable, or a record's own error that
delivery reports would name).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from delayline.contract import OutgoingRecord
from delayline.fire.firing import Firing
from delayline.fire.refusals import COLLATERAL, Failure, Sent
from delayline.kafka.errors import kafka_error

Owners = dict[int, tuple[int, str]]
"""Position of a delivery among an attempt's records: (its firing's position in the
batch, its schedule id)."""


def sent_plan(
    records: Sequence[OutgoingRecord | Firing],
    refused: Mapping[int, str],
    deliveries: Mapping[int, OutgoingRecord],
) -> tuple[list[OutgoingRecord], Owners]:
    """The records to write, in batch order: a refused firing as its dead letter; the
    others' deliveries as ``deliveries`` rendered them (by position); and which of them
    are deliveries, of which firing."""
    plan: list[OutgoingRecord] = []
    owners: Owners = {}
    for i, item in enumerate(records):
        if not isinstance(item, Firing):
            plan.append(item)
        elif i in refused:
            plan.extend(item.refused(refused[i]))
        else:
            owners[len(plan)] = (i, item.schedule.id)
            plan.extend(item.records(deliveries.get(i)))
    return plan, owners


def fates(
    plan: Sequence[OutgoingRecord], owners: Owners, alone: set[int], errors: Mapping[int, Failure]
) -> list[Sent]:
    """What became of each record of a failed attempt."""
    out = []
    for k, record in enumerate(plan):
        firing, schedule_id = owners.get(k, (None, None))
        out.append(Sent(record, firing, schedule_id, k in alone, errors.get(k)))
    return out


def write_order(
    plan: Sequence[OutgoingRecord], last: Collection[str]
) -> tuple[list[int], int | None]:
    """The order to write ``plan`` in (positions): the records to the ``last`` topics
    after the others, each in order; and where the first of those comes (``None``: none
    does)."""
    order = [k for k, record in enumerate(plan) if record.topic not in last]
    if len(order) == len(plan):
        return order, None
    held = len(order)
    return order + [k for k, record in enumerate(plan) if record.topic in last], held


UNREACHABLE = frozenset(
    {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
)
"""Transaction errors no record's delivery report would explain: Kafka away."""


def record_unknown(sent: Sequence[Sent], txn_error: Failure | None) -> bool:
    """Whether an attempt written without delivery reports failed on a record it cannot
    name: no record's own error is known, and Kafka was not simply away."""
    if txn_error is not None and txn_error.code in UNREACHABLE:
        return False
    return all(s.error is None or s.error.code in COLLATERAL for s in sent)


def is_fatal(exc: KafkaException) -> bool:
    error = kafka_error(exc)
    return error is not None and bool(error.fatal())


def failure_of(exc: KafkaException) -> Failure:
    error = kafka_error(exc)
    if error is not None:
        return Failure.of(error)
    return Failure(KafkaError._FAIL, "_FAIL", str(exc))


def reporter(
    k: int,
    record: OutgoingRecord,
    errors: dict[int, Failure],
    placed: dict[OutgoingRecord, tuple[int, int]],
    tracked: bool,
) -> Callable[[Any, Any], None]:
    """The delivery callback of the ``k``-th record of an attempt: its error into
    ``errors``; its place into ``placed`` when ``tracked``."""

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors[k] = Failure.of(err)
        elif tracked:
            placed[record] = (msg.partition(), msg.offset())

    return report
