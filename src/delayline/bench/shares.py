"""The committers' group in a bench run: which in-flight partitions each committer
owns, and each one's share of the deliveries, their lateness and its CPU."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from confluent_kafka.admin import AdminClient

from delayline.committer.config import RUN_COMMITTER_NAME
from delayline.core.identifiers import committer_group, committer_name, transactional_id
from delayline.core.stats import summary
from delayline.fire.inflight import inflight_partition
from delayline.kafka.groups import group_members

if TYPE_CHECKING:
    from delayline.bench.run import BenchEnv
    from delayline.dev.harness import Delivery


def committers_owning(
    bootstrap: str, txn: str, admin: AdminClient | None = None
) -> dict[str, list[int]]:
    """Each member of the committers' group of the pipeline ``txn`` (by its ``--name``)
    to the in-flight partitions the group gave it (asked with ``admin`` when given)."""
    return {
        committer_name(txn, m.instance_id): [p for _, p in m.partitions]
        for m in group_members(bootstrap, committer_group(txn), 10, admin)
    }


def committer_shares(
    env: BenchEnv, deliveries: list[Delivery], due: dict[str, int], load: tuple[float, float]
) -> dict[str, Any]:
    """Each committer's partitions, deliveries, their lateness and (for those started
    apart from the pipeline) its CPU over ``load``, by name."""
    txn = transactional_id(f"bench-{env.run}")
    owner: dict[int, str] = {}
    shares: dict[str, Any] = {}
    for name, partitions in committers_owning(env.bootstrap, txn).items():
        shares[name] = {"partitions": partitions}
        owner.update((p, name) for p in partitions)
    late: dict[str, list[int]] = {name: [] for name in shares}
    for d in deliveries:
        sid = d.schedule_id or ""
        if sid in due:
            name = owner.get(inflight_partition(sid, env.inflight_partitions), "?")
            late.setdefault(name, []).append(d.arrival_ms - due[sid])
    for name, lateness in late.items():
        share = shares.setdefault(name, {"partitions": []})
        share["delivered"] = len(lateness)
        share["lateness_ms"] = summary(lateness)
    for process, sampler in env.committers:
        name = process.args[process.args.index("--name") + 1]
        if name in shares:
            cpu = sampler.cpu_percent(*load)
            shares[name]["cpu_load_pct"] = None if cpu is None else round(cpu, 1)
    if RUN_COMMITTER_NAME in shares:
        shares[RUN_COMMITTER_NAME]["cpu_load_pct"] = "in the pipeline's"
    return shares
