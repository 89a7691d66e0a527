"""What the committer's watch costs to remember a backlog: memory and CPU per record.

The watch remembers every input record the pipeline has not read yet
(:class:`delayline.committer.later.LaterRecords`). This notes ``--records`` records of
distinct ids (UUIDs, as a producer would write them) read over ``--seconds`` seconds
across 12 partitions, as the watch would while the pipeline is far behind, then asks for
``--lookups`` handed-over versions (half of them with a later record; one at a time,
then 500 at a time as a batch handed over is checked), then forgets
everything as the pipeline catches up. Each layout runs in a process of its own and
reports its RSS growth, so what the arrays and the objects take is counted alike.

    .venv/bin/python benchmarks/watch_memory.py [--records 1000000] [--json F]

No Kafka, no Spark: the parse of each record (about 10 us, the same in both) is not in it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import time
import uuid
from pathlib import Path
from typing import Any

from delayline.committer.later import HOT_RECORDS, UPDATE, Later, LaterRecords
from delayline.core.model import Schedule, SourceRef

TOPIC = "schedules"
PARTITIONS = 12


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(hot_records: int, records: int, seconds: int, lookups: int) -> dict[str, Any]:
    """One layout, in this process: its figures."""
    later = LaterRecords(hot_records=hot_records)
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
        "left": len(later),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def in_child(hot_records: int, records: int, seconds: int, lookups: int) -> dict[str, Any]:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run, (hot_records, records, seconds, lookups))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=int, default=100, help="over which they are read")
    parser.add_argument("--lookups", type=int, default=10_000)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    results = {}
    for name, hot in (("objects", 2**62), ("columns", HOT_RECORDS)):
        print(f"{name}: noting {args.records:,} records ...", flush=True)
        results[name] = in_child(hot, args.records, args.seconds, args.lookups)
        print(f"  {json.dumps(results[name])}", flush=True)
        assert results[name]["withheld"] == args.lookups // 2, results[name]
        assert results[name]["left"] == 0, results[name]
    if args.json is not None:
        args.json.write_text(json.dumps({"figures": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
