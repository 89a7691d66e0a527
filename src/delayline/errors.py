"""The delayline error tree.

Every error delayline raises derives from :class:`DelaylineError`. Each class
says whether retrying the same call later can succeed (``retriable``), so callers
can decide without parsing messages, in the manner of aiokafka.
"""

from __future__ import annotations


class DelaylineError(Exception):
    """Root of every error delayline raises on purpose."""

    retriable: bool = False
    """True when the same call may succeed if repeated later unchanged."""


class ConfigError(DelaylineError, ValueError):
    """A setting, flag or argument is invalid; fix it and try again."""


class ImportRefusedError(DelaylineError, ImportError):
    """A module delayline keeps out of a process was imported there (pandas in a Spark
    task's Python worker: :mod:`delayline.core.arrow_workers`)."""


class InvalidScheduleError(DelaylineError, ValueError):
    """The caller asked to write a schedule the contract would reject."""


class RecordFormatError(DelaylineError, ValueError):
    """Bytes in one of delayline's own formats (the header encoding, a held or copied
    schedule, an envelope's JSON) cannot be read: truncated, or of another format."""


class FormatVersionError(DelaylineError):
    """Data delayline left behind (a checkpoint, an in-flight record, a commit marker, a
    held schedule in Redis) was written in a newer format than this release reads: stop
    and run the release that wrote it, or a later one. Not a bad record to skip."""


class DefinitionError(DelaylineError, TypeError):
    """A class of delayline's is declared in a way a decorator of it cannot serve (see
    :func:`delayline.core.frozen.fills_slots`): a programming error, raised on import."""


class WaitTimeoutError(DelaylineError, TimeoutError):
    """Something waited for did not come in time (the test and bench harnesses)."""


class BenchError(DelaylineError):
    """A benchmark could not run or measure (the pipeline exited, no figures)."""


class KafkaUnavailableError(DelaylineError):
    """The Kafka cluster did not answer in time; it may come back."""

    retriable = True


class CommitterNameTakenError(DelaylineError):
    """The group fenced this committer's consumer: a member joined under its name (its
    static member id). That member is another committer started under the same name,
    or this very consumer, which joined again after a broker pause swallowed an answer
    (the group shows the two alike: a static member keeps its first client id). Not
    retried: the committer stops."""


class DeliveryError(DelaylineError):
    """Kafka refused or lost a record the client produced.

    Attributes:
        failures: ``(schedule id, reason)`` for each record that failed.
    """

    retriable = True

    def __init__(self, failures: list[tuple[str, str]]) -> None:
        self.failures = failures
        shown = ", ".join(f"{sid!r}: {why}" for sid, why in failures[:5])
        more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
        super().__init__(f"{len(failures)} record(s) not written: {shown}{more}")


class TopicConfigError(DelaylineError):
    """An existing topic is configured in a way delayline cannot work with."""


class TopicMissingError(TopicConfigError):
    """A topic delayline needs does not exist: the pipeline, or ``delayline topics
    create``, makes it (the API answers 503 with ``Retry-After``; elsewhere it is more
    often a misspelt name than a topic about to appear)."""


class TopicDeniedError(TopicConfigError):
    """The principal may not describe or read a topic delayline needs (its ACLs):
    ``delayline acls`` says which it needs. Retrying does not help."""


class NoSuchTopicError(TopicConfigError):
    """A topic named in a request does not exist, nor is anything about to make it (a
    consumer group's dead-letter topic: the API answers 404)."""


class TargetNotAllowedError(DelaylineError):
    """The target topic does not match ``--allowed-target-topics``."""


class RetriesExhaustedError(DelaylineError):
    """A retry helper was asked for an attempt beyond the policy's maximum."""


class InfraError(DelaylineError):
    """Local infrastructure (jars, Java, the local broker) could not be prepared."""


class BrokerAlreadyRunningError(InfraError):
    """A broker already runs on this data directory."""


class BrokerNotRunningError(InfraError):
    """No broker runs on this data directory."""


class BrokerStartError(InfraError):
    """The local broker exited or did not become ready in time."""

    retriable = True


class RedisServerError(InfraError):
    """The local Redis server (``delayline redis``) could not be started or stopped."""


class SparkClusterError(InfraError):
    """The local Spark cluster (``delayline cluster``) could not be started or stopped."""


class RedisUnavailableError(DelaylineError):
    """Redis did not answer in time (the Redis hold); it may come back."""

    retriable = True


class CatalogError(DelaylineError):
    """The schedule catalog (the API's index of the topics) cannot be used as is."""


class AuthError(DelaylineError):
    """A request lacked the credentials the API requires."""


class HttpUnavailableError(DelaylineError):
    """An HTTP service delayline asked did not answer; it may come back."""

    retriable = True


class ApiUnavailableError(HttpUnavailableError):
    """``delayline api`` did not answer; it may come back."""
