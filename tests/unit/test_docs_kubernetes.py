"""The Kubernetes recipe (``examples/kubernetes/delayline.yaml``) is one an operator can
apply: every object is valid against the Kubernetes API's schema (the schemas ship with
``kubernetes-validate``: no cluster, no network), the container's arguments are flags
``delayline`` takes, its probes ask paths the metrics server serves on the port it
listens on, and the Kafka client properties reach it as a Secret's file only."""

from __future__ import annotations

import argparse
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped, unused-ignore]
import pytest
import yaml  # type: ignore[import-untyped, unused-ignore]

from delayline.cli import build_parser
from delayline.pipeline.metrics import PipelineMetrics
from delayline.pipeline.metrics_server import MetricsServer, Readiness
from tests.readme import REPO

RECIPE = REPO / "examples" / "kubernetes" / "delayline.yaml"
METRICS_PORT = 9464
"""The pipeline's metrics port in every example (tests/unit/test_docs_cli.py)."""
OLDEST, LATEST = kubernetes_validate.utils.all_versions()[0], kubernetes_validate.latest_version()


def objects() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(RECIPE.read_text()) if doc is not None]


def the(kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects() if o["kind"] == kind]
    return found


def container() -> dict[str, Any]:
    (only,) = the("StatefulSet")["spec"]["template"]["spec"]["containers"]
    assert isinstance(only, dict)
    return only


@pytest.fixture
def args(monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """The container's command line as ``delayline`` parses it (no DELAYLINE_* variables
    of this machine's in the way: the flags' defaults read them)."""
    for name in [n for n in os.environ if n.startswith("DELAYLINE_")]:
        monkeypatch.delenv(name)
    for env in container().get("env", []):
        monkeypatch.setenv(env["name"], env["value"])
    assert container()["command"] == ["delayline"]
    return build_parser().parse_args([str(a) for a in container()["args"]])


@pytest.mark.parametrize("version", sorted({OLDEST, LATEST}))
@pytest.mark.parametrize("index", range(len(objects())))
def test_each_object_is_valid_against_the_kubernetes_schema(index: int, version: str) -> None:
    kubernetes_validate.validate(objects()[index], version, strict=True)


def test_the_schema_check_can_fail() -> None:
    broken = the("StatefulSet")
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, LATEST, strict=True)


def test_one_pod_runs_the_pipeline_in_local_mode(args: argparse.Namespace) -> None:
    statefulset = the("StatefulSet")
    assert statefulset["spec"]["replicas"] == 1
    assert args.command == "run"
    assert args.master.startswith("local["), "one pod: Spark in local mode"
    requests = container()["resources"]["requests"]
    assert args.master == f"local[{requests['cpu']}]", "as many Spark threads as cores asked"


def mounts() -> dict[str, PurePosixPath]:
    return {m["name"]: PurePosixPath(m["mountPath"]) for m in container()["volumeMounts"]}


def test_the_checkpoint_is_on_the_pods_own_volume(args: argparse.Namespace) -> None:
    (claim,) = the("StatefulSet")["spec"]["volumeClaimTemplates"]
    assert PurePosixPath(args.checkpoint_dir).is_relative_to(mounts()[claim["metadata"]["name"]])


def test_the_kafka_client_properties_are_a_secrets_file_only(args: argparse.Namespace) -> None:
    volumes = the("StatefulSet")["spec"]["template"]["spec"]["volumes"]
    secrets = [v["name"] for v in volumes if "secret" in v]
    assert any(PurePosixPath(args.kafka_config).is_relative_to(mounts()[s]) for s in secrets)
    for env in container().get("env", []):
        assert "valueFrom" not in env, f"{env['name']}: a Secret's value in the environment"
    for word in ("sasl.", "ssl.", "password", "jaas", "secret"):
        for arg in container()["args"]:
            assert word not in str(arg).lower(), f"{arg!r} in argv: ps and logs show it"


def test_the_metrics_server_listens_where_the_probes_and_scrapes_ask(
    args: argparse.Namespace,
) -> None:
    assert args.metrics_host == "0.0.0.0", "127.0.0.1 is out of the kubelet's reach"
    assert args.metrics_port == METRICS_PORT
    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    assert ports["metrics"] == METRICS_PORT
    (service_port,) = the("Service")["spec"]["ports"]
    assert service_port["port"] == METRICS_PORT
    assert service_port["targetPort"] == "metrics"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container()[probe]["httpGet"]["port"] == "metrics", probe


@pytest.fixture
def metrics_url() -> Iterator[str]:
    """The pipeline's metrics server, on a free port of this host, with a Kafka that
    answers."""
    server = MetricsServer(PipelineMetrics(), "127.0.0.1", 0, Readiness(lambda: None))
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def test_the_probes_ask_paths_the_metrics_server_serves(metrics_url: str) -> None:
    asked = {container()[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe")}
    assert asked == {"/healthz", "/readyz"}
    assert container()["startupProbe"]["httpGet"]["path"] == "/healthz"
    for path in asked:
        assert status(metrics_url + path) in (200, 503), f"{path}: not served"
    assert status(metrics_url + "/no-such-probe") == 404, "the check itself tells 404"


def test_the_deployment_guide_points_to_the_recipe() -> None:
    guide = (REPO / "docs" / "deployment.md").read_text()
    assert "(../examples/kubernetes/delayline.yaml)" in guide
    assert Path(RECIPE).is_file()
