"""Where the pipeline's Spark runs: local mode or a cluster, and what a cluster needs.

On a Spark cluster the executors run the hold's state operators and the fire tasks;
the driver (the ``delayline run`` process) plans batches, runs the committer and the
waker. Every executor must see the checkpoint directory at the path the driver gives:
on one machine any local path does; across machines only a shared file system (NFS,
a FUSE mount of object storage...) mounted at the same path on every node.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from delayline.core.mounts import Mount, mount_of
from delayline.errors import ConfigError, SparkClusterError
from delayline.infra.ports import accepts

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
SHARED_FS_TYPES = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "glusterfs", "ceph", "cephfs", "lustre",
        "gpfs", "beegfs", "afs", "9p", "virtiofs", "ocfs2", "gfs2", "efs",
    }
)  # fmt: skip
"""File systems that one machine's mount can share with another's (``fuse.*`` too: s3fs,
gcsfuse, sshfs...)."""


def is_local_master(master: str) -> bool:
    """Whether every executor of ``master`` runs on this machine: ``local``,
    ``local[N]``, ``local-cluster[...]``, or a standalone master whose every host is a
    loopback address (``spark://127.0.0.1:7077``, as ``delayline cluster`` starts)."""
    if master == "local" or master.startswith(("local[", "local-cluster[")):
        return True
    if not master.startswith("spark://"):
        return False  # YARN, Kubernetes, Mesos: executors elsewhere
    hosts = [urlsplit(f"spark://{part}").hostname or "" for part in master[8:].split(",")]
    return all(host in LOOPBACK_HOSTS for host in hosts)


def is_cluster_master(master: str) -> bool:
    """Whether executors are processes of their own (any master but local mode)."""
    return not (master == "local" or master.startswith("local["))


def is_shared_fs(fs_type: str) -> bool:
    """Whether a file system of this type can be mounted by several machines."""
    return fs_type in SHARED_FS_TYPES or fs_type.startswith("fuse.")


def check_checkpoint(master: str, checkpoint_dir: Path, mounts: Iterable[Mount]) -> None:
    """Refuse a checkpoint directory that a remote executor cannot see.

    With executors on other machines, the checkpoint directory must be a shared file
    system mounted at the same absolute path everywhere. A relative path, or one on a
    file system of this machine's own disks (ext4, xfs, tmpfs, overlay...), would give
    each executor a state store of its own: the state of a partition moved to another
    executor would be missing, and schedules lost. A local master (including a
    standalone cluster on loopback) accepts any path.

    Raises:
        ConfigError: the path cannot be shared with ``master``'s executors.
    """
    if is_local_master(master):
        return
    if not checkpoint_dir.is_absolute():
        raise ConfigError(
            f"--checkpoint-dir {checkpoint_dir} is relative, and the executors of {master} "
            "run elsewhere: give the absolute path of a shared file system (NFS, a FUSE "
            "mount of object storage) mounted at the same path on every node"
        )
    mount = mount_of(checkpoint_dir, mounts)
    if mount is not None and not is_shared_fs(mount.fs_type):
        raise ConfigError(
            f"--checkpoint-dir {checkpoint_dir} is on {mount.point} ({mount.fs_type}), a "
            f"file system of this machine only, and the executors of {master} run "
            "elsewhere: each would keep state of its own and schedules would be lost. Use "
            "a shared file system (NFS, a FUSE mount of object storage) mounted at the "
            "same path on every node; see docs/deployment.md"
        )
    log.info(
        "checkpoint %s is on %s (%s): every node must mount it at this path",
        checkpoint_dir,
        mount.point if mount else "an unknown mount",
        mount.fs_type if mount else "unknown type",
    )


def executor_settings(master: str, executor_memory_mb: int, java_options: str) -> dict[str, str]:
    """Spark settings of the executors of a cluster ``master`` (none in local mode,
    where the driver's JVM runs the tasks).

    The executors get the driver's JIT setting (see
    :attr:`~delayline.pipeline.config.PipelineConfig.java_options`), and logs that roll
    over at 10 MiB, five kept: a worker keeps an executor's stderr for the executor's
    whole life, which for a pipeline is months.
    """
    if not is_cluster_master(master):
        return {}
    settings = {
        "spark.executor.memory": f"{executor_memory_mb}m",
        "spark.executor.logs.rolling.strategy": "size",
        "spark.executor.logs.rolling.maxSize": str(10 * 1024 * 1024),
        "spark.executor.logs.rolling.maxRetainedFiles": "5",
    }
    if java_options:
        settings["spark.executor.extraJavaOptions"] = java_options
    return settings


def check_master(master: str, timeout_s: float = 2.0) -> None:
    """Fail fast when no master of a ``spark://`` URL answers (Spark itself retries for
    a minute and more before it gives up); other masters are not checked.

    Raises:
        SparkClusterError: no host of the URL accepts a connection.
    """
    if not master.startswith("spark://"):
        return
    tried = []
    for part in master[len("spark://") :].split(","):
        url = urlsplit(f"spark://{part}")
        host, port = url.hostname or "", url.port or 7077
        tried.append(f"{host}:{port}")
        if accepts(host, port, timeout_s):
            return
    raise SparkClusterError(
        f"no Spark master answers at {', '.join(tried)} ({master}): start one with "
        "`delayline cluster start`, or check --master"
    )
