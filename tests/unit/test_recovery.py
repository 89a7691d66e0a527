"""Which query failures the pipeline rides out, and for how long (pure logic)."""

from __future__ import annotations

from pathlib import Path

from delayline.pipeline.recovery import (
    FIRST_PAUSE_MS,
    MAX_PAUSE_MS,
    Failure,
    Recovery,
    diagnose,
    given_up,
    rebuild_hint,
)

# Shaped like what Spark reported here when a broker was SIGKILLed for 30 s: the fire
# task's Python traceback, wrapped in Java exceptions, each repeating the cause.
FIRE_TASK_TIMEOUT = """[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function
Traceback (most recent call last):
  File "/x/delayline/fire/transactional.py", line 189, in _new_producer
    producer.init_transactions(config.timeout_ms / 1000)
cimpl.KafkaException: KafkaError{code=_TIMED_OUT,val=-185,str="Timed out"}

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/x/delayline/fire/tasks.py", line 120, in fire_partition
delayline.errors.KafkaUnavailableError: could not initialise transactions: KafkaError{code=_TIMED_OUT}
	at org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException
"""

SOURCE_TIMEOUT = """Job aborted due to stage failure
Caused by: org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before the position for partition sched-0 could be determined
	at org.apache.kafka.clients.consumer.internals.AsyncKafkaConsumer.position
"""

FULL_DISK = """java.io.IOException: No space left on device
	at java.base/java.io.FileOutputStream.writeBytes(Native Method)
Caused by: org.apache.kafka.common.errors.TimeoutException: unrelated
"""

NOT_OURS = """delayline_extra.errors.KafkaUnavailableError: a package named like ours
Traceback (most recent call last):
delayline.pipeline.recovery.NoSuchError: made up
"""


def test_a_fire_task_timing_out_is_our_retriable_kafka_error() -> None:
    failure = diagnose(FIRE_TASK_TIMEOUT)
    assert failure.name == "KafkaUnavailableError"
    assert failure.message.startswith("could not initialise transactions")
    assert failure.retriable


def test_a_non_retriable_error_of_ours_is_not_retried() -> None:
    failure = diagnose("delayline.errors.ConfigError: --lead must be at most 30s\n")
    assert failure == Failure("ConfigError", "--lead must be at most 30s", retriable=False)


def test_the_kafka_sources_timeout_is_retriable() -> None:
    failure = diagnose(SOURCE_TIMEOUT)
    assert failure.name == "TimeoutException"
    assert failure.retriable


def test_a_full_disk_wins_over_anything_else_and_is_not_retried() -> None:
    failure = diagnose(FULL_DISK)
    assert failure.name == "NoSpaceLeft"
    assert not failure.retriable
    assert "No space left on device" in failure.message


def test_only_classes_of_the_delayline_package_count_and_unknown_ones_are_not_retried() -> None:
    failure = diagnose(NOT_OURS)
    assert failure.name == "NoSuchError"
    assert not failure.retriable


def test_an_unrecognised_error_gives_its_first_line() -> None:
    failure = diagnose("\n  java.lang.IllegalStateException: boom\n\tat x\n")
    assert failure == Failure("unknown", "java.lang.IllegalStateException: boom", False)
    assert str(failure) == "java.lang.IllegalStateException: boom"


RETRIABLE = Failure("KafkaUnavailableError", "timed out", retriable=True)


def test_pauses_double_up_to_the_maximum_within_the_timeout() -> None:
    recovery = Recovery(outage_timeout_ms=600_000)
    pauses = [recovery.failed(RETRIABLE, now_ms=1_000 * i) for i in range(7)]
    expected = [min(FIRST_PAUSE_MS * 2**i, MAX_PAUSE_MS) for i in range(7)]
    assert pauses == expected
    assert recovery.restarts == 7


def test_a_streak_older_than_the_timeout_gives_up_and_the_last_pause_is_cut() -> None:
    recovery = Recovery(outage_timeout_ms=10_000)
    assert recovery.failed(RETRIABLE, now_ms=0) == FIRST_PAUSE_MS
    assert recovery.failed(RETRIABLE, now_ms=7_000) == 3_000  # 4 s would pass the limit
    assert recovery.failed(RETRIABLE, now_ms=10_000) is None


def test_a_completed_batch_begins_a_new_streak() -> None:
    recovery = Recovery(outage_timeout_ms=10_000)
    assert recovery.failed(RETRIABLE, now_ms=0) is not None
    assert recovery.failed(RETRIABLE, now_ms=5_000) is not None
    recovery.progressed()
    assert recovery.failed(RETRIABLE, now_ms=12_000) == FIRST_PAUSE_MS
    assert recovery.failed(RETRIABLE, now_ms=21_000) == 1_000


def test_a_zero_timeout_or_a_non_retriable_failure_never_restarts() -> None:
    assert Recovery(outage_timeout_ms=0).failed(RETRIABLE, now_ms=0) is None
    fatal = Failure("NoSpaceLeft", "No space left on device", retriable=False)
    assert Recovery(outage_timeout_ms=60_000).failed(fatal, now_ms=0) is None


def test_giving_up_says_why_and_what_to_do(tmp_path: Path) -> None:
    outage = given_up(RETRIABLE, 300_000, tmp_path)
    assert outage.startswith(str(RETRIABLE))
    assert "still failing after 5m of restarts; nothing was lost" in outage
    full = given_up(diagnose(FULL_DISK), 300_000, tmp_path)
    assert full.startswith(f"No space left on device: the checkpoint {tmp_path} (")
    assert "KiB free there now" in full
    unknown = diagnose("java.lang.IllegalStateException: boom")
    assert given_up(unknown, 300_000, tmp_path) == str(unknown)
    assert "--rebuild" in rebuild_hint(tmp_path)
    assert str(tmp_path) in rebuild_hint(tmp_path)
