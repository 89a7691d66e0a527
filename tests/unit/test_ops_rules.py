"""The alert rules and the dashboard name only metrics delayline exports, every alert is
unit-tested by promtool, and every runbook link leads to a section of the docs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from prometheus_client import CollectorRegistry

from delayline.api.metrics import ApiMetrics
from delayline.api.retry_watch import GroupRetries
from delayline.catalog import FollowStatus, SqliteCatalog
from delayline.committer.config import CommitterStatus
from delayline.pipeline.metrics import PipelineMetrics
from delayline.pipeline.wake import WakerStats
from tests.unit.test_docs_links import anchors

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "ops" / "prometheus" / "rules.yml"
RULE_TESTS = ROOT / "ops" / "prometheus" / "rules.test.yml"
DASHBOARD = ROOT / "ops" / "grafana" / "delayline.json"

# PromQL words that are not metric names (aggregations are followed by "(" and skipped).
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on"})
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def metric_names(expr: str) -> set[str]:
    """The metric (or recording rule) names a PromQL expression selects."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # range selectors
    expr = _GROUPING.sub(" ", expr)
    names = set()
    for found in re.finditer(r"(?<![\w.:])[A-Za-z_:][A-Za-z0-9_:]*", expr):
        if expr[found.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation
        if found.group() not in _KEYWORDS:
            names.add(found.group())
    return names


def test_names_are_read_from_expressions() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket{job="x", le!="1"}[5m])))'
        " > 1e6 and on (topic) b:c:d or max without (committer) (e) unless bool f offset 5m"
    )
    assert metric_names(expr) == {"a_bucket", "b:c:d", "e", "f"}


class _Follower:
    def status(self) -> FollowStatus:
        return FollowStatus(caught_up=True, lag={"s": 1})


class _Retries:
    def snapshot(self) -> list[GroupRetries]:
        return []


def _families(registry: CollectorRegistry) -> Iterator[Any]:
    yield from registry.collect()


def exported(tmp_path: Path) -> set[str]:
    """Every sample name a pipeline, a committer and the API can export."""
    pipeline = PipelineMetrics()
    status = CommitterStatus("pipeline", (0,), 0, 0)
    pipeline.watch_committer(lambda: status, dict, ("q-inflight", lambda: 1))
    pipeline.watch_waker(lambda: WakerStats(0, 1500, 0))
    pipeline.watch_readiness(list)
    pipeline.watch_input_lag(lambda parts: {})
    api = ApiMetrics(
        SqliteCatalog(tmp_path / "catalog.db"),
        cast(Any, _Follower()),
        retries=cast(Any, _Retries()),
    )
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    names = {"up"}
    for registry in (pipeline.registry, api.registry):
        for family in _families(registry):
            names.update(family.name + s for s in suffixes.get(family.type, ("",)))
    return names


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def test_every_rule_and_panel_names_a_metric_that_exists(tmp_path: Path) -> None:
    known = exported(tmp_path) | {rule["record"] for rule in _rules() if "record" in rule}
    queries = [rule["expr"] for rule in _rules()] + _dashboard_exprs()
    missing = {name for expr in queries for name in metric_names(expr)} - known
    assert not missing, f"queries name metrics nothing exports: {sorted(missing)}"
    assert len(queries) > 30


def test_every_alert_has_a_promtool_test_that_fires_it() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    alerts = {rule["alert"] for rule in _rules() if "alert" in rule}
    assert alerts - fired == set(), "alerts no promtool test fires"


def test_every_alert_has_a_runbook_section_in_the_operations_docs() -> None:
    sections = anchors((ROOT / "docs" / "operations.md").read_text())
    for rule in _rules():
        if "alert" in rule:
            runbook = rule["annotations"]["runbook"]
            page, _, anchor = runbook.partition("#")
            assert page == "docs/operations.md", rule["alert"]
            assert anchor in sections, (rule["alert"], runbook)


def test_promtool_passes_the_rules_tests() -> None:
    """The same as ``make lint`` runs: a rule change that breaks its tests fails here too."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: run `make system` (infra/system-packages.sh)")
    done = subprocess.run(
        [promtool, "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
