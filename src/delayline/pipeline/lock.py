"""One pipeline per checkpoint: a lock taken before the pipeline touches anything.

Two pipelines on one checkpoint take each other down: the second one's transactional
producers fence the first one's (it exits on ``_FENCED``), then the second dies on
Spark's ``CONCURRENT_STREAM_LOG_UPDATE``. Nothing is lost, but nothing is delivered
until someone restarts one. So ``delayline run`` takes this lock first, and a second
start on the same checkpoint refuses with a message that names the holder, before it
creates a topic or a producer.

The lock is an ``flock`` on ``<checkpoint>/delayline.lock``, held by the driver process
(no child inherits it: Spark's JVM is started with its descriptors closed). The kernel
releases it when the holder exits for any reason, SIGKILL included, so a restart after a
crash is never refused. Linux's NFS client takes an ``flock`` as a lock on the server,
so the lock also holds between hosts sharing the checkpoint over NFS (v4, or v3 with
``lockd``). A mount with ``nolock`` keeps locks on each host only: there, nothing stops
a second host.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import socket
import time
from pathlib import Path
from typing import IO, Any

from delayline.errors import DelaylineError

log = logging.getLogger(__name__)

LOCK_FILE = "delayline.lock"
"""The lock's file in the checkpoint directory (``--rebuild`` keeps it)."""


class CheckpointLockedError(DelaylineError):
    """Another pipeline runs on this checkpoint; this one did not start."""


class CheckpointLock:
    """The lock of one checkpoint directory, held until :meth:`release` or exit.

    Guarantees: while :meth:`acquire` has returned and :meth:`release` has not been
    called, no other holder on the same directory (another object, another process, or
    another host sharing it through a file system with locking) gets past its own
    :meth:`acquire`.

    Args:
        checkpoint_dir: The pipeline's checkpoint directory (created if missing).
        query_name: Recorded in the lock file, to name the holder to whoever is refused.
    """

    def __init__(self, checkpoint_dir: Path, query_name: str) -> None:
        self.path = checkpoint_dir / LOCK_FILE
        self.query_name = query_name
        self._file: IO[str] | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._file is not None

    def acquire(self) -> None:
        """Take the lock, or refuse at once.

        Raises:
            CheckpointLockedError: another process holds it (the message names that
                process's host, PID, query name and start time, as it recorded them).
        """
        if self._file is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Opened for appending, so that a refused process truncates nothing: the holder's
        # record stays readable.
        lock_file = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock_file.seek(0)
            holder = _holder(lock_file.read())
            lock_file.close()
            raise CheckpointLockedError(
                f"another pipeline runs on checkpoint {self.path.parent} ({holder}): "
                "stop it first, or give this one its own --checkpoint-dir and --query-name"
            ) from None
        lock_file.seek(0)
        lock_file.truncate()
        record = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "query_name": self.query_name,
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        lock_file.write(json.dumps(record) + "\n")
        lock_file.flush()
        self._file = lock_file
        log.info("checkpoint %s locked for this pipeline", self.path.parent)

    def release(self) -> None:
        """Let go of the lock (closing the file releases it)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> CheckpointLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _holder(text: str) -> str:
    """The holder's record as words, or what is known when it left none."""
    try:
        record: Any = json.loads(text.strip().splitlines()[0])
    except (ValueError, IndexError):
        return "its holder left no record"
    if not isinstance(record, dict):
        return "its holder left no record"
    return (
        f"pid {record.get('pid')} on host {record.get('host')}, query "
        f"{record.get('query_name')}, since {record.get('since')}"
    )


def clear_checkpoint(checkpoint_dir: Path) -> None:
    """Delete what the checkpoint holds (``--rebuild``), except the lock's file: its
    holder keeps the lock, and a new file would be a lock nobody holds."""
    if not checkpoint_dir.exists():
        return
    for entry in checkpoint_dir.iterdir():
        if entry.name == LOCK_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
