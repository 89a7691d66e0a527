"""The catalog's view of envelopes and timer requests: parsed by their contract, and
their history (due time, target, lateness) from delayline's own history headers."""

from __future__ import annotations

from delayline.catalog.events import Remove, Role, Upsert, changes_for
from delayline.contract import ConsumedRecord, render_history
from delayline.contract.contracts import InputParser
from delayline.contract.envelope import parse_envelope
from delayline.contract.topology import Topology
from delayline.core.model import Schedule

PARSE = InputParser(Topology(envelope_topics=("env",), timer_request_topics=("timers",)))
ENVELOPE = ConsumedRecord(
    "env", 1, 9, 1_000, None, b'{"topic":"out","message":"m","countdown":5,"id":"e-1"}',
    (("scheduler-epoch", b"99"),),  # a producer's header, not the envelope's due time
)  # fmt: skip


def test_an_envelope_is_a_pending_version_of_its_id() -> None:
    (change,) = changes_for(ENVELOPE, Role.SCHEDULES, history_followed=True, parse=PARSE)
    assert isinstance(change, Upsert)
    assert (change.schedule.id, change.schedule.due_ms) == ("e-1", 6_000)


def test_the_history_of_a_fired_envelope_has_its_due_time_target_and_lateness() -> None:
    schedule = parse_envelope(ENVELOPE)
    assert isinstance(schedule, Schedule)
    history = render_history(schedule, "hist")
    record = ConsumedRecord("hist", 0, 3, 6_040, history.key, history.value, history.headers)
    (change,) = changes_for(record, Role.HISTORY, history_followed=True, parse=PARSE)
    assert isinstance(change, Remove)
    assert change.version is not None
    assert (change.id, change.topic, change.partition, change.offset) == ("e-1", "env", 1, 9)
    assert (change.version.due_ms, change.version.target_topic) == (6_000, "out")
    assert change.version.lateness_ms == 40
