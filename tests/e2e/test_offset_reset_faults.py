"""Resets through a fault-injecting proxy in front of the real Connect worker: 409s, 5xx,
timeouts and dropped connections either get retried to success or end in a clear failure."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, topic_record_count, wait_for
from tests.e2e.test_offset_reset_e2e import LINES, backup_doc, make_source, reset
from tests.env.faultproxy import FaultProxy, FaultRule
from tests.env.servers import ConnectWorker

OFFSETS = r"^/connectors/[^/]+/offsets$"


@pytest.fixture
def proxy(connect: ConnectWorker) -> Iterator[FaultProxy]:
    with FaultProxy(connect.url) as p:
        yield p


@pytest.fixture
def proxied_cluster(k8s: K8s, connect: ConnectWorker, proxy: FaultProxy) -> str:
    spec = connect_cluster_spec(connect)
    spec["restUrl"] = proxy.url
    spec["requestTimeoutSeconds"] = 3
    k8s.create("connectclusters", "proxied", spec, "ConnectCluster")
    k8s.wait_condition("connectclusters", "proxied", "Ready", "True")
    return "proxied"


def test_transient_faults_are_retried_to_success(
    k8s: K8s, proxied_cluster: str, proxy: FaultProxy, connect: ConnectWorker, tmp_path: Path
) -> None:
    name, topic = make_source(k8s, tmp_path, proxied_cluster, connect)
    rules = [
        proxy.add_rule(FaultRule.stale_config(method="PUT", path=r"/stop$", times=2)),
        proxy.add_rule(FaultRule.status(500, method="DELETE", path=OFFSETS, times=1)),
        # the DELETE reached Connect, the answer was lost: the retry must be harmless
        proxy.add_rule(FaultRule("drop", method="DELETE", path=OFFSETS, times=1, after_upstream=True)),
        proxy.add_rule(FaultRule("timeout", method="GET", path=r"/status$", seconds=6, times=1)),
        proxy.add_rule(FaultRule.status(503, method="PUT", path=r"/resume$", times=1)),
    ]
    status = reset(k8s, "faulty", {"connectorRef": {"name": name}, "action": "reset"}, timeout=240)
    assert [r.fired for r in rules] == [2, 1, 1, 1, 1]
    steps = {s["name"]: s for s in status["steps"]}
    assert steps["reset"]["attempts"] >= 3  # 500, then the lost answer, then success
    assert steps["resume"]["attempts"] >= 2
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == 2 * len(LINES), 60, "re-read once")
    assert ConnectREST(connect).state(name) == "RUNNING"


def test_persistent_refusal_ends_failed_and_resumes(
    k8s: K8s, proxied_cluster: str, proxy: FaultProxy, connect: ConnectWorker, tmp_path: Path
) -> None:
    """Connect refuses the only offsets call (a 4xx: it checked the request and did nothing):
    nothing changed, so the connector is resumed."""
    name, topic = make_source(k8s, tmp_path, proxied_cluster, connect)
    rule = proxy.add_rule(FaultRule.status(400, "injected: offsets refused", method="DELETE", path=OFFSETS))
    status = reset(k8s, "refused", {"connectorRef": {"name": name}, "action": "reset"}, phase="Failed", timeout=300)
    assert rule.fired >= 1
    cond = next(c for c in status["conditions"] if c["type"] == "Succeeded")
    assert cond["status"] == "False"
    assert cond["reason"] == "ResetFailed"
    assert "offsets refused" in cond["message"]
    assert "resumed" in cond["message"]
    assert [c["state"] for c in status["changes"]] == ["Refused"]
    wait_for(lambda: ConnectREST(connect).state(name) == "RUNNING", 60, "connector resumed")
    assert topic_record_count(connect.bootstrap, topic) == len(LINES)
    # kopf posts Events after the status patch, from its own queue: wait for it, briefly
    wait_for(
        lambda: any(e.reason == "ResetFailed" and e.type == "Warning" for e in k8s.events("refused")),
        15,
        "Event ResetFailed",
    )


def test_persistent_server_error_that_changed_nothing_resumes_the_connector(
    k8s: K8s, proxied_cluster: str, proxy: FaultProxy, connect: ConnectWorker, tmp_path: Path
) -> None:
    """Every DELETE answered 500 before it reached Connect: retried (a 5xx may pass), then the
    offsets are read back from Connect and Kafka, found as backed up, and the connector resumed."""
    rest = ConnectREST(connect)
    name, topic = make_source(k8s, tmp_path, proxied_cluster, connect)
    rule = proxy.add_rule(FaultRule.status(500, "injected: offsets store unavailable", method="DELETE", path=OFFSETS))
    status = reset(k8s, "unchanged", {"connectorRef": {"name": name}, "action": "reset"}, phase="Failed", timeout=300)
    assert rule.fired >= 3
    cond = next(c for c in status["conditions"] if c["type"] == "Succeeded")
    assert cond["reason"] == "ResetFailed"
    assert "offsets store unavailable" in cond["message"]
    assert (
        "Nothing was changed: the offsets read back from Connect and Kafka after the failure equal the backup"
        in (cond["message"])
    )
    assert {c["state"] for c in status["changes"]} == {"Started"}  # no answer said what happened
    assert "restoreManifest" not in status
    # the truth: the offsets are the backup's, and the connector runs on from them
    saved = backup_doc(k8s, status["backup"]["configMap"])["connectors"][name]["offsets"]
    assert rest.http.get(rest.path(name) + "/offsets").json()["offsets"] == saved
    wait_for(lambda: rest.state(name) == "RUNNING", 60, "connector resumed")
    time.sleep(3)
    assert topic_record_count(connect.bootstrap, topic) == len(LINES)  # nothing read again


def test_persistent_server_error_keeps_the_connector_stopped_until_restored(
    k8s: K8s, proxied_cluster: str, proxy: FaultProxy, connect: ConnectWorker, tmp_path: Path
) -> None:
    """A 5xx that came after the DELETE reached Connect (it cleared the offsets, the answer says
    500): the offsets read back differ from the backup, so the connector stays stopped and
    locked, and the restore it names brings it back."""
    import yaml

    rest = ConnectREST(connect)
    name, topic = make_source(k8s, tmp_path, proxied_cluster, connect)
    before = rest.http.get(rest.path(name) + "/offsets").json()["offsets"]
    rule = proxy.add_rule(
        FaultRule.status(500, "injected: offsets store unavailable", method="DELETE", path=OFFSETS, after_upstream=True)
    )
    status = reset(k8s, "doomed", {"connectorRef": {"name": name}, "action": "reset"}, phase="Failed", timeout=300)
    assert rule.fired >= 3
    cond = next(c for c in status["conditions"] if c["type"] == "Succeeded")
    assert cond["reason"] == "ResetFailed"
    assert "offsets store unavailable" in cond["message"]
    assert status["backup"]["configMap"] in cond["message"]
    assert "stay STOPPED and locked because their offsets read back differ from the backup" in cond["message"]
    assert rest.http.get(rest.path(name) + "/offsets").json()["offsets"] == []  # the DELETE did land
    assert {c["state"] for c in status["changes"]} == {"Started"}
    wait_for(
        lambda: any(e.reason == "ResetFailed" and e.type == "Warning" for e in k8s.events("doomed")),
        15,
        "Event ResetFailed",
    )
    assert rest.state(name) == "STOPPED"
    k8s.wait_condition("connectors", name, "Synced", "False", reason="OffsetResetInProgress")
    time.sleep(4)  # a resync of its Connector must not resume it either
    assert rest.state(name) == "STOPPED"
    assert topic_record_count(connect.bootstrap, topic) == len(LINES)

    proxy.remove_rule(rule)
    manifest = yaml.safe_load(status["restoreManifest"])
    k8s.custom.create_namespaced_custom_object("connectops.io", "v1alpha1", k8s.ns, "offsetresets", manifest)
    restore = manifest["metadata"]["name"]
    wait_for(
        lambda: (k8s.get("offsetresets", restore).get("status") or {}).get("phase") == "Succeeded", 120, "restored"
    )
    assert rest.http.get(rest.path(name) + "/offsets").json()["offsets"] == before
    wait_for(lambda: rest.state(name) == "RUNNING", 60, "connector running")
    time.sleep(3)
    assert topic_record_count(connect.bootstrap, topic) == len(LINES)  # back at the end: nothing re-read


def test_failed_resume_is_retried_until_the_connector_runs(
    k8s: K8s, proxied_cluster: str, proxy: FaultProxy, connect: ConnectWorker, tmp_path: Path
) -> None:
    name, topic = make_source(k8s, tmp_path, proxied_cluster, connect)
    rule = proxy.add_rule(FaultRule.status(503, "injected: worker draining", method="PUT", path=r"/resume$"))
    status = reset(k8s, "stuck", {"connectorRef": {"name": name}, "action": "reset"}, phase="Failed", timeout=300)
    assert status["pendingResume"] is True
    cond = next(c for c in status["conditions"] if c["type"] == "Succeeded")
    # the offsets were reset before resume failed: the message must not say otherwise
    assert "WERE changed" in cond["message"], cond
    assert "Resuming failed too" in cond["message"]
    assert ConnectREST(connect).state(name) == "STOPPED"
    # the operator keeps trying (kopf retries the failed resume), and the Lease is released
    fired = rule.fired
    wait_for(lambda: rule.fired > fired, 30, "resume retried")
    proxy.remove_rule(rule)
    final = wait_for(
        lambda: (s := k8s.get("offsetresets", "stuck")["status"]).get("pendingResume") is None and s,
        60,
        "pendingResume cleared",
    )
    assert final["phase"] == "Failed"
    cond = next(c for c in final["conditions"] if c["type"] == "Succeeded")
    assert "resumed afterwards" in cond["message"]
    wait_for(lambda: ConnectREST(connect).state(name) == "RUNNING", 60, "connector running")
    wait_for(lambda: topic_record_count(connect.bootstrap, topic) == 2 * len(LINES), 60, "re-read once")
    wait_for(lambda: any(e.reason == "Resumed" for e in k8s.events("stuck")), 15, "Event Resumed")
