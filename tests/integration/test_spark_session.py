"""The Spark session delayline builds: its local file system, its JVM's start-up errors."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from delayline.pipeline.session import FS_CHECKPOINT_MANAGER, NO_FORK_LOCAL_FS


def test_local_files_are_written_by_the_no_fork_file_system(spark: Any, tmp_path: Path) -> None:
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    assert fs.getClass().getName() == NO_FORK_LOCAL_FS
    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass") == FS_CHECKPOINT_MANAGER

    permission = jvm.org.apache.hadoop.fs.permission.FsPermission
    directory = tmp_path / "d"
    assert fs.mkdirs(jvm.org.apache.hadoop.fs.Path(str(directory)), permission(0o750))
    written = jvm.org.apache.hadoop.fs.Path(str(directory / "f"))
    out = fs.create(written, True)
    out.write(b"abc")
    out.close()
    fs.setPermission(written, permission(0o604))

    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o750
    assert stat.S_IMODE(os.stat(directory / "f").st_mode) == 0o604
    assert (directory / "f").read_bytes() == b"abc"
    # No checksum side file: overwriting one would be two renames, not one.
    assert not (directory / ".f.crc").exists()


def test_a_jvm_that_dies_at_start_says_why(tmp_path: Path) -> None:
    code = (
        "from pathlib import Path\n"
        "from delayline.pipeline.config import PipelineConfig\n"
        "from delayline.pipeline.session import build_session\n"
        f"build_session(PipelineConfig(checkpoint_dir=Path({str(tmp_path)!r}),"
        " java_options='-Xss10'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode != 0
    # The JVM's own words, not only py4j's "gateway exited".
    assert "Could not create the Java Virtual Machine" in result.stderr


def test_the_kafka_sources_secrets_are_redacted_in_plans_and_settings(spark: Any) -> None:
    """``--kafka-config`` reaches Spark's Kafka source as options: a query plan (which
    Spark logs and shows in errors) and the session's settings hide the JAAS password and
    inline keys."""
    secret = "pa55-w0rd-in-jaas"
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="delayline" password="{secret}";'
    )
    frame = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9")
        .option("subscribe", "t")
        .option("kafka.sasl.jaas.config", jaas)
        .option("kafka.ssl.keystore.key", f"-----BEGIN PRIVATE KEY----- {secret}")
        .option("kafka.ssl.truststore.password", secret)
        .load()
    )
    plan = frame._jdf.queryExecution().toString()
    assert "kafka.sasl.jaas.config" in plan, plan[:2000]  # the options are in the plan
    assert secret not in plan, plan[:2000]
