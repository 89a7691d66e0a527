"""The bucket topics as a Spark streaming source: each micro-batch reads what is ready.

A Python data source (Spark 4): the driver side asks Kafka, per bucket partition, for
the first offset written after the bucket's ready time (``ListOffsets`` by timestamp,
``read_committed``); everything before it is ready, and the micro-batch reads that
range on the executors. Spark logs each batch's ranges before running it, so a replay
reads the same copies. Smaller buckets are served first when a read limit applies.

Rows have the gate's input columns (:data:`COLUMNS`), kind ``copy``: the parsed
schedules are united with them before :class:`BucketGate` (Java) judges both.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)

from delayline.core.arrow_workers import refuse_pandas
from delayline.errors import TopicConfigError
from delayline.holds.buckets.config import BucketsConfig
from delayline.holds.buckets.read import SCHEMA_DDL, BucketRead, Span, plan_reads, read_spans
from delayline.kafka.config import kafka_client_config

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

NAME = "delayline_buckets"


def layout_options(
    bootstrap_servers: str, layout: BucketsConfig, max_rows: int, tasks: int = 2
) -> dict[str, str]:
    """The source's options (Spark passes options as strings): at most ``max_rows``
    offsets per micro-batch (0: no limit), read by at most ``tasks`` Spark tasks."""
    return {
        "bootstrap": bootstrap_servers,
        "layout": json.dumps(
            {
                "boundaries_ms": list(layout.boundaries_ms),
                "topic_prefix": layout.topic_prefix,
                "partitions": layout.partitions,
                "retention_margin_ms": layout.retention_margin_ms,
            }
        ),
        "max_rows": str(max_rows),
        "tasks": str(tasks),
    }


def layout_of(options: dict[str, str]) -> BucketsConfig:
    raw = json.loads(options["layout"])
    return BucketsConfig(
        boundaries_ms=tuple(raw["boundaries_ms"]),
        topic_prefix=raw["topic_prefix"],
        partitions=int(raw["partitions"]),
        retention_margin_ms=int(raw["retention_margin_ms"]),
    )


class BucketSource(DataSource):
    """``spark.readStream.format("delayline_buckets")`` (see :func:`layout_options`)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802 - Spark's name
        return BucketReader(dict(self.options))


class BucketReader(DataSourceStreamReader):
    """The driver side (``latestOffset``, ``partitions``) and the executor side (``read``)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.bootstrap = options["bootstrap"]
        self.layout = layout_of(options)
        self.max_rows = int(options.get("max_rows", "0"))
        self.tasks = int(options.get("tasks", "2"))
        self._admin: Any = None

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        # From the start of every partition: a copy written before the query's first
        # batch is read (and dropped, if it is not live).
        return {_name(t, p): 0 for t, parts in self._partitions().items() for p in parts}

    def getDefaultReadLimit(self) -> Any:  # noqa: N802
        from pyspark.sql.streaming.datasource import (  # noqa: PLC0415
            ReadAllAvailable,
            ReadMaxRows,
        )

        return ReadMaxRows(self.max_rows) if self.max_rows > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:  # noqa: N802
        from pyspark.sql.streaming.datasource import ReadMaxRows  # noqa: PLC0415

        ready = self._ready_ends(int(time.time() * 1000))
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end: dict[str, int] = {}
        for name in sorted(ready, key=_bucket_order):  # smallest bucket first
            begin = int(start.get(name, 0))
            stop = max(begin, ready[name])
            if budget is not None:
                stop = begin + min(stop - begin, budget)
                budget -= stop - begin
            end[name] = stop
        for name, offset in start.items():
            end.setdefault(name, int(offset))  # a partition that is gone keeps its place
        return end

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        spans = []
        for name, stop in end.items():
            begin = int(start.get(name, 0))
            if stop > begin:
                topic, partition = _split(name)
                spans.append(Span(topic, partition, begin, int(stop)))
        return plan_reads(spans, self.bootstrap, self.tasks)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, BucketRead)
        refuse_pandas()
        return read_spans(partition)

    def commit(self, end: dict[str, int]) -> None:
        """Delete the copies of committed batches: Spark calls this as it starts the
        batch after them (at ``end``), and a replay only ever replays that one. So the
        last batch's copies wait for the next batch. What is read costs no disk
        past the segment it sits in; retention is the safety net for the rest."""

        done = [TopicPartition(*_split(name), int(offset)) for name, offset in end.items()]
        done = [tp for tp in done if tp.offset > 0]
        if not done or self._admin is None:
            return
        try:
            for future in self._admin.delete_records(done, request_timeout=30).values():
                future.result()
        except Exception as exc:  # disk only: retention removes them later
            log.warning(
                "could not delete read copies (%s: %s); retention will", type(exc).__name__, exc
            )

    def stop(self) -> None:
        self._admin = None

    def _partitions(self) -> dict[str, list[int]]:
        """Each bucket topic's partitions, as the cluster has them now (the fire stage
        writes to all of them, however many were added).

        Raises:
            TopicConfigError: a bucket topic is missing.
        """

        if self._admin is None:
            self._admin = AdminClient(kafka_client_config(self.bootstrap))
        topics = self._admin.list_topics(timeout=30).topics
        missing = [t for t in self.layout.topics if t not in topics]
        if missing:
            raise TopicConfigError(
                f"bucket topic(s) {', '.join(missing)} missing: "
                "run `delayline topics create --hold buckets`"
            )
        return {t: sorted(topics[t].partitions) for t in self.layout.topics}

    def _ready_ends(self, now_ms: int) -> dict[str, int]:
        """Per bucket partition, the end of what is ready at ``now_ms``."""

        partitions = self._partitions()
        specs: dict[Any, Any] = {}
        latest: dict[Any, Any] = {}
        for bucket, topic in enumerate(self.layout.topics):
            until = self.layout.ready_until_ms(bucket, now_ms)
            for p in partitions[topic]:
                specs[TopicPartition(topic, p)] = OffsetSpec.for_timestamp(until + 1)
                latest[TopicPartition(topic, p)] = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        kwargs = {"isolation_level": IsolationLevel.READ_COMMITTED, "request_timeout": 30}
        by_time = self._admin.list_offsets(specs, **kwargs)
        ends = self._admin.list_offsets(latest, **kwargs)
        out: dict[str, int] = {}
        for tp, future in by_time.items():
            first_later = int(future.result().offset)
            stable_end = int(ends[TopicPartition(tp.topic, tp.partition)].result().offset)
            # -1: no copy written after the ready time; all up to the stable end is ready.
            ready = stable_end if first_later < 0 else min(first_later, stable_end)
            out[_name(tp.topic, tp.partition)] = ready
        return out


def _name(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def _split(name: str) -> tuple[str, int]:
    topic, _, partition = name.rpartition(":")
    return topic, int(partition)


def _bucket_order(name: str) -> tuple[str, int]:
    topic, partition = _split(name)
    return topic, partition  # bucket topics sort by their two-digit number
