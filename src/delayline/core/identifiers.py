"""The identifiers exactly-once relies on, made here and nowhere else.

Kafka fences a producer by its transactional id, a replay finds its batch by the commit
marker's key, and a second pipeline is refused by the lease group and the Redis
registration. Two copies of one format that drift apart would break fencing silently, so
every such identifier is made by a function of this module, and
``tests/unit/test_identifiers.py`` pins each format.

None of them depends on a Spark partition's or task's index alone: a partition here is the
*state* partition of the shuffle by schedule, the same for a record on every replay.
"""

from __future__ import annotations

import json
from pathlib import Path


def transactional_id(query_name: str) -> str:
    """The pipeline's transactional id: stable across restarts of one query name,
    distinct between pipelines; the prefix of every transactional id it uses."""
    return f"delayline-{query_name}"


def partition_transactional_id(pipeline_txn: str, partition: int) -> str:
    """The fire task's producer of one state partition (a replay of its batch, on any
    executor, fences the attempt before it)."""
    return f"{pipeline_txn}-p{partition}"


def committer_group(pipeline_txn: str) -> str:
    """The consumer group the committers of a pipeline form: they split the in-flight
    topic's partitions, and its committed offsets say where each partition resumes."""
    return f"{pipeline_txn}-committer"


def committer_transactional_id(pipeline_txn: str, partition: int, lane: int) -> str:
    """The producer of one lane of one in-flight partition. Keyed by the partition, not
    by the committer: whichever committer takes the partition over fences the producers
    of the one before (and aborts their open transactions) before it reads the
    partition's tombstones."""
    return f"{committer_group(pipeline_txn)}-p{partition}-{lane}"


def committer_instance_id(pipeline_txn: str, name: str) -> str:
    """The static member id of the committer called ``name``: a committer restarted
    under its name takes its partitions back at once, without a rebalance."""
    return f"{committer_group(pipeline_txn)}-{name}"


def committer_name(pipeline_txn: str, instance_id: str | None) -> str:
    """The name in :func:`committer_instance_id` (``""`` for a member without one)."""
    return (instance_id or "").removeprefix(f"{committer_group(pipeline_txn)}-")


def run_id(query_name: str, query_id: str) -> str:
    """One run of the pipeline: a checkpoint's streaming query (a ``--rebuild`` starts a
    new one); the key of its commit markers."""
    return f"{query_name}@{query_id}"


def partition_marker_key(run: str, partition: int) -> str:
    """The commit marker key of one state partition's batches in ``run``."""
    return f"{run}/p{partition}"


def checkpoint_query_id(checkpoint_dir: Path) -> str:
    """The query id Spark stores in the checkpoint (``metadata``); new after ``--rebuild``.

    Raises:
        OSError: the checkpoint has no metadata yet (the query has not started).
    """
    metadata = (checkpoint_dir / "metadata").read_text()
    return str(json.loads(metadata.splitlines()[0])["id"])


def lease_group(query_name: str) -> str:
    """The consumer group a running pipeline of ``query_name`` is the member of."""
    return f"delayline-{query_name}-lease"


def redis_txn_claim(pipeline_txn: str) -> str:
    """The Redis hold's registration of a transactional id beside its topics (topic
    names have no ``:``), so two pipelines of one query name cannot both run."""
    return f"txn:{pipeline_txn}"


def inflight_topic(query_name: str) -> str:
    """The topic schedules handed to the committer go to."""
    return f"{query_name}-inflight"


def wake_topic(query_name: str) -> str:
    """The pipeline's own wake topic."""
    return f"{query_name}-wake"


def notice_topic(query_name: str) -> str:
    """The topic of the pipeline's notice rules (:mod:`delayline.contract.notice`): which
    schedule versions its committers hand over themselves."""
    return f"{query_name}-notice"
