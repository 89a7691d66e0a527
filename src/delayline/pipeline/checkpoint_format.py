"""The checkpoint's format: ``<checkpoint>/delayline-format.json`` names the version of
what delayline keeps there (the hold's state in Spark's state store, the offsets its
committer's watch reads), so a release that cannot read it stops before Spark touches it.

A checkpoint without the file was written before formats were recorded: format 1.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from delayline.contract.formats import CHECKPOINT
from delayline.core.version import VERSION
from delayline.errors import ConfigError

log = logging.getLogger(__name__)

FORMAT_FILE = "delayline-format.json"


def claim_format(checkpoint_dir: Path) -> int:
    """Check the checkpoint's format and record this release's, if the checkpoint is new
    or older; returns the format found (``CHECKPOINT.current`` for a new checkpoint).

    Raises:
        FormatVersionError: a newer delayline wrote the checkpoint.
        ConfigError: the file is there but unreadable (say what to do with it).
    """
    path = checkpoint_dir / FORMAT_FILE
    if path.exists():
        found = _read(path)
    else:  # a new checkpoint, or one written before formats were recorded (1)
        found = 1 if _has_state(checkpoint_dir) else CHECKPOINT.current
    CHECKPOINT.check(found, f"checkpoint {checkpoint_dir}")
    if not path.exists() or found < CHECKPOINT.current:
        _write(path)
    return found


def _read(path: Path) -> int:
    try:
        found = json.loads(path.read_text())["format"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{path} cannot be read ({exc}): it names the checkpoint's format. Restore it, "
            "or start with --rebuild to read the schedules topics again"
        ) from exc
    if not isinstance(found, int):
        raise ConfigError(f"{path}: format {found!r} is not a number")
    return found


def _has_state(checkpoint_dir: Path) -> bool:
    """Whether Spark wrote anything in the checkpoint (its ``metadata``, offsets...)."""
    return (checkpoint_dir / "metadata").exists() or (checkpoint_dir / "offsets").exists()


def _write(path: Path) -> None:
    record = {"format": CHECKPOINT.current, "written_by": f"delayline {VERSION}"}
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record) + "\n")
    temporary.replace(path)
    log.info("checkpoint %s: format %d", path.parent, CHECKPOINT.current)
