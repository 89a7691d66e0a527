"""The formats delayline leaves behind, and which versions of each this release reads.

Every format a process of one release may meet written by another carries its version:
the checkpoint (a file in it, :mod:`delayline.pipeline.checkpoint_format`), the in-flight
records (:mod:`delayline.fire.inflight`), the commit markers
(:mod:`delayline.fire.markers`), the Redis hold's held schedules
(:mod:`delayline.holds.redis.codec`) and task records
(:mod:`delayline.holds.redis.takeover`), the bucket hold's copies
(:mod:`delayline.holds.buckets.copy`) and the catalog (its SQLite ``user_version``,
:mod:`delayline.catalog.sqlite`, rebuilt from the topics when older). A reader takes
every version from :attr:`Format.oldest` to :attr:`Format.current`; one that meets a
newer version raises :class:`~delayline.errors.FormatVersionError`, which stops the
process with what to do (``docs/operations.md``, "Upgrades", lists them all and is
checked against :data:`FORMATS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from delayline.core.version import VERSION
from delayline.errors import FormatVersionError

UPGRADES = "docs/operations.md#upgrades"


@dataclass(frozen=True, slots=True)
class Format:
    """One format and the versions this release reads.

    Attributes:
        name: What it is, as an operator would say it.
        current: The version this release writes.
        oldest: The oldest version this release still reads.
    """

    name: str
    current: int
    oldest: int

    def check_first_byte(self, data: bytes, where: str) -> None:
        """:meth:`check` the version a binary format's first byte names, if it names one
        (0, or :data:`VERSION_BYTES_BELOW` and up: not delayline's, the reader's to
        refuse)."""
        if data and 0 < data[0] < VERSION_BYTES_BELOW:
            self.check(data[0], where)

    def check(self, found: int, where: str) -> None:
        """Raise :class:`FormatVersionError` when ``found`` is newer than :attr:`current`
        or older than :attr:`oldest`.

        Args:
            found: The version read.
            where: What was read, for the message (a path, a topic and offset).
        """
        if found < self.oldest:
            raise FormatVersionError(
                f"{where}: {self.name} in format {found}, which delayline {VERSION} no "
                f"longer reads (formats {self.oldest} to {self.current}): run a release that "
                f"reads both first, and let it finish with the old data ({UPGRADES})"
            )
        if found > self.current:
            raise FormatVersionError(
                f"{where}: {self.name} in format {found}, written by a newer delayline; "
                f"delayline {VERSION} reads formats {self.oldest} to {self.current}. "
                "Run the release that wrote it (or a later one) here too: roll the "
                f"upgrade forward, or roll the writer back first ({UPGRADES})"
            )


VERSION_BYTES_BELOW = 32
"""A binary format's first byte names its version, always below this (printable text, a
JSON ``{`` among it, starts at 32): a first byte of 32 or more is no version at all."""

CHECKPOINT = Format("pipeline checkpoint (the hold's state)", current=1, oldest=1)
INFLIGHT = Format("in-flight record", current=2, oldest=1)
COMMIT_MARKER = Format("commit marker", current=1, oldest=1)
REDIS_SCHEDULE = Format("Redis held schedule", current=1, oldest=1)
REDIS_TASK = Format("Redis task record", current=1, oldest=1)
BUCKET_COPY = Format("bucket copy", current=1, oldest=1)
CATALOG = Format("API catalog", current=3, oldest=1)
NOTICE_RULES = Format("short-notice rules", current=1, oldest=1)
"""The rules of :mod:`delayline.contract.notice`, in the pipeline's notice topic."""
SHORT_POSITIONS = Format("short-notice read positions", current=1, oldest=1)
"""Where a committer's next owner of an in-flight partition reads the input again from
(:mod:`delayline.committer.short_intake`), in the metadata of its committed offset."""

FORMATS = (
    CHECKPOINT,
    INFLIGHT,
    COMMIT_MARKER,
    REDIS_SCHEDULE,
    REDIS_TASK,
    BUCKET_COPY,
    CATALOG,
    NOTICE_RULES,
    SHORT_POSITIONS,
)
"""Every versioned format, as ``docs/operations.md`` lists them."""
