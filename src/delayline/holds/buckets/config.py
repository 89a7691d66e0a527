"""Settings and layout of the bucket hold (no Kafka or Spark import: the CLI reads them).

Bucket ``i`` holds copies whose remaining wait, when they were written, was in
``[lower_ms(i), upper_ms(i))``: with the default boundaries 0-1 s, 1-2 s, 2-4 s, ...,
2^19-2^20 s, and an open-ended last bucket from 2^20 s (about 12 days). The wait is
counted to a schedule's raise time (its due time less the pipeline's lead). A copy is
*ready* once it has waited its bucket's lower bound; it then has less than
``upper - lower`` to go, which for doubling boundaries is a smaller bucket. Every copy
of a bucket partition is written with its batch time as timestamp, in batch order, so the
ready ones are a prefix of the partition: a reader never looks past the first copy that
is not ready.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass

from delayline.core.units import format_duration_ms, parse_duration_ms
from delayline.errors import ConfigError

DEFAULT_BOUNDARIES_MS = tuple(1_000 << i for i in range(21))
"""1 s, 2 s, 4 s, ... 2^20 s: 22 buckets."""
DEFAULT_RETENTION_MARGIN_MS = 7 * 24 * 3_600_000
"""How long a copy outlives its bucket's range on disk: the longest outage of the
pipeline that loses nothing."""
DEFAULT_TOPIC_PREFIX = "delayline-bucket"
DEFAULT_PARTITIONS = 2
_PREFIX = re.compile(r"[A-Za-z0-9._-]{1,200}")


@dataclass(frozen=True, slots=True)
class BucketsConfig:
    """Where and how the bucket hold keeps pending schedules.

    Attributes:
        boundaries_ms: The buckets' boundaries, strictly increasing: bucket 0 is
            ``[0, boundaries_ms[0])``, the last ``[boundaries_ms[-1], forever)``. A
            boundary more than twice the one before makes copies of its bucket move
            more often (each move is a write), never late.
        topic_prefix: Bucket ``i`` is the topic ``<prefix>-<i>`` (two digits).
        partitions: Partitions of each bucket topic (readers run one task each).
        retention_margin_ms: A bucket's retention is its range plus this: how long the
            pipeline may be down without a copy being deleted before it is read.
    """

    boundaries_ms: tuple[int, ...] = DEFAULT_BOUNDARIES_MS
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    partitions: int = DEFAULT_PARTITIONS
    retention_margin_ms: int = DEFAULT_RETENTION_MARGIN_MS

    def __post_init__(self) -> None:
        b = self.boundaries_ms
        if not b or b[0] <= 0 or any(x >= y for x, y in itertools.pairwise(b)):
            raise ConfigError(
                f"--bucket-boundaries must be positive and strictly increasing, got {list(b)}"
            )
        if len(b) > 63:
            raise ConfigError(f"at most 64 buckets, got {len(b) + 1}")
        if not _PREFIX.fullmatch(self.topic_prefix):
            raise ConfigError(
                "--bucket-topic-prefix must be 1-200 of letters, digits and ._-, "
                f"got {self.topic_prefix!r}"
            )
        if self.partitions < 1:
            raise ConfigError(f"--bucket-partitions must be >= 1, got {self.partitions}")
        if self.retention_margin_ms < 0:
            raise ConfigError(
                f"--bucket-retention-margin must be >= 0, got {self.retention_margin_ms} ms"
            )

    @property
    def count(self) -> int:
        """How many buckets there are."""
        return len(self.boundaries_ms) + 1

    def topic(self, bucket: int) -> str:
        """The topic of ``bucket``."""
        return f"{self.topic_prefix}-{bucket:02d}"

    @property
    def topics(self) -> tuple[str, ...]:
        """Every bucket's topic, smallest bucket first."""
        return tuple(self.topic(i) for i in range(self.count))

    def bucket_of(self, topic: str) -> int:
        """The bucket whose topic is ``topic``.

        Raises:
            ConfigError: it is no bucket topic of this layout.
        """
        for i, name in enumerate(self.topics):
            if name == topic:
                return i
        raise ConfigError(f"{topic!r} is not a bucket topic of prefix {self.topic_prefix!r}")

    def lower_ms(self, bucket: int) -> int:
        """The shortest remaining wait a copy of ``bucket`` was written with: how long it
        waits there before it is read."""
        return 0 if bucket == 0 else self.boundaries_ms[bucket - 1]

    def upper_ms(self, bucket: int) -> int | None:
        """The bucket's exclusive upper bound; ``None`` for the open-ended last one."""
        return self.boundaries_ms[bucket] if bucket < len(self.boundaries_ms) else None

    def bucket_for(self, wait_ms: int) -> int:
        """The bucket of a copy with ``wait_ms`` to go (0 for anything below the first
        boundary, the last for anything past the last)."""
        return bisect.bisect_right(self.boundaries_ms, max(wait_ms, 0))

    def ready_until_ms(self, bucket: int, now_ms: int) -> int:
        """Copies of ``bucket`` written at or before this time are ready at ``now_ms``."""
        return now_ms - self.lower_ms(bucket)

    def retention_ms(self, bucket: int) -> int:
        """The retention ``bucket``'s topic needs: the time a copy waits there before it
        is read, then until the end of its range, plus the margin. The last bucket's
        copies are read after its lower bound; twice that covers their stay."""
        upper = self.upper_ms(bucket)
        stay = 2 * self.lower_ms(bucket) if upper is None else upper
        return stay + self.retention_margin_ms

    def describe(self) -> list[str]:
        """One line per bucket: its topic and range, for ``--help`` and logs."""
        lines = []
        for i in range(self.count):
            upper = self.upper_ms(i)
            end = "..." if upper is None else format_duration_ms(upper)
            lines.append(f"{self.topic(i)}: {format_duration_ms(self.lower_ms(i))}-{end}")
        return lines


def parse_boundaries(text: str) -> tuple[int, ...]:
    """``"1s,2s,4s"`` (durations, comma-separated) as milliseconds.

    Raises:
        ConfigError: a part is no duration.
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ConfigError("--bucket-boundaries needs at least one duration, e.g. 1s,2s,4s")
    try:
        return tuple(parse_duration_ms(p) for p in parts)
    except ValueError as exc:
        raise ConfigError(f"--bucket-boundaries: {exc}") from None
