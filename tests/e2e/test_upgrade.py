"""A rolling upgrade of a running deployment: a pipeline and a `delayline committer` of
the previous release, each run from that release's own checkout (``git archive`` of its
tagged commit), with schedules pending in the hold and some handed over (in flight),
are stopped and replaced by this release in the documented order (the committer, then
the pipeline, on the same checkpoint): every schedule is delivered once and none early,
for a ``read_committed`` and a ``read_uncommitted`` reader alike."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from delayline.client import ClientConfig, Scheduler
from delayline.core.clock import ms_to_datetime
from delayline.dev.harness import DeliveryCollector, PipelineProcess
from delayline.dev.testing import create_topic, unique_topic
from delayline.pipeline.checkpoint_format import FORMAT_FILE
from tests.counts import check_exactly_once
from tests.support import ARTIFACTS, Topics, committer_args, make_topics, pipeline_args

ROOT = Path(__file__).resolve().parents[2]
PREVIOUS_RELEASE = "v0.1.0"
PREVIOUS_COMMIT = "82c1c620b0daadfe7326389a0037b9709227b445"
"""The commit ``v0.1.0`` tags: named here too, so a clone without tags still finds it."""
IN_FLIGHT = 150
IN_FLIGHT_DUE_MS = 15_000
"""The in-flight ones are due 15-16 s after they are written: handed over (5 s lead)
before the old pipeline stops, due while it is replaced."""
PENDING = 150
"""Due 45-46 s after they are written: held by the old pipeline's state when it stops."""
EARLY = 50
"""Due 8 s after they are written: delivered by the old release."""


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's source tree, extracted from this repository's history."""
    archived = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", PREVIOUS_COMMIT],
        capture_output=True,
        check=False,
    )
    if archived.returncode != 0:
        pytest.fail(
            f"the previous release {PREVIOUS_RELEASE} ({PREVIOUS_COMMIT}) is not in this "
            f"clone ({archived.stderr.decode().strip()}): clone with its history, not shallow"
        )
    root = tmp_path_factory.mktemp("previous-release")
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
        tar.extractall(root, filter="data")
    return root


def _old_env(release: Path) -> dict[str, str]:
    """Run ``python -m delayline`` from ``release``'s sources (they come first on the path,
    before this checkout's editable install)."""
    return {"PYTHONPATH": str(release / "src")}


def test_the_previous_release_is_what_runs(previous_release: Path) -> None:
    env = _old_env(previous_release)
    shown = subprocess.run(
        [sys.executable, "-c", "import delayline, sys; print(delayline.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    assert shown.stdout.strip().startswith(str(previous_release)), shown.stdout
    assert not (previous_release / "src" / "delayline" / "contract" / "formats.py").exists()


@pytest.mark.long  # about two minutes: `make test-long`
def test_a_rolling_upgrade_delivers_every_schedule_once_and_none_early(
    kafka_bootstrap: str, tmp_path: Path, previous_release: Path
) -> None:
    topics = make_topics(kafka_bootstrap)
    target = create_topic(kafka_bootstrap, unique_topic("upgraded"), partitions=2)
    query = f"upg{int(time.time() * 1000)}"
    checkpoint = tmp_path / "checkpoint"
    args = pipeline_args(topics, checkpoint, "--query-name", query, "--inflight-partitions", "2")
    log = ARTIFACTS / f"upgrade-{query}.log"
    second_log = ARTIFACTS / f"upgrade-{query}-second.log"
    old_env = _old_env(previous_release)
    with (
        PipelineProcess(kafka_bootstrap, args, log) as pipeline,
        PipelineProcess(
            kafka_bootstrap,
            committer_args(topics, query, "second", "--inflight-partitions", "2"),
            second_log,
            "committer",
        ) as second,
        DeliveryCollector(kafka_bootstrap, [target]) as committed,
        DeliveryCollector(kafka_bootstrap, [target], read_committed=False) as uncommitted,
    ):
        pipeline.start(env=old_env)
        pipeline.wait_ready()
        second.start(env=old_env)
        second.wait_ready(60, "committer second ready")

        start_ms = int(time.time() * 1000)
        due = _write(kafka_bootstrap, topics, target, start_ms)
        handed = _handed_until(pipeline, EARLY + IN_FLIGHT, start_ms + IN_FLIGHT_DUE_MS - 500)
        assert handed >= EARLY + IN_FLIGHT, f"only {handed} handed over before the upgrade"

        # The documented order: the committers, then the pipeline (same checkpoint).
        assert second.terminate() == 0, second.tail()
        second.start()
        second.wait_ready(60, "committer second ready")
        assert pipeline.terminate() == 0, pipeline.tail()
        pipeline.start()
        pipeline.wait_ready()
        stored = json.loads((checkpoint / FORMAT_FILE).read_text())
        assert stored["format"] == 1  # the old checkpoint, recorded as such

        everything = len(due)
        deliveries = committed.wait_for(lambda seen: len(seen) >= everything, 90)
        time.sleep(2)  # anything delivered twice would show by now
        check_exactly_once(committed.snapshot(), due)
        seen = uncommitted.wait_for(lambda got: len(got) >= everything, 30)
        early = [d.schedule_id for d in seen if d.arrival_ms < due[d.schedule_id or ""]]
        assert early == [], f"a read_uncommitted reader saw {len(early)} early"
        assert {d.schedule_id for d in seen} == set(due)
        assert pipeline.terminate() == 0, pipeline.tail()
        assert second.terminate() == 0, second.tail()
        print(f"\nupgraded with {handed} handed over: {len(deliveries)} delivered once")


def _write(bootstrap: str, topics: Topics, target: str, start_ms: int) -> dict[str, int]:
    config = ClientConfig(bootstrap_servers=bootstrap, schedules_topic=topics.schedules)
    due: dict[str, int] = {}
    batches = (
        ("early", EARLY, 8_000),
        ("inflight", IN_FLIGHT, IN_FLIGHT_DUE_MS),
        ("pending", PENDING, 45_000),
    )
    with Scheduler(config) as client:
        for prefix, count, ahead_ms in batches:
            for i in range(count):
                sid = f"{prefix}-{i}"
                due[sid] = start_ms + ahead_ms + i * 1_000 // count
                client.schedule(sid, sid.encode(), target, at=ms_to_datetime(due[sid]))
    return due


def _handed_until(pipeline: PipelineProcess, count: int, deadline_ms: int) -> int:
    """Schedules the pipeline handed over, once ``count`` or at ``deadline_ms``."""
    while True:
        log = pipeline.log_since_start()
        handed = sum(map(int, re.findall(r"handed to the committer (\d+)", log)))
        if handed >= count or time.time() * 1000 >= deadline_ms:
            return handed
        time.sleep(0.1)
