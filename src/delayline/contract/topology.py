"""Where delayline's records live: one Kafka cluster and the names of its topics.

Every component (topics, pipeline, API, catalog, CLI) takes one :class:`Topology`,
so the defaults are stated once and cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from delayline.contract.contracts import ENVELOPE, HEADER, TIMER_REQUEST, Contract
from delayline.contract.ids import parse_derived_id
from delayline.contract.pacing import has_window
from delayline.contract.recurring import is_recurring
from delayline.contract.topics import allowed_targets_problem, topic_name_problem
from delayline.core.model import Schedule
from delayline.errors import ConfigError

DEFAULT_BOOTSTRAP_SERVERS = "127.0.0.1:9092"
DEFAULT_SCHEDULES_TOPIC = "delayline-schedules"
DEFAULT_DEAD_LETTER_TOPIC = "delayline-dead-letters"
DEFAULT_HISTORY_TOPIC = "delayline-history"
DEFAULT_COMMITS_TOPIC = "delayline-commits"


@dataclass(frozen=True, slots=True)
class Topology:
    """The Kafka cluster and the topics delayline reads and writes.

    Attributes:
        bootstrap_servers: Kafka bootstrap list, ``host:port[,host:port]``.
        schedules_topics: Compacted topics schedules are read from (one or more);
            new schedules written through delayline go to the first.
        dead_letter_topic: Rejected and expired records, with a reason header.
        history_topic: A copy of every delivery (the API's catalog follows it);
            ``None`` for none.
        commits_topic: Compacted commit markers of the pipeline's transactions.
        envelope_topics: Topics of JSON envelopes (:mod:`delayline.contract.envelope`).
        timer_request_topics: Topics of timer requests
            (:mod:`delayline.contract.timer_request`).
        allowed_target_topics: A regular expression every target topic must match as a
            whole (``--allowed-target-topics``): the API refuses other targets (403) and
            the pipeline dead-letters them when due; ``None`` allows any.

    Raises:
        ConfigError: no schedules topic, an invalid topic name, or two roles
            sharing one topic.
    """

    bootstrap_servers: str = DEFAULT_BOOTSTRAP_SERVERS
    schedules_topics: tuple[str, ...] = (DEFAULT_SCHEDULES_TOPIC,)
    dead_letter_topic: str = DEFAULT_DEAD_LETTER_TOPIC
    history_topic: str | None = DEFAULT_HISTORY_TOPIC
    commits_topic: str = DEFAULT_COMMITS_TOPIC
    envelope_topics: tuple[str, ...] = ()
    timer_request_topics: tuple[str, ...] = ()
    allowed_target_topics: str | None = None

    def __post_init__(self) -> None:
        if self.allowed_target_topics is not None:
            problem = allowed_targets_problem(self.allowed_target_topics)
            if problem is not None:
                raise ConfigError(
                    f"--allowed-target-topics {self.allowed_target_topics!r} is {problem}"
                )
        if not self.bootstrap_servers.strip():
            raise ConfigError("give Kafka bootstrap servers, host:port[,host:port]")
        if not self.schedules_topics:
            raise ConfigError("give at least one schedules topic")
        names = [*self.input_topics, self.dead_letter_topic, self.commits_topic]
        if self.history_topic:
            names.append(self.history_topic)
        for name in names:
            problem = topic_name_problem(name)
            if problem is not None:
                raise ConfigError(f"topic name {name!r} is invalid: {problem}")
        if len(set(names)) != len(names):
            raise ConfigError(
                "schedules, envelope, timer-request, dead-letter, commits and history topics "
                "must be distinct"
            )

    @property
    def schedules_topic(self) -> str:
        """The first schedules topic: where delayline writes new schedules."""
        return self.schedules_topics[0]

    @property
    def input_topics(self) -> tuple[str, ...]:
        """Every topic schedules come in by, of every contract."""
        return (*self.schedules_topics, *self.envelope_topics, *self.timer_request_topics)

    def recurs(self, schedule: Schedule) -> bool:
        """Whether ``schedule`` is recurring: it states a recurrence
        (:func:`delayline.contract.recurring.is_recurring`) and came in by the header
        contract, the only one that carries one (an envelope's or a timer request's
        headers are only delivered)."""
        source = schedule.source
        topic = "" if source is None else source.topic
        return is_recurring(schedule.headers) and self.contract_of(topic) == HEADER

    def windowed(self, schedule: Schedule) -> bool:
        """Whether ``schedule`` states a delivery window
        (:func:`delayline.contract.pacing.has_window`) that counts: it came in by the
        header contract (an envelope's or a timer request's headers are only delivered)."""
        source = schedule.source
        topic = "" if source is None else source.topic
        return has_window(schedule.headers) and self.contract_of(topic) == HEADER

    def contract_of(self, topic: str) -> Contract:
        """The contract (:data:`delayline.contract.contracts.CONTRACTS`) ``topic`` speaks;
        ``header`` for a topic that is not an input topic."""
        if topic in self.envelope_topics:
            return ENVELOPE
        if topic in self.timer_request_topics:
            return TIMER_REQUEST
        return HEADER


def cancel_place(topology: Topology, schedule_id: str) -> tuple[str, int | None]:
    """Where a cancel of ``schedule_id`` goes when nothing says where it is pending: the
    exact topic and partition a derived id names (an envelope or timer-request topic of
    ``topology``), else the first schedules topic and the id's own partition (``None``)."""
    place = parse_derived_id(schedule_id)
    if place is not None and topology.contract_of(place[0]) != HEADER:
        return place[0], place[1]
    return topology.schedules_topic, None
