"""When the committer's watch may forget what it read: once the pipeline has read it.

A cancel or update the watch remembers must stay remembered until the hold has folded
it: until then a version it ends may still be handed over. The pipeline's checkpoint
says which input a batch reads; :class:`PipelineFollower` turns that into positions the
watch may forget up to (:attr:`~delayline.committer.watch.InputWatch.taken`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from delayline.committer.checkpoint_log import checkpoint_positions, latest_logged_batch
from delayline.committer.inflight_reader import InflightReader
from delayline.committer.watch import InputWatch
from delayline.errors import KafkaUnavailableError

log = logging.getLogger(__name__)

TAKEN_LOOK_S = 1.0
"""How often the committer looks for a new batch in the pipeline's checkpoint."""


class PipelineFollower:
    """Follows the pipeline's checkpoint for one session's watch.

    Args:
        checkpoint_dir: The pipeline's checkpoint.
    """

    def __init__(self, checkpoint_dir: Path) -> None:
        self._checkpoint = checkpoint_dir
        self._taken: tuple[int, dict[tuple[str, int], int], dict[int, int]] | None = None
        """A batch newly in the checkpoint's offsets log, where it reads its input to,
        and the in-flight topic's stable ends once it was seen."""
        self._taken_batch: int | None = None
        """The batch whose reads the watch may forget."""
        self._looked = 0.0
        """When the checkpoint was last looked at (monotonic seconds)."""

    def follow(self, reader: InflightReader, watch: InputWatch) -> None:
        """Let ``watch`` forget what the pipeline has read
        (:meth:`~delayline.committer.later.LaterRecords.expire`).

        A batch in the checkpoint's offsets log reads its input up to the offsets logged
        there, and Spark logs a batch only once the one before it committed, so every
        version handed over by a batch that did not read a record was committed to the
        in-flight topic before the log named a batch that did. Once the in-flight
        partitions are read up to their stable ends as of then, each such version has
        been checked against what the watch remembers, and the records that batch reads
        are the hold's to fold. Looked at once a second."""
        if self._taken is None:
            if time.monotonic() < self._looked + TAKEN_LOOK_S:
                return
            self._looked = time.monotonic()
            batch = latest_logged_batch(self._checkpoint)
            if batch is None or batch == self._taken_batch:
                return
            positions = checkpoint_positions(self._checkpoint, batch)
            try:
                ends = reader.stable_ends()
            except KafkaUnavailableError as exc:
                log.debug("committer: in-flight ends unknown (%s); looked at again later", exc)
                return
            self._taken = (batch, positions, ends)
        batch, positions, ends = self._taken
        if reader.has_read(ends):
            self._taken = None
            self._taken_batch = batch
            watch.taken = positions
