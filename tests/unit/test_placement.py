"""Where Spark runs: local masters, cluster masters, and checkpoints a cluster can share."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from delayline.cli.jars import submit_args
from delayline.contract.topics import target_not_allowed
from delayline.contract.topology import Topology
from delayline.core.mounts import Mount, mount_of, read_mounts
from delayline.errors import ConfigError, SparkClusterError
from delayline.pipeline.config import PipelineConfig, spark_conf_from
from delayline.pipeline.placement import (
    check_checkpoint,
    check_master,
    executor_settings,
    is_cluster_master,
    is_local_master,
)

MOUNTS = [
    Mount(Path("/"), "overlay"),
    Mount(Path("/tmp"), "tmpfs"),
    Mount(Path("/mnt/shared"), "nfs4"),
    Mount(Path("/mnt/shared/local-cache"), "ext4"),
    Mount(Path("/mnt/bucket"), "fuse.s3fs"),
]


@pytest.mark.parametrize(
    ("master", "local", "cluster"),
    [
        ("local[2]", True, False),
        ("local", True, False),
        ("local-cluster[2,1,1024]", True, True),
        ("spark://127.0.0.1:7077", True, True),
        ("spark://localhost:7077,127.0.0.1:7078", True, True),
        ("spark://10.0.0.5:7077", False, True),
        ("spark://127.0.0.1:7077,spark-2:7077", False, True),
        ("k8s://https://kube:6443", False, True),
        ("yarn", False, True),
    ],
)
def test_local_and_cluster_masters(master: str, local: bool, cluster: bool) -> None:
    assert is_local_master(master) is local
    assert is_cluster_master(master) is cluster


def test_the_deepest_mount_holds_a_path() -> None:
    assert mount_of(Path("/mnt/shared/cp"), MOUNTS) == Mount(Path("/mnt/shared"), "nfs4")
    assert mount_of(Path("/mnt/shared/local-cache/cp"), MOUNTS) == MOUNTS[3]
    assert mount_of(Path("/mnt/sharedx/cp"), MOUNTS) == MOUNTS[0]  # not under /mnt/shared
    assert mount_of(Path("/tmp"), MOUNTS) == MOUNTS[1]


def test_any_checkpoint_path_serves_a_master_on_this_machine() -> None:
    for master in ("local[2]", "spark://127.0.0.1:7077"):
        check_checkpoint(master, Path("relative/cp"), MOUNTS)
        check_checkpoint(master, Path("/tmp/cp"), MOUNTS)


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("relative/cp", "is relative"),
        ("/tmp/cp", "/tmp (tmpfs)"),
        ("/var/lib/delayline/cp", "/ (overlay)"),
        ("/mnt/shared/local-cache/cp", "(ext4)"),
    ],
)
def test_a_remote_master_refuses_a_checkpoint_of_this_machine_only(path: str, named: str) -> None:
    with pytest.raises(ConfigError, match="shared file system") as refused:
        check_checkpoint("spark://10.0.0.5:7077", Path(path), MOUNTS)
    assert named in str(refused.value)


def test_a_remote_master_takes_a_checkpoint_on_a_shared_file_system() -> None:
    check_checkpoint("spark://10.0.0.5:7077", Path("/mnt/shared/delayline/cp"), MOUNTS)
    check_checkpoint("k8s://https://kube:6443", Path("/mnt/bucket/cp"), MOUNTS)


def test_mounts_are_read_with_escaped_spaces(tmp_path: Path) -> None:
    table = tmp_path / "mounts"
    table.write_text("overlay / overlay rw 0 0\nserver:/x /mnt/my\\040share nfs4 rw 0 0\nbroken\n")
    assert read_mounts(table) == [Mount(Path("/"), "overlay"), Mount(Path("/mnt/my share"), "nfs4")]
    assert read_mounts(tmp_path / "absent") == []


def test_executors_get_memory_jit_and_rolled_logs_only_on_a_cluster() -> None:
    assert executor_settings("local[2]", 1024, "-XX:TieredStopAtLevel=1") == {}
    settings = executor_settings("spark://127.0.0.1:7077", 1536, "-XX:TieredStopAtLevel=1")
    assert settings["spark.executor.memory"] == "1536m"
    assert settings["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    assert settings["spark.executor.logs.rolling.strategy"] == "size"
    assert "spark.executor.extraJavaOptions" not in executor_settings("yarn", 1024, "")


def test_a_master_url_nobody_answers_fails_fast_with_the_way_out() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        check_master(f"spark://127.0.0.1:{port}")  # answers
        check_master(f"spark://127.0.0.1:1,127.0.0.1:{port}")  # one of an HA pair answers
    with pytest.raises(SparkClusterError, match="delayline cluster start") as refused:
        check_master(f"spark://127.0.0.1:{port}")  # closed now
    assert f"127.0.0.1:{port}" in str(refused.value)
    check_master("local[2]")  # nothing to reach


def test_spark_conf_pairs_from_flags_or_the_environment() -> None:
    flags = ["spark.archives=env.tar.gz#env", "spark.pyspark.python=./env/bin/python"]
    assert spark_conf_from(flags, "spark.x=1") == (
        ("spark.archives", "env.tar.gz#env"),
        ("spark.pyspark.python", "./env/bin/python"),
    )
    assert spark_conf_from(None, "spark.a=1, spark.b = x=y") == (
        ("spark.a", "1"),
        ("spark.b", "x=y"),
    )
    assert spark_conf_from(None, "") == ()
    for bad in ("spark.a", "=1"):
        with pytest.raises(ConfigError, match="KEY=VALUE"):
            spark_conf_from([bad], "")


def test_spark_conf_cannot_change_what_delayline_sets_by_its_own_flags() -> None:
    PipelineConfig(spark_conf=(("spark.executor.cores", "1"),))
    with pytest.raises(ConfigError, match="--shuffle-partitions"):
        PipelineConfig(spark_conf=(("spark.sql.shuffle.partitions", "8"),))
    with pytest.raises(ConfigError, match="--master"):
        PipelineConfig(spark_conf=(("spark.master", "local[4]"),))


def test_spark_submit_gets_every_jar_and_the_hold_on_both_class_paths() -> None:
    connector = [Path("/c/kafka-clients.jar"), Path("/c/spark-sql-kafka.jar")]
    hold = Path("/c/delayline-hold.jar")
    flags = submit_args(connector, hold).split()
    assert flags[flags.index("--jars") + 1].split(",") == [*map(str, connector), str(hold)]
    assert flags[flags.index("--driver-class-path") + 1] == str(hold)
    assert f"spark.executor.extraClassPath={hold}" in flags


def test_the_allowed_target_pattern_must_be_a_regular_expression() -> None:
    assert Topology(allowed_target_topics=r"orders\..*").allowed_target_topics == r"orders\..*"
    with pytest.raises(ConfigError, match="--allowed-target-topics '\\(' is not a regular"):
        Topology(allowed_target_topics="(")
    assert target_not_allowed("anything", None) is None
    assert target_not_allowed("orders.eu", r"orders\..*") is None
    assert "does not match" in (target_not_allowed("orders", r"orders\..*") or "")
