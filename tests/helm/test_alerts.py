"""The chart's PrometheusRule, run by Prometheus's own rule engine: ``promtool check rules`` and
``promtool test rules`` (Debian's prometheus package, installed by scripts/setup.sh) on the rules
exactly as the chart renders them, with input series shaped like the operator's exposition
(tests/e2e/test_object_metrics.py checks those names against a running operator)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helm.chart import by_kind, render

PROMTOOL = shutil.which("promtool")
VALUES = {"metrics": {"prometheusRule": {"enabled": True, "for": "10m", "resetStuckSeconds": 1800}}}


def rules() -> dict[str, Any]:
    [rule] = by_kind(render(VALUES), "PrometheusRule")
    return {"groups": rule["spec"]["groups"]}


def alert_metric_names() -> set[str]:
    names: set[str] = set()
    for group in rules()["groups"]:
        for rule in group["rules"]:
            names |= set(re.findall(r"\b(connectops_[a-z_]+)", rule["expr"]))
    return names


def series(metric: str, values: str, **labels: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{inner}}}", "values": values}


def description(alert: str) -> str:
    [rule] = [r for g in rules()["groups"] for r in g["rules"] if r.get("alert") == alert]
    text: str = rule["annotations"]["description"]
    return text


def fired(alert: str, at: str, summary: str = "", **labels: str) -> dict[str, Any]:
    """``alert`` firing at ``at`` with exactly these labels and this summary; none without labels."""
    expected = []
    if labels:
        annotations = {"summary": summary, "description": description(alert)}
        expected = [{"exp_labels": labels, "exp_annotations": annotations}]
    return {"eval_time": at, "alertname": alert, "exp_alerts": expected}


A = {"namespace": "team-a"}
#: the labels a ServiceMonitor's scrape gives the operator's own series (job: the metrics Service)
T = {"job": "connectops-metrics", "namespace": "connectops"}
TESTS: list[dict[str, Any]] = [
    {
        "interval": "1m",
        "input_series": [
            # orders: a task failed for 30 minutes; payments: one failed for 5 minutes, then recovered
            series("connectops_connector_tasks", "0 1x30", **A, name="orders", state="failed"),
            series("connectops_connector_tasks", "1x5 0x30", **A, name="payments", state="failed"),
        ],
        "alert_rule_test": [
            fired("ConnectopsConnectorTasksFailed", "5m"),
            fired(
                "ConnectopsConnectorTasksFailed",
                "15m",
                "Connector team-a/orders has 1 failed task(s)",
                severity="warning",
                state="failed",
                **A,
                name="orders",
            ),
        ],
    },
    {
        "interval": "1m",
        "input_series": [
            # orders should run and is not Ready; paused is not Ready on purpose
            series("connectops_connector_ready", "0x30", **A, name="orders"),
            series("connectops_connector_desired_state", "1x30", **A, name="orders", state="running"),
            series("connectops_connector_ready", "0x30", **A, name="paused"),
            series("connectops_connector_desired_state", "0x30", **A, name="paused", state="running"),
        ],
        "alert_rule_test": [
            fired("ConnectopsConnectorNotReady", "5m"),
            fired(
                "ConnectopsConnectorNotReady",
                "15m",
                "Connector team-a/orders should run but is not Ready",
                severity="warning",
                **A,
                name="orders",
            ),
        ],
    },
    {
        "interval": "1m",
        "input_series": [
            series("connectops_offset_reset_phase", "0 0 1x10", **A, name="r1", phase="Failed"),
            series("connectops_offset_reset_phase", "0x12", **A, name="r2", phase="Failed"),
        ],
        "alert_rule_test": [
            fired("ConnectopsOffsetResetFailed", "1m"),
            fired(
                "ConnectopsOffsetResetFailed",
                "3m",
                "OffsetReset team-a/r1 failed",
                severity="critical",
                phase="Failed",
                **A,
                name="r1",
            ),
        ],
    },
    {
        "interval": "1m",
        "input_series": [
            # running, one minute older each minute: past 1800 s after 31 minutes
            series("connectops_offset_reset_phase", "1x60", **A, name="slow", phase="Running"),
            series("connectops_offset_reset_duration_seconds", "0+60x60", **A, name="slow"),
            # finished: its duration stays above the threshold, but it is not running
            series("connectops_offset_reset_phase", "0x60", **A, name="done", phase="Running"),
            series("connectops_offset_reset_duration_seconds", "4000x60", **A, name="done"),
        ],
        "alert_rule_test": [
            fired("ConnectopsOffsetResetStuck", "20m"),
            fired(
                "ConnectopsOffsetResetStuck",
                "35m",
                "OffsetReset team-a/slow has been running for over 1800 s",
                severity="warning",
                phase="Running",
                **A,
                name="slow",
            ),
        ],
    },
    {
        "interval": "1m",
        "input_series": [
            series("connectops_connector_check_verdict", "1x30", **A, name="orders", verdict="UNHEALTHY"),
            series("connectops_connector_check_verdict", "0x30", **A, name="other", verdict="UNHEALTHY"),
        ],
        "alert_rule_test": [
            fired("ConnectopsLagVerdictFailing", "5m"),
            fired(
                "ConnectopsLagVerdictFailing",
                "15m",
                "Connector team-a/orders: the latest lag check says UNHEALTHY",
                severity="warning",
                verdict="UNHEALTHY",
                **A,
                name="orders",
            ),
        ],
    },
    {
        "interval": "1m",
        "input_series": [
            series("connectops_reconcile_errors_total", "0+1x30", kind="Connector", error="ConnectUnavailable"),
            series("connectops_reconcile_errors_total", "3x30", kind="OffsetReset", error="KubeUnavailable"),
        ],
        "alert_rule_test": [
            fired("ConnectopsReconcileErrors", "5m"),
            fired(
                "ConnectopsReconcileErrors",
                "20m",
                "connectops keeps failing to reconcile Connector objects (ConnectUnavailable)",
                severity="warning",
                kind="Connector",
                error="ConnectUnavailable",
            ),
        ],
    },
    {
        "interval": "1m",
        # both replicas up for 10 minutes, then neither (stale series end: `stale` in promtool)
        "input_series": [
            series("up", "1x10 stale", **T, pod="a"),
            series("up", "1x10 0x30", **T, pod="b"),
        ],
        "alert_rule_test": [
            fired("ConnectopsOperatorDown", "20m"),
            fired(
                "ConnectopsOperatorDown",
                "30m",
                "No connectops operator has been up in connectops for 15m",
                # absent() of a comparison keeps no labels of its selector
                severity="critical",
            ),
        ],
    },
    {
        "interval": "1m",
        # reconciles every minute for 20 minutes, then none while the Connector's gauge stays
        "input_series": [
            series("connectops_reconciles_total", "0+1x20 20x40", **T, kind="Connector", trigger="resync"),
            series("connectops_connector_ready", "1x60", job=T["job"], **A, name="orders"),
        ],
        "alert_rule_test": [
            fired("ConnectopsReconcilesStale", "30m"),
            fired(
                "ConnectopsReconcilesStale",
                "55m",
                "connectops has reconciled nothing for 15m while Connectors exist",
                severity="critical",
            ),
        ],
    },
    {
        "interval": "1m",
        # limit 768Mi (the chart's default), 85 %: 684.5 MB. pod a passes it at 9m (fires 10m on),
        # b stays under
        "input_series": [
            series("process_resident_memory_bytes", "600000000+10000000x30", **T, pod="a"),
            series("process_resident_memory_bytes", "300000000x30", **T, pod="b"),
        ],
        "alert_rule_test": [
            fired("ConnectopsOperatorMemoryNearLimit", "15m"),
            fired(
                "ConnectopsOperatorMemoryNearLimit",
                "25m",
                "connectops pod a uses 810.6MiB, over 85% of its memory limit",
                severity="warning",
                pod="a",
            ),
        ],
    },
]


def test_every_alert_has_a_promtool_case() -> None:
    alerts = {r["alert"] for g in rules()["groups"] for r in g["rules"]}
    tested = {case["alertname"] for t in TESTS for case in t["alert_rule_test"]}
    assert alerts == tested


def test_rules_pass_promtool(tmp_path: Path) -> None:
    assert PROMTOOL, "promtool is installed by scripts/setup.sh (Debian's prometheus package)"
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump(rules()))
    check = subprocess.run([PROMTOOL, "check", "rules", str(rules_file)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    tests_file = tmp_path / "tests.yaml"
    tests_file.write_text(
        yaml.safe_dump({"rule_files": [rules_file.name], "evaluation_interval": "1m", "tests": TESTS}, sort_keys=False)
    )
    result = subprocess.run(
        [PROMTOOL, "test", "rules", str(tests_file)], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_rules_follow_their_values() -> None:
    [rule] = by_kind(
        render({"metrics": {"prometheusRule": {"enabled": True, "for": "3m", "resetStuckSeconds": 600}}}),
        "PrometheusRule",
    )
    text = yaml.safe_dump(rule)
    assert "> 600" in text
    assert "for: 3m" in text
    assert not by_kind(render({}), "PrometheusRule")
    assert not by_kind(render({}), "ServiceMonitor")


def test_process_metrics_the_alerts_use_are_exported() -> None:
    """The memory alert reads prometheus_client's process collector, which the operator's
    metrics endpoint serves from the same registry (connectops.metrics_server.exposition)."""
    from prometheus_client.parser import text_string_to_metric_families

    from connectops.metrics_server import exposition

    used = {n for g in rules()["groups"] for r in g["rules"] for n in re.findall(r"\b(process_[a-z_]+)", r["expr"])}
    assert used == {"process_resident_memory_bytes"}
    exported = {s.name for f in text_string_to_metric_families(b"".join(exposition()).decode()) for s in f.samples}
    assert used <= exported
