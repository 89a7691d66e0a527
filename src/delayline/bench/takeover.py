"""``delayline bench --scenario takeover``: two committers (``delayline committer``, no
pipeline), one SIGKILLed mid-run. How soon the other is given the dead one's partitions,
how soon it delivers what fell due while nobody owned them, how late what falls due
after that is (beside its own partitions in the same window), and that nothing was lost,
duplicated or early.

Hand-overs are written straight to the in-flight topic, as the ``committer`` scenario
does, at a steady rate, each due :data:`DUE_AFTER_MS` after it is written.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from confluent_kafka.admin import AdminClient

from delayline.bench.committers import all_of, committer_args, hand_over, pace, writer
from delayline.bench.run import BenchEnv, progress
from delayline.bench.shares import committers_owning
from delayline.core.identifiers import inflight_topic, transactional_id
from delayline.core.stats import summary
from delayline.dev.harness import DeliveryCollector, PipelineProcess
from delayline.errors import KafkaUnavailableError, WaitTimeoutError
from delayline.fire.inflight import inflight_partition
from delayline.kafka.config import kafka_client_config
from delayline.kafka.topics import ensure_inflight_topic

RATE_PER_S = (1_000, 300)
"""Hand-overs a second (full, ``--quick``)."""
RUN_S = 30
"""How long hand-overs are written; the kill comes :data:`KILL_AFTER_S` into it."""
KILL_AFTER_S = 8
SESSION_TIMEOUT_MS = 6_000
"""The committers' ``--session-timeout``: Kafka's least by default. The dead committer's
partitions are given to the other this long after its death, whatever delayline does."""
DUE_AFTER_MS = 2_000
"""Each hand-over is due this long after it is written (a lead's worth)."""
PARTITIONS = 4
"""In-flight partitions, unless ``--inflight-partitions`` sets more than one."""
HIDDEN_BEFORE_KILL_MS = 1_000
"""What was written this long before the kill may stay hidden until the take-over: the
killed committer's open transaction holds back ``read_committed`` readers of the target
partitions it wrote to (the survivor's deliveries there too) until it is fenced."""
SURVIVOR, VICTIM = "survivor", "victim"


class Seen(NamedTuple):
    """One delivery as the figures need it."""

    schedule_id: str
    arrival_ms: int
    timestamp_ms: int


def takeover(env: BenchEnv, quick: bool) -> dict[str, Any]:
    """Run the scenario (see the module); its figures (:func:`takeover_figures`)."""
    partitions = env.inflight_partitions if env.inflight_partitions > 1 else PARTITIONS
    env.inflight_partitions = partitions
    rate = RATE_PER_S[1 if quick else 0]
    inflight = inflight_topic(f"bench-{env.run}")
    ensure_inflight_topic(env.bootstrap, inflight, partitions)
    txn = transactional_id(f"bench-{env.run}")
    processes = {
        name: PipelineProcess(
            env.bootstrap,
            [*committer_args(env, name), "--session-timeout", f"{SESSION_TIMEOUT_MS}ms"],
            env.work_dir / f"committer-{name}.log",
            command="committer",
        )
        for name in (SURVIVOR, VICTIM)
    }
    try:
        for name, process in processes.items():
            process.start()
            process.wait_ready(60, f"committer {name} ready")
        split = _wait_split(env.bootstrap, txn, partitions)
        progress(f"takeover: {split[VICTIM]} are the victim's partitions of {partitions}")
        taken = _TakeOver(env.bootstrap, txn, partitions)
        due: dict[str, int] = {}
        with DeliveryCollector(env.bootstrap, [env.target_topic]) as collector:
            producer = writer(env.bootstrap)
            total = rate * RUN_S
            chunk = max(rate // 20, 10)
            began = time.time()
            killed_ms = 0
            for start in range(0, total, chunk):
                pace(began, start, rate)
                if not killed_ms and time.time() >= began + KILL_AFTER_S:
                    processes[VICTIM].kill()
                    killed_ms = time.time_ns() // 1_000_000
                    taken.start()
                    progress("takeover: SIGKILL of the victim committer")
                ids = [f"t-{i}" for i in range(start, min(start + chunk, total))]
                due.update(hand_over(producer, env, inflight, ids, DUE_AFTER_MS, start))
            progress(f"takeover: {total:,} handed over; waiting for every delivery")
            try:
                collector.wait_for(all_of(due), timeout_s=120)
            except WaitTimeoutError as exc:  # counted as lost below
                progress(f"takeover: not everything was delivered: {exc}")
            time.sleep(3)  # a duplicate would show up by now
            deliveries = [
                Seen(d.schedule_id, d.arrival_ms, d.timestamp_ms)
                for d in collector.snapshot()
                if d.schedule_id in due
            ]
        taken_ms = taken.join()
    finally:
        for process in processes.values():
            if process.proc is not None:  # not the one killed
                process.terminate()
    figures = takeover_figures(
        deliveries, due, split[VICTIM], partitions, killed_ms=killed_ms, taken_ms=taken_ms
    )
    figures.update(rate_per_s=rate, run_s=RUN_S, session_timeout_ms=SESSION_TIMEOUT_MS,
                   due_after_ms=DUE_AFTER_MS, partitions=partitions)  # fmt: skip
    return figures


def takeover_figures(
    deliveries: Sequence[Seen],
    due: Mapping[str, int],
    victims: Sequence[int],
    partitions: int,
    *,
    killed_ms: int,
    taken_ms: int | None,
) -> dict[str, Any]:
    """The scenario's figures from what was delivered.

    ``victims`` are the killed committer's partitions; ``taken_ms`` when the group gave
    them to the survivor (``None``: never). The backlog is what of them fell due before
    the take-over and arrived after the kill; the catch-up ends when the last of it
    arrived. Lateness is arrival minus due time, split by partition owner and window.
    """
    counts = Counter(d.schedule_id for d in deliveries)
    first = {d.schedule_id: d for d in sorted(deliveries, key=lambda d: d.arrival_ms)}
    figures: dict[str, Any] = {
        "handed_over": len(due),
        "delivered": len(counts),
        "lost": len(due.keys() - counts.keys()),
        "duplicated": sum(1 for n in counts.values() if n > 1),
        "early": sum(
            1 for d in deliveries if min(d.arrival_ms, d.timestamp_ms) < due[d.schedule_id]
        ),
        "victim_partitions": sorted(victims),
        "kill_to_takeover_ms": None if taken_ms is None else taken_ms - killed_ms,
    }
    if taken_ms is None:
        return figures

    def victim(sid: str) -> bool:
        return inflight_partition(sid, partitions) in victims

    backlog = [
        d.arrival_ms
        for sid, d in first.items()
        if victim(sid) and due[sid] < taken_ms and d.arrival_ms >= killed_ms
    ]
    caught_up_ms = max(backlog, default=taken_ms)

    def late(of_victim: bool, since_ms: int, until_ms: int | None = None) -> dict[str, Any]:
        values = [
            d.arrival_ms - due[sid]
            for sid, d in first.items()
            if victim(sid) == of_victim
            and since_ms <= due[sid]
            and (until_ms is None or due[sid] < until_ms)
        ]
        return {"count": len(values), **summary(values)}

    figures.update(
        backlog=len(backlog),
        backlog_delivered_after_takeover_ms=caught_up_ms - taken_ms,
        lateness_ms={
            "before_kill": {
                "survivor": late(False, 0, killed_ms - HIDDEN_BEFORE_KILL_MS),
                "victim": late(True, 0, killed_ms - HIDDEN_BEFORE_KILL_MS),
            },
            "after_takeover": {"survivor": late(False, taken_ms), "victim": late(True, taken_ms)},
            "after_catch_up": {
                "survivor": late(False, caught_up_ms),
                "victim": late(True, caught_up_ms),
            },
        },
    )
    return figures


def takeover_table(figures: Mapping[str, Any]) -> str:
    """The figures as text."""
    lines = [
        f"{figures['handed_over']:,} handed over at {figures.get('rate_per_s', '?')}/s to two "
        f"committers; delivered {figures['delivered']:,}, lost {figures['lost']}, duplicated "
        f"{figures['duplicated']}, early {figures['early']}",
        f"the victim's partitions {figures['victim_partitions']} given to the survivor "
        f"{figures['kill_to_takeover_ms']} ms after the SIGKILL",
    ]
    if "lateness_ms" not in figures:
        return "\n".join(lines)
    lines.append(
        f"its backlog ({figures['backlog']:,} due meanwhile) delivered "
        f"{figures['backlog_delivered_after_takeover_ms']} ms after the take-over"
    )
    lines.append("lateness ms (count, p50 / p99 / max): survivor's own | victim's")
    for window, split in figures["lateness_ms"].items():
        cells = [
            f"{s['count']:>6,} {s['p50']} / {s['p99']} / {s['max']}"
            for s in (split["survivor"], split["victim"])
        ]
        lines.append(f"  {window.replace('_', ' '):<15} {cells[0]:<28} | {cells[1]}")
    return "\n".join(lines)


class _TakeOver:
    """Watches the committers' group, from :meth:`start`, for the moment the survivor
    is given every partition."""

    def __init__(self, bootstrap: str, txn: str, partitions: int) -> None:
        self._bootstrap, self._txn, self._partitions = bootstrap, txn, partitions
        self._taken_ms: int | None = None
        self._thread = threading.Thread(target=self._run, name="takeover-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> int | None:
        """When the survivor owned every partition (``None``: not within 60 s)."""
        if self._thread.ident is not None:  # started
            self._thread.join()
        return self._taken_ms

    def _run(self) -> None:
        admin = AdminClient(kafka_client_config(self._bootstrap))  # one, asked every 50 ms
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                owned = committers_owning(self._bootstrap, self._txn, admin)
            except KafkaUnavailableError:  # asked again
                continue
            if len(owned.get(SURVIVOR, ())) == self._partitions:
                self._taken_ms = time.time_ns() // 1_000_000
                return
            time.sleep(0.05)
        progress("takeover: the survivor was not given every partition within 60 s")


def _wait_split(bootstrap: str, txn: str, partitions: int) -> dict[str, list[int]]:
    """The partitions of each committer once both own some."""
    deadline = time.monotonic() + 60
    while True:
        owned = committers_owning(bootstrap, txn)
        both = all(owned.get(name) for name in (SURVIVOR, VICTIM))
        if both and sum(len(p) for p in owned.values()) == partitions:
            return owned
        if time.monotonic() > deadline:
            raise WaitTimeoutError(f"takeover: the committers' group did not split: {owned}")
        time.sleep(0.5)
