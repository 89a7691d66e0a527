"""The bucket hold's side of ``delayline bench --hold buckets``: its topics named after
the run, and the broker disk they take per pending schedule (with a private broker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from delayline.holds.buckets.config import BucketsConfig
from delayline.holds.kinds import BenchPlace


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


class BucketsBench:
    """The bucket hold in one bench run: its topics under ``bench-<run>-bucket``."""

    def __init__(self, place: BenchPlace) -> None:
        self.run = place.run
        self.log_dirs = place.log_dirs
        self.run_flags = ["--bucket-topic-prefix", bucket_prefix(place.run)]

    def baseline(self, writes: int) -> None:
        del writes  # its store is the broker, measured for every hold

    def figures(self, pending: int) -> dict[str, Any] | None:
        if self.log_dirs is None:
            return None  # an external broker's disks are not ours to read
        return disk(self.log_dirs, self.run, pending)

    def close(self) -> None:
        """Nothing to stop: its topics live on the run's broker."""
