"""The bucket hold's own figures: broker disk of its bucket topics per pending schedule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from delayline.holds.buckets.config import BucketsConfig


def bucket_prefix(run: str) -> str:
    """The bucket topics' prefix of one bench run."""
    return f"bench-{run}-bucket"


def disk(log_dirs: Path, run: str, pending: int) -> dict[str, Any]:
    """Bytes the broker keeps for the bucket topics of ``run`` (every partition
    directory under ``log_dirs``), in total, per bucket, and per pending schedule."""
    layout = BucketsConfig(topic_prefix=bucket_prefix(run))
    per_bucket: dict[str, int] = {}
    for topic in layout.topics:
        size = sum(
            f.stat().st_blocks * 512  # on disk: index files are sparse
            for d in log_dirs.glob(f"{topic}-[0-9]*")
            if d.is_dir()
            for f in d.iterdir()
            if f.is_file()
        )
        if size:
            per_bucket[topic.rsplit("-", 1)[1]] = size
    total = sum(per_bucket.values())
    return {
        "bucket_topics_bytes": total,
        "bytes_by_bucket": per_bucket,
        "pending": pending,
        "bytes_per_pending": round(total / pending, 1) if pending else None,
    }
