"""What a transaction costs the broker: the same records a second in groups of each size.

A committer writes each group of deliveries in one transaction (each delivery and its
in-flight tombstone: two partitions). This starts a private broker, warms it for 30 s,
then writes ``--rate`` deliveries a second (100-byte records to one topic and a
tombstone each to another, one transactional producer, a ``read_committed`` consumer
reading both) in transactions of each ``--sizes`` for ``--seconds`` each, twice, and
prints the broker's CPU (% of one core, from /proc) for each.

    .venv/bin/python benchmarks/transaction_cost.py [--rate 1000] [--sizes 5,20,100]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from delayline.dev.testing import TEST_BOOTSTRAP_ENV, session_broker

TOPICS = ("deliveries", "tombstones")


def cpu_s(pid: int) -> float:
    """CPU seconds (user and system) of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_pid(data_dir: str) -> int:
    """The process of the broker whose files are in ``data_dir``."""
    found = subprocess.check_output(["pgrep", "-f", f"kafka.Kafka.*{data_dir}"]).split()
    if len(found) != 1:
        raise SystemExit(f"not one broker in {data_dir}: {found}")
    return int(found[0])


def read(bootstrap: str, stop: threading.Event) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "auto.offset.reset": "latest",
         "isolation.level": "read_committed"}
    )  # fmt: skip
    consumer.subscribe(list(TOPICS))
    while not stop.is_set():
        consumer.consume(1000, 0.1)
    consumer.close()


def phase(producer: Producer, pid: int, size: int, rate: int, seconds: int) -> tuple[float, float]:
    """Write ``rate`` deliveries a second in transactions of ``size`` for ``seconds``:
    (broker CPU % of a core, transactions a second)."""
    count = rate * seconds // size
    cpu, began = cpu_s(pid), time.time()
    for k in range(count):
        ahead = began + k * size / rate - time.time()
        if ahead > 0:
            time.sleep(ahead)
        producer.begin_transaction()
        for i in range(size):
            producer.produce(TOPICS[0], b"x" * 100, b"k%d" % i, headers=[("h", b"v")])
            producer.produce(TOPICS[1], None, b"k%d" % i)
        producer.commit_transaction(30)
    took = time.time() - began
    return (cpu_s(pid) - cpu) / took * 100, count / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=int, default=1_000, help="deliveries a second")
    parser.add_argument("--sizes", default="5,20,100", help="transaction sizes, comma-separated")
    parser.add_argument("--seconds", type=int, default=15, help="seconds per size")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if os.environ.get(TEST_BOOTSTRAP_ENV):
        raise SystemExit(f"unset {TEST_BOOTSTRAP_ENV}: this measures a private broker")
    with tempfile.TemporaryDirectory() as tmp, session_broker(Path(tmp), acls=False) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
            future.result()
        pid = broker_pid(tmp)
        stop = threading.Event()
        reader = threading.Thread(target=read, args=(bootstrap, stop))
        reader.start()
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cost"})
        producer.init_transactions(30)
        try:
            phase(producer, pid, sizes[0], args.rate, 30)  # the broker's JIT warms up
            for size in sizes * 2:
                pct, per_s = phase(producer, pid, size, args.rate, args.seconds)
                print(f"transactions of {size:>4}: {per_s:6.1f} a second, "
                      f"broker {pct:5.1f}% of a core", flush=True)  # fmt: skip
        finally:
            stop.set()
            reader.join()


if __name__ == "__main__":
    main()
