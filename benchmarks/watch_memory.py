"""What the committer's watch costs to remember a backlog: memory and CPU per record.

The watch remembers every input record the pipeline has not read yet
(:class:`delayline.committer.later.LaterRecords`). This notes ``--records`` records of
distinct ids (UUIDs, as a producer would write them) read over ``--seconds`` seconds
across 12 partitions, as the watch would while the pipeline is far behind, then asks for
``--lookups`` handed-over versions (half of them with a later record; one at a time,
then 500 at a time as a batch handed over is checked), then forgets
everything as the pipeline catches up. Each layout runs in a process of its own and
reports its RSS growth, so what the arrays and the objects take is counted alike:
``objects`` (every record an object), ``columns`` (past 100,000, in arrays in memory)
and ``files`` (the same arrays in files, as the committer runs: their size is
``files_mb``, in the page cache or on disk, not in the process).

    .venv/bin/python benchmarks/watch_memory.py [--records 1000000] [--layouts files] [--json F]

No Kafka, no Spark: the parse of each record (about 10 us, the same in both) is not in it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from delayline.committer.later import HOT_RECORDS, UPDATE, Later, LaterRecords
from delayline.core.model import Schedule, SourceRef
from delayline.core.mounts import mount_of, read_mounts

TOPIC = "schedules"
PARTITIONS = 12


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(hot_records: int, spill: bool, records: int, seconds: int, lookups: int) -> dict[str, Any]:
    """One layout, in this process: its figures."""
    later = LaterRecords(hot_records=hot_records, spill=spill)
    ids = [str(uuid.uuid4()) for _ in range(lookups)]
    before = rss_mb()
    cpu = time.process_time()
    for i in range(records):
        sid = ids[i] if i < lookups else str(uuid.uuid4())
        partition = i % PARTITIONS
        offset = i // PARTITIONS
        read_ms = i * seconds * 1_000 // records
        later.note(TOPIC, sid, Later(UPDATE, partition, offset, read_ms, offset, read_ms))
    note_us = (time.process_time() - cpu) * 1e6 / records
    grown = rss_mb() - before
    on_disk = files_mb()
    # Every other one has a later record (its own, one offset on).
    sources = [SourceRef(TOPIC, i % PARTITIONS, i // PARTITIONS - i % 2, 0) for i in range(lookups)]
    versions = [Schedule(sid, 0, "t", None, b"", (), sources[i]) for i, sid in enumerate(ids)]
    cpu = time.process_time()
    withheld = sum(later.ends(v) is not None for v in versions)
    ends_us = (time.process_time() - cpu) * 1e6 / len(versions)
    cpu = time.process_time()
    batches = [versions[i : i + 500] for i in range(0, len(versions), 500)]
    assert sum(k is not None for b in batches for k in later.ends_each(b)) == withheld
    ends_each_us = (time.process_time() - cpu) * 1e6 / len(versions)
    cpu = time.process_time()
    everything = {(TOPIC, p): records for p in range(PARTITIONS)}
    later.expire(seconds * 1_000 + later.memory_ms + 1, everything)
    expire_ms = (time.process_time() - cpu) * 1e3
    return {
        "hot_records": hot_records,
        "remembered": records,
        "rss_growth_mb": round(grown, 1),
        "bytes_per_record": round(grown * 2**20 / records, 1),
        "note_us_per_record": round(note_us, 2),
        "ends_us_per_version": round(ends_us, 2),
        "ends_each_us_per_version": round(ends_each_us, 2),
        "withheld": withheld,
        "forget_all_ms": round(expire_ms, 1),
        "files_mb": round(on_disk, 1),
        "left": len(later),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def files_mb() -> float:
    """The size of the unnamed files of the temporary directory this process maps (MiB)."""
    sizes = {}
    prefix = os.path.join(tempfile.gettempdir(), "#")
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith(prefix):
                low, high = (int(x, 16) for x in fields[0].split("-"))
                sizes[fields[0]] = high - low
    return sum(sizes.values()) / 2**20


def in_child(
    hot_records: int, spill: bool, records: int, seconds: int, lookups: int
) -> dict[str, Any]:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run, (hot_records, spill, records, seconds, lookups))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=int, default=100, help="over which they are read")
    parser.add_argument("--lookups", type=int, default=10_000)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument(
        "--layouts", default="objects,columns,files", help="which to run, comma-separated"
    )
    args = parser.parse_args()
    layouts = {
        "objects": (2**62, False),
        "columns": (HOT_RECORDS, False),
        "files": (HOT_RECORDS, True),
    }
    results = {}
    print(f"files in {tempfile.gettempdir()} ({filesystem(tempfile.gettempdir())})", flush=True)
    for name in args.layouts.split(","):
        hot, spill = layouts[name]
        print(f"{name}: noting {args.records:,} records ...", flush=True)
        results[name] = in_child(hot, spill, args.records, args.seconds, args.lookups)
        print(f"  {json.dumps(results[name])}", flush=True)
        assert results[name]["withheld"] == args.lookups // 2, results[name]
        assert results[name]["left"] == 0, results[name]
    if args.json is not None:
        args.json.write_text(json.dumps({"figures": results}, indent=2) + "\n")


def filesystem(path: str) -> str:
    """The type of the file system ``path`` is on."""
    mount = mount_of(Path(path), read_mounts())
    return "unknown" if mount is None else mount.fs_type


if __name__ == "__main__":
    main()
