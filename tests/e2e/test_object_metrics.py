"""Issue 16, item 5: per-object metrics read from the operator's real exposition (what its
``--metrics-port`` endpoint writes, connectops.metrics_server.exposition, of the in-process
operator) after it acted on real objects, and every metric the chart's alerts use is one the
operator exports."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from connectops.metrics_server import exposition
from tests.e2e.conftest import K8s, connect_cluster_spec, wait_for
from tests.e2e.test_offset_reset_e2e import make_source, reset
from tests.env.servers import ConnectWorker
from tests.helm.test_alerts import alert_metric_names


def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(b"".join(exposition()).decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(metric: str, **labels: str) -> float | None:
    return samples().get((metric, tuple(sorted(labels.items()))))


def test_connector_and_reset_gauges(k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    name, _ = make_source(k8s, tmp_path, "main", connect)
    me = {"namespace": k8s.ns, "name": name}
    wait_for(lambda: value("connectops_connector_ready", **me) == 1.0, 30, "ready gauge")
    assert value("connectops_connector_desired_state", **me, state="running") == 1.0
    assert value("connectops_connector_desired_state", **me, state="paused") == 0.0
    assert value("connectops_connector_state", **me, state="RUNNING") == 1.0
    assert value("connectops_connector_tasks", **me, state="running") == 1.0
    assert value("connectops_connector_tasks", **me, state="failed") == 0.0
    assert (value("connectops_connector_last_reconcile_timestamp_seconds", **me) or 0) > 0

    k8s.patch_spec("connectors", name, {"state": "paused"})
    wait_for(lambda: value("connectops_connector_state", **me, state="PAUSED") == 1.0, 60, "paused gauge")
    assert value("connectops_connector_desired_state", **me, state="paused") == 1.0
    assert value("connectops_connector_state", **me, state="RUNNING") == 0.0

    reset(k8s, "r", {"connectorRef": {"name": name}, "action": "reset"})
    wait_for(
        lambda: value("connectops_offset_reset_phase", namespace=k8s.ns, name="r", phase="Succeeded") == 1.0,
        30,
        "reset phase gauge (the reset's resync observes its final status)",
    )
    assert (value("connectops_offset_reset_duration_seconds", namespace=k8s.ns, name="r") or 0) > 0

    # deleted objects leave no series behind
    k8s.delete("offsetresets", "r")
    k8s.delete("connectors", name)
    wait_for(lambda: not k8s.exists("connectors", name), 60, "connector deleted")
    # each object's series go when its own delete handler has run, in whatever order the two ran
    wait_for(lambda: not k8s.exists("offsetresets", "r"), 60, "reset deleted")
    left = [
        key for key in samples() if dict(key[1]).get("namespace") == k8s.ns and dict(key[1]).get("name") in (name, "r")
    ]
    assert not left, left


def test_alerts_use_only_exported_metrics(k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    name, _ = make_source(k8s, tmp_path, "main", connect)
    reset(k8s, "r", {"connectorRef": {"name": name}, "action": "reset"})
    wait_for(lambda: value("connectops_offset_reset_phase", namespace=k8s.ns, name="r", phase="Succeeded"), 30, "r")
    families = {f.name for f in text_string_to_metric_families(b"".join(exposition()).decode())}
    names = {s[0] for s in samples()} | families | {f + "_total" for f in families}
    missing = sorted(alert_metric_names() - names)
    assert not missing, f"alerts use metrics the operator does not export: {missing}"
