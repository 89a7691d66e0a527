"""The order of versions of one schedule id.

A schedule id can have versions in several partitions of a schedules topic: a
producer with librdkafka's default partitioner next to a Java one, or a topic whose
partition count grew. Offsets of different partitions say nothing about order, so:

1. Within one partition the higher offset is newer (Kafka's own order).
2. Across partitions the later record timestamp is newer.
3. Equal timestamps across partitions: the higher partition number is newer. This
   tie-break is arbitrary but fixed, so every reader (hold, catalog, API) agrees.

The hold, the catalog and the API all use :func:`supersedes`; nothing else compares
versions.

Assumption: the record timestamps of one id's versions grow with the time they were
written (``CreateTime`` from producers whose clocks agree, or ``LogAppendTime``). When
they do not, for example two producers with skewed clocks writing to different
partitions, the rule is still deterministic for a given set of records, but readers
that see the same records in a different order (the hold sorts a batch by partition,
the catalog reads in arrival order) can settle on different versions.
"""

from __future__ import annotations

from delayline.core.model import SourceRef


def supersedes(new: SourceRef, old: SourceRef) -> bool:
    """Whether ``new`` is a later version than ``old`` of the same id (same topic).

    Irreflexive: a record never supersedes itself, so a replayed record is a no-op.
    """
    if new.partition == old.partition:
        return new.offset > old.offset
    if new.timestamp_ms != old.timestamp_ms:
        return new.timestamp_ms > old.timestamp_ms
    return new.partition > old.partition
