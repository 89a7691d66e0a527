"""The input contracts delayline reads, by name, and the parser of each.

Each input topic speaks one contract (:meth:`delayline.contract.topology.Topology.contract_of`);
every contract parses into the same model (:mod:`delayline.core.model`), so the hold and
the fire path never know which one a schedule came in by.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from delayline.contract.checks import ScheduleFields, schedule_fields
from delayline.contract.envelope import parse_envelope
from delayline.contract.ids import derived_id
from delayline.contract.records import ConsumedRecord, parse_record, parse_safely
from delayline.contract.timer_request import parse_timer_request
from delayline.core.model import Invalid, Parsed

if TYPE_CHECKING:
    from delayline.contract.topology import Topology

Contract = Literal["header", "envelope", "timer-request"]
"""A contract's name (the API's ``contract`` field)."""
HEADER: Final = "header"
"""Compacted schedules topic, schedule in headers (``kafka-message-scheduler``)."""
ENVELOPE: Final = "envelope"
"""JSON envelope (the Redis sorted-set design): :mod:`delayline.contract.envelope`."""
TIMER_REQUEST: Final = "timer-request"
"""Protobuf keyed by the expiry second (the durable timers design):
:mod:`delayline.contract.timer_request`."""
CONTRACTS: tuple[Contract, ...] = (HEADER, ENVELOPE, TIMER_REQUEST)

PARSERS: dict[Contract, Callable[[ConsumedRecord], Parsed]] = {
    HEADER: parse_record,
    ENVELOPE: parse_envelope,
    TIMER_REQUEST: parse_timer_request,
}


def parse_as(contract: Contract, record: ConsumedRecord) -> Parsed:
    """Parse ``record`` by ``contract`` (one of :data:`CONTRACTS`); never raises for any
    record, raises ``KeyError`` for an unknown contract name (a bug)."""
    return PARSERS[contract](record)


def compacted(contract: Contract) -> bool:
    """Whether topics of ``contract`` are compacted by schedule id, so a version must be
    written again when a later record of its key would replace it in compaction
    (``rewrite``/``retire`` in :mod:`delayline.holds.fold`). Envelope and timer-request
    topics are ordinary topics whose records are not keyed by schedule id: retention,
    not compaction, ends their records."""
    return contract == HEADER


@dataclass(frozen=True, slots=True)
class InputParser:
    """Parses a record of any input topic by the contract its topic speaks.

    Attributes:
        topology: Which topics speak which contract.
    """

    topology: Topology

    def __call__(self, record: ConsumedRecord) -> Parsed:
        """The record in the model; never raises."""
        return parse_as(self.topology.contract_of(record.topic), record)

    def classify(self, record: ConsumedRecord) -> ScheduleFields | Parsed:
        """What :meth:`__call__` makes of ``record``, a valid schedule of the header
        contract as its fields only, by that contract's own checks (for a reader of every
        schedule written that needs no schedule made of each); never raises."""
        if self.topology.contract_of(record.topic) == HEADER:
            return parse_safely(schedule_fields, record, "record")
        return self(record)

    def group_key(self, record: ConsumedRecord, parsed: Parsed | None = None) -> bytes:
        """What the hold groups ``record`` by (with its topic): the schedule id it is
        about. A header-contract record's key is its id (an invalid one's key too, as
        compaction sees it); in the other contracts the id comes from the value or from
        where the record sits, and a record that is about no id is grouped by where it
        sits, alone (it is dead-lettered).

        Args:
            record: The record.
            parsed: What :meth:`__call__` made of it, if known (saves parsing again).
        """
        if self.topology.contract_of(record.topic) == HEADER:
            return record.key or b""
        parsed = self(record) if parsed is None else parsed
        if isinstance(parsed, Invalid):
            return derived_id(record.topic, record.partition, record.offset).encode()
        return parsed.id.encode("utf-8")
