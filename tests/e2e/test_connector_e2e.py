"""Connector lifecycle on the real API server and the real Kafka Connect worker."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import (
    ConnectREST,
    K8s,
    connect_cluster_spec,
    count_config_writes,
    wait_for,
)
from tests.env.servers import ConnectWorker

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


def source_spec(tmp_path: Path, cluster: str = "main", **extra: Any) -> dict[str, Any]:
    src = tmp_path / f"in-{uuid.uuid4().hex[:6]}.txt"
    src.write_text("one\ntwo\n")
    return {
        "clusterRef": {"name": cluster},
        "class": SOURCE,
        "tasksMax": 1,
        "config": {"file": str(src), "topic": f"t-{uuid.uuid4().hex[:6]}"},
        **extra,
    }


@pytest.fixture
def cluster(k8s: K8s, connect: ConnectWorker) -> str:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    return "main"


def test_connect_cluster_reports_version_and_capabilities(k8s: K8s, cluster: str) -> None:
    status = k8s.get("connectclusters", cluster)["status"]
    assert status["reachable"] is True
    assert status["workerVersion"].startswith("4.3")
    assert status["capabilities"] == {
        "stop": True,
        "alterOffsets": True,
        "initialState": True,
        "restartOnlyFailed": True,
        "pluginVersions": True,
    }


def test_create_update_and_no_needless_puts(
    k8s: K8s, cluster: str, tmp_path: Path, connect: ConnectWorker, connect_rest: ConnectREST
) -> None:
    name = f"src-{uuid.uuid4().hex[:6]}"
    spec = source_spec(tmp_path, producerOverrides={"lingerMs": 5})
    k8s.create("connectors", name, spec, "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True")
    assert connect_rest.state(name) == "RUNNING"
    live = connect_rest.config(name)
    assert live["producer.override.linger.ms"] == "5"
    assert live["connector.class"] == SOURCE
    status = k8s.get("connectors", name)["status"]
    assert status["connectorState"] == "RUNNING"
    assert status["tasksRunning"] == "1/1"
    assert status["observedGeneration"] == 1
    for type_ in ("Valid", "Synced", "Ready"):
        assert k8s.condition("connectors", name, type_)["status"] == "True"  # type: ignore[index]

    # several resyncs (3 s each) later, Connect has seen exactly one config write: the create
    writes = count_config_writes(connect, name)
    assert writes == 1
    # the check the create asked for waits out its batch window (QUEUED), then is followed: a
    # change of status, written once, not a needless write
    wait_for(
        lambda: (k8s.get("connectors", name)["status"].get("lastCheck") or {}).get("state") != "QUEUED",
        30,
        "the create's check out of its batch window",
    )
    version = k8s.get("connectors", name)["metadata"]["resourceVersion"]
    time.sleep(8)
    assert count_config_writes(connect, name) == 1
    # …and nothing was written to the object either (status only written on change)
    assert k8s.get("connectors", name)["metadata"]["resourceVersion"] == version
    # GitOps: spec untouched; kopf's bookkeeping annotations are under our prefix and stable
    meta = k8s.get("connectors", name)["metadata"]
    assert "connectops.io/last-handled-configuration" in meta["annotations"]
    assert all(key.startswith("connectops.io/") for key in meta["annotations"])
    assert meta["finalizers"] == ["connectops.io/finalizer"]
    stored = k8s.get("connectors", name)["spec"]
    assert {k: stored[k] for k in spec} == spec  # only the API server's schema defaults are added

    k8s.patch_spec("connectors", name, {"producerOverrides": {"lingerMs": 50, "batchSize": 32768}})
    wait_for(lambda: connect_rest.config(name).get("producer.override.linger.ms") == "50", 60, "linger.ms applied")
    assert connect_rest.config(name)["producer.override.batch.size"] == "32768"
    k8s.wait_condition("connectors", name, "Ready", "True")
    wait_for(
        lambda: k8s.get("connectors", name)["status"].get("observedGeneration") == 2,
        30,
        "observedGeneration 2",
    )
    time.sleep(6)
    assert count_config_writes(connect, name) == 2
    events = k8s.events(name)
    assert {"Created", "ConfigUpdated"} <= {e.reason for e in events}
    # the operator's name on its Events, and kopf's bookkeeping kept out of the user's status
    assert {e.source.component for e in events} == {"connectops"}
    assert {e.reporting_component for e in events} == {"connectops"}
    assert "kopf" not in k8s.get("connectors", name)["status"]


def test_desired_states(k8s: K8s, cluster: str, tmp_path: Path, connect_rest: ConnectREST) -> None:
    name = f"state-{uuid.uuid4().hex[:6]}"
    k8s.create("connectors", name, source_spec(tmp_path, state="stopped"), "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True")
    # created directly in STOPPED (initial_state, 3.7+): it never ran
    assert connect_rest.state(name) == "STOPPED"
    assert connect_rest.status(name)["tasks"] == []

    k8s.patch_spec("connectors", name, {"state": "running"})
    wait_for(lambda: connect_rest.state(name) == "RUNNING", 60, "RUNNING")
    k8s.wait_condition("connectors", name, "Ready", "True", reason="Running")

    k8s.patch_spec("connectors", name, {"state": "paused"})
    wait_for(lambda: connect_rest.state(name) == "PAUSED", 60, "PAUSED")
    k8s.wait_condition("connectors", name, "Ready", "True", reason="Paused")

    k8s.patch_spec("connectors", name, {"state": "stopped"})
    wait_for(lambda: connect_rest.state(name) == "STOPPED", 60, "STOPPED")
    k8s.wait_condition("connectors", name, "Ready", "True", reason="Stopped")

    k8s.patch_spec("connectors", name, {"state": "running"})
    wait_for(lambda: connect_rest.state(name) == "RUNNING", 60, "RUNNING again")

    # someone pauses it behind the operator's back: the resync puts it back and says so
    connect_rest.http.put(connect_rest.path(name) + "/pause").raise_for_status()
    wait_for(lambda: connect_rest.state(name) == "PAUSED", 30, "manual pause")
    wait_for(lambda: connect_rest.state(name) == "RUNNING", 30, "drift corrected")
    wait_for(lambda: "StateDriftCorrected" in {e.reason for e in k8s.events(name)}, 30, "drift event")


def test_invalid_config_is_reported_and_nothing_applied(
    k8s: K8s, cluster: str, tmp_path: Path, connect: ConnectWorker, connect_rest: ConnectREST
) -> None:
    name = f"bad-{uuid.uuid4().hex[:6]}"
    # a sink needs topics or topics.regex; Connect's validate says so
    k8s.create(
        "connectors",
        name,
        {"clusterRef": {"name": cluster}, "class": SINK, "config": {"file": str(tmp_path / "o")}},
        "Connector",
    )
    cond = k8s.wait_condition("connectors", name, "Valid", "False", reason="ConfigInvalid")
    assert "topics" in cond["message"]
    assert not connect_rest.exists(name)
    assert any(e.reason == "ConfigInvalid" and e.type == "Warning" for e in k8s.events(name))

    # an invalid change to a working connector leaves the live config untouched
    good = f"good-{uuid.uuid4().hex[:6]}"
    k8s.create("connectors", good, source_spec(tmp_path), "Connector")
    k8s.wait_condition("connectors", good, "Ready", "True")
    before = connect_rest.config(good)
    k8s.patch_spec(
        "connectors",
        good,
        {"config": {"file": before["file"], "topic": before["topic"], "batch.size": "not-a-number"}},
    )
    cond = k8s.wait_condition("connectors", good, "Valid", "False", reason="ConfigInvalid")
    assert "batch.size" in cond["message"]
    time.sleep(4)
    assert connect_rest.config(good) == before
    assert count_config_writes(connect, good) == 1


def test_spec_rules_refused_at_admission(k8s: K8s, cluster: str, tmp_path: Path) -> None:
    """A model check the CRD carries as a CEL rule: refused at create, with the model's words
    (the operator's InvalidSpec for an object stored before the rule: tests/reconcilers)."""
    name = f"owned-{uuid.uuid4().hex[:6]}"
    spec = source_spec(tmp_path)
    spec["config"]["tasks.max"] = "3"
    with pytest.raises(ApiException) as refused:
        k8s.create("connectors", name, spec, "Connector")
    assert refused.value.status == 422
    assert "config keys name, connector.class and tasks.max are set by spec fields" in str(refused.value.body)
    assert not k8s.exists("connectors", name)


def test_policy_rejected_override(k8s: K8s, tmp_path: Path, connect_factory: Any) -> None:
    strict = connect_factory("strict", override_policy="None")
    k8s.create("connectclusters", "strict", connect_cluster_spec(strict), "ConnectCluster")
    name = f"ovr-{uuid.uuid4().hex[:6]}"
    k8s.create(
        "connectors",
        name,
        source_spec(tmp_path, cluster="strict", producerOverrides={"batchSize": 1024}),
        "Connector",
    )
    cond = k8s.wait_condition("connectors", name, "Valid", "False", reason="ConfigInvalid")
    assert "producer.override.batch.size" in cond["message"]
    assert "policy" in cond["message"].lower()
    assert not ConnectREST(strict).exists(name)


def test_delete_removes_connector(k8s: K8s, cluster: str, tmp_path: Path, connect_rest: ConnectREST) -> None:
    name = f"del-{uuid.uuid4().hex[:6]}"
    k8s.create("connectors", name, source_spec(tmp_path), "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True")
    k8s.delete("connectors", name)
    wait_for(lambda: not k8s.exists("connectors", name), 60, "CR gone")
    assert not connect_rest.exists(name)


@pytest.mark.parametrize("connector_name", ["orders eu+west #1?", "ünïcødé & spaces;=[x]"])
def test_names_needing_url_encoding(
    k8s: K8s, cluster: str, tmp_path: Path, connect_rest: ConnectREST, connector_name: str
) -> None:
    name = f"enc-{uuid.uuid4().hex[:6]}"
    k8s.create("connectors", name, source_spec(tmp_path, connectorName=connector_name), "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True")
    assert connect_rest.state(connector_name) == "RUNNING"
    k8s.patch_spec("connectors", name, {"state": "paused"})
    wait_for(lambda: connect_rest.state(connector_name) == "PAUSED", 60, "PAUSED")
    k8s.delete("connectors", name)
    wait_for(lambda: not connect_rest.exists(connector_name), 60, "deleted")


def test_connect_outage_is_reported_and_recovered(k8s: K8s, tmp_path: Path, connect_factory: Any) -> None:
    worker: ConnectWorker = connect_factory("flaky")
    rest = ConnectREST(worker)
    k8s.create("connectclusters", "flaky", connect_cluster_spec(worker), "ConnectCluster")
    name = f"out-{uuid.uuid4().hex[:6]}"
    k8s.create("connectors", name, source_spec(tmp_path, cluster="flaky"), "Connector")
    k8s.wait_condition("connectors", name, "Ready", "True")

    worker.kill()
    k8s.patch_spec("connectors", name, {"producerOverrides": {"lingerMs": 77}})
    cond = k8s.wait_condition("connectors", name, "Ready", "False", reason="ConnectUnavailable")
    assert "cannot reach Connect" in cond["message"] or "did not answer" in cond["message"]
    assert any(e.reason == "ConnectUnavailable" for e in k8s.events(name))
    k8s.wait_condition("connectclusters", "flaky", "Ready", "False", reason="Unreachable")

    worker.start()
    k8s.wait_condition("connectors", name, "Ready", "True", timeout=120)
    assert rest.config(name)["producer.override.linger.ms"] == "77"
    k8s.wait_condition("connectclusters", "flaky", "Ready", "True", timeout=60)


def test_api_server_rejects_wrong_types(k8s: K8s, cluster: str) -> None:
    custom = k8s.custom
    bad_specs = [
        {"clusterRef": {"name": cluster}, "class": "X", "tasksMax": "three"},
        {"clusterRef": {"name": cluster}, "class": "X", "state": "sleeping"},
        {"clusterRef": {"name": cluster}, "class": "X", "tasksMax": 0},
        {"clusterRef": {"name": cluster}},
        {"clusterRef": {"name": cluster}, "class": "X", "producerOverrides": {"acks": "most"}},
        {"clusterRef": {"name": cluster}, "class": "X", "config": {"a": {"nested": 1}}},
    ]
    for i, spec in enumerate(bad_specs):
        body = {
            "apiVersion": "connectops.io/v1alpha1",
            "kind": "Connector",
            "metadata": {"name": f"bad-{i}"},
            "spec": spec,
        }
        with pytest.raises(ApiException) as err:
            custom.create_namespaced_custom_object("connectops.io", "v1alpha1", k8s.ns, "connectors", body)
        assert err.value.status == 422, spec


def test_unknown_fields_never_reach_the_operator(k8s: K8s, cluster: str, tmp_path: Path) -> None:
    """kube-apiserver 1.20 prunes unknown fields (structural schema); it only *rejects* them
    with server-side field validation (1.25+, ``fieldValidation=Strict``). Either way the
    operator never acts on a misspelt field: here we prove the pruning on the real server."""
    name = f"unk-{uuid.uuid4().hex[:6]}"
    spec = source_spec(tmp_path)
    spec["taskMax"] = 4  # misspelt
    k8s.create("connectors", name, spec, "Connector")
    stored = k8s.get("connectors", name)["spec"]
    assert "taskMax" not in stored
    assert stored["tasksMax"] == 1


def test_secret_values_stay_secret(
    k8s: K8s,
    cluster: str,
    tmp_path: Path,
    connect_rest: ConnectREST,
    kube_client: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    k8s.create_secret("creds", {"value": secret})
    name = f"sec-{uuid.uuid4().hex[:6]}"
    spec = source_spec(tmp_path, configFrom={"batch.size": {"secretKeyRef": {"name": "creds", "key": "value"}}})
    # batch.size must be an int: Connect rejects the secret value and echoes it in its message
    k8s.create("connectors", name, spec, "Connector")
    cond = k8s.wait_condition("connectors", name, "Valid", "False", reason="ConfigInvalid")
    assert "batch.size" in cond["message"]
    obj = k8s.get("connectors", name)
    assert secret not in str(obj)
    # kopf posts Events from a queue of its own, so the refusal's Event may follow its condition
    events = wait_for(lambda: k8s.events(name), 30, "the refusal's Event")
    assert all(secret not in (e.message or "") for e in events)
    core = kubernetes.client.CoreV1Api(kube_client)
    assert core.read_namespaced_secret("creds", k8s.ns).data  # the secret itself is intact
    # the operator runs in this process (KopfRunner): its whole log for this test is here
    assert any("kopf" in r.name for r in caplog.records)
    assert secret not in caplog.text


def test_failed_tasks_restarted_with_bounded_backoff(
    k8s: K8s, cluster: str, tmp_path: Path, connect_rest: ConnectREST
) -> None:
    name = f"fail-{uuid.uuid4().hex[:6]}"
    # a sink writing to a directory: its task fails in start(), every time it is restarted (the
    # restarts' pace, with the production resync period: test_restart_pace.py)
    spec = {
        "clusterRef": {"name": cluster},
        "class": SINK,
        "config": {"file": str(tmp_path), "topics": f"t-{uuid.uuid4().hex[:6]}"},
        "autoRestart": {"maxRestarts": 2, "backoff": {"initialSeconds": 1, "maxSeconds": 2}},
    }
    k8s.create("connectors", name, spec, "Connector")
    cond = k8s.wait_condition("connectors", name, "Ready", "False", reason="RestartLimitReached", timeout=90)
    assert "2 automatic restarts" in cond["message"]
    status = k8s.get("connectors", name)["status"]
    assert status["autoRestart"]["count"] == 2
    assert status["tasks"][0]["state"] == "FAILED"
    assert status["tasks"][0]["trace"]
    restarts = [e for e in k8s.events(name) if e.reason == "Restarted"]
    assert len(restarts) == 2, [(e.last_timestamp or e.event_time, e.message) for e in k8s.events(name)]
    time.sleep(5)  # bounded: no further restarts once the limit is reached
    assert len([e for e in k8s.events(name) if e.reason == "Restarted"]) == 2

    # fixing the config makes it healthy again and resets the restart count
    k8s.patch_spec(
        "connectors", name, {"config": {"file": str(tmp_path / "out.txt"), "topics": spec["config"]["topics"]}}
    )
    k8s.wait_condition("connectors", name, "Ready", "True", timeout=90)
    wait_for(lambda: k8s.get("connectors", name)["status"]["autoRestart"]["count"] == 0, 30, "count reset")
    assert connect_rest.state(name) == "RUNNING"


def test_a_missing_plugin_is_reported_once_not_retried(
    k8s: K8s, cluster: str, tmp_path: Path, connect_rest: ConnectREST, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 16, item 2: a class the worker does not have is a condition naming the installed
    classes (closest first) and one Warning Event; several resync periods later still one Event
    and no retry errors in the log; fixing the spec applies it."""
    name = f"typo-{uuid.uuid4().hex[:6]}"
    spec = source_spec(tmp_path)
    k8s.create("connectors", name, {**spec, "class": "FileStreamSorce"}, "Connector")
    cond = k8s.wait_condition("connectors", name, "Valid", "False", reason="PluginNotFound")
    installed = cond["message"].split("closest first: ", 1)[1]
    assert installed.startswith("org.apache.kafka.connect.file.FileStreamSourceConnector"), installed
    assert k8s.condition("connectors", name, "Ready")["reason"] == "PluginNotFound"  # type: ignore[index]
    time.sleep(12)  # four resync periods
    warnings = [e for e in k8s.events(name) if e.reason == "PluginNotFound"]
    assert len(warnings) == 1
    assert (warnings[0].count or 1) == 1
    assert warnings[0].type == "Warning"
    assert not connect_rest.exists(name)
    # kopf's object logger carries the object in the record's extras, not in the message
    retries = [r for r in caplog.records if "failed temporarily" in r.getMessage() and name in str(vars(r))]
    assert not retries, [r.getMessage() for r in retries]
    k8s.patch_spec("connectors", name, {"class": SOURCE})
    k8s.wait_condition("connectors", name, "Ready", "True")
    assert connect_rest.exists(name)
