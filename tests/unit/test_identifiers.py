"""The formats of the identifiers exactly-once relies on. A change here changes what a
restarted pipeline fences and which commit markers a replay finds: an upgrade across it
would deliver twice. Change a format only with a migration."""

from __future__ import annotations

import json
from pathlib import Path

from delayline.core import identifiers as ids
from delayline.pipeline.config import PipelineConfig


def test_the_formats_are_pinned() -> None:
    txn = ids.transactional_id("orders")
    assert txn == "delayline-orders"
    assert ids.partition_transactional_id(txn, 3) == "delayline-orders-p3"
    assert ids.committer_group(txn) == "delayline-orders-committer"
    assert ids.committer_transactional_id(txn, 3, 1) == "delayline-orders-committer-p3-1"
    assert ids.committer_instance_id(txn, "host-a") == "delayline-orders-committer-host-a"
    assert ids.committer_name(txn, ids.committer_instance_id(txn, "host-a")) == "host-a"
    run = ids.run_id("orders", "5f0c")
    assert run == "orders@5f0c"
    assert ids.partition_marker_key(run, 1) == "orders@5f0c/p1"
    assert ids.lease_group("orders") == "delayline-orders-lease"
    assert ids.redis_txn_claim(txn) == "txn:delayline-orders"
    assert ids.inflight_topic("orders") == "orders-inflight"
    assert ids.wake_topic("orders") == "orders-wake"
    assert ids.notice_topic("orders") == "orders-notice"


def test_the_pipeline_config_uses_them() -> None:
    config = PipelineConfig(query_name="orders")
    assert config.transactional_id == ids.transactional_id("orders")
    assert config.inflight_topic_name == ids.inflight_topic("orders")
    assert config.wake_topic_name == ids.wake_topic("orders")


def test_the_run_comes_from_the_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text(json.dumps({"id": "a1b2"}) + "\n")
    assert ids.checkpoint_query_id(tmp_path) == "a1b2"
