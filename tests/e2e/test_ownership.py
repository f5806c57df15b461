"""One owner per real connector (issue 13, finding 3): Connector objects that name the same
connector on the same worker, through an alias ConnectCluster in one namespace or through
another namespace's own, never take turns overwriting it. The oldest owns it; the others say
NameConflict once, write nothing, never delete it, and take over when the owner is gone."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import ConnectREST, K8s, connect_cluster_spec, count_config_writes, wait_for
from tests.env.servers import ConnectWorker

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def _spec(tmp_path: Path, cluster: str, connector: str, topic: str) -> dict[str, Any]:
    src = tmp_path / f"{topic}.txt"
    src.write_text("one\n")
    return {
        "clusterRef": {"name": cluster},
        "connectorName": connector,
        "class": SOURCE,
        "config": {"file": str(src), "topic": topic},
    }


@pytest.fixture
def other_ns(k8s: K8s, kube_client: Any) -> Iterator[K8s]:
    """A second tenant's namespace on the same API server and operator."""
    ns = f"{k8s.ns}-b"
    core = kubernetes.client.CoreV1Api(kube_client)
    core.create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
    other = K8s(kube_client, ns)
    yield other
    for item in other.custom.list_namespaced_custom_object("connectops.io", "v1alpha1", ns, "connectors")["items"]:
        with contextlib.suppress(ApiException):
            other.delete("connectors", item["metadata"]["name"])
    wait_for(
        lambda: not other.custom.list_namespaced_custom_object("connectops.io", "v1alpha1", ns, "connectors")["items"],
        60,
        "the second namespace's Connectors gone",
    )


def _no_alternation(worker: ConnectWorker, connector: str, topic: str, seconds: float) -> None:
    """Several resync periods (3 s here) pass and Connect's config is written by nobody."""
    rest = ConnectREST(worker)
    writes = count_config_writes(worker, connector)
    time.sleep(seconds)
    assert rest.config(connector)["topic"] == topic
    assert count_config_writes(worker, connector) == writes


def test_an_alias_cluster_in_the_same_namespace(k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.create("connectclusters", "alias", connect_cluster_spec(connect), "ConnectCluster")
    connector = f"shared-{uuid.uuid4().hex[:6]}"
    k8s.create("connectors", "first", _spec(tmp_path, "main", connector, "from-first"), "Connector")
    k8s.wait_condition("connectors", "first", "Ready", "True")
    k8s.create("connectors", "second", _spec(tmp_path, "alias", connector, "from-second"), "Connector")
    conflict = k8s.wait_condition("connectors", "second", "Ready", "False", reason="NameConflict")
    assert "Connector first (older)" in conflict["message"]
    _no_alternation(connect, connector, "from-first", 12)
    warnings = [e for e in k8s.events("second") if e.reason == "NameConflict"]
    assert len(warnings) == 1, [e.message for e in warnings]
    assert warnings[0].type == "Warning"
    # the owner stays Ready and Synced
    assert k8s.condition("connectors", "first", "Ready")["status"] == "True"  # type: ignore[index]
    # deleting the non-owner leaves the connector in place
    k8s.delete("connectors", "second")
    wait_for(lambda: not k8s.exists("connectors", "second"), 120, "second deleted")
    rest = ConnectREST(connect)
    assert rest.exists(connector)
    assert rest.config(connector)["topic"] == "from-first"


def test_another_namespace_cannot_take_a_connector_over(
    k8s: K8s, other_ns: K8s, connect: ConnectWorker, tmp_path: Path
) -> None:
    rest = ConnectREST(connect)
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    other_ns.create("connectclusters", "theirs", connect_cluster_spec(connect), "ConnectCluster")
    connector = f"payments-{uuid.uuid4().hex[:6]}"
    k8s.create("connectors", "payments", _spec(tmp_path, "main", connector, "victim-topic"), "Connector")
    k8s.wait_condition("connectors", "payments", "Ready", "True")
    other_ns.create("connectors", "grab", _spec(tmp_path, "theirs", connector, "attacker-topic"), "Connector")
    conflict = other_ns.wait_condition("connectors", "grab", "Ready", "False", reason="NameConflict")
    # the victim's namespace and object name are not disclosed to the other tenant
    assert "another namespace" in conflict["message"]
    assert k8s.ns not in conflict["message"]
    assert "payments" not in conflict["message"].replace(connector, "")
    _no_alternation(connect, connector, "victim-topic", 12)
    # the attacker deleting its object does not delete the victim's connector
    other_ns.delete("connectors", "grab")
    # under a loaded CI run a deletion has taken over 60 s (as in test_verbs)
    wait_for(lambda: not other_ns.exists("connectors", "grab"), 120, "grab deleted")
    assert rest.exists(connector)
    assert rest.config(connector)["topic"] == "victim-topic"
    # a non-owner takes over once the owner is gone (the owner's deletion removes the connector)
    other_ns.create("connectors", "later", _spec(tmp_path, "theirs", connector, "later-topic"), "Connector")
    other_ns.wait_condition("connectors", "later", "Ready", "False", reason="NameConflict")
    k8s.delete("connectors", "payments")
    other_ns.wait_condition("connectors", "later", "Ready", "True", timeout=90)
    wait_for(lambda: rest.exists(connector) and rest.config(connector)["topic"] == "later-topic", 60, "taken over")


def test_another_namespace_cannot_reset_a_managed_connector(
    k8s: K8s, other_ns: K8s, connect: ConnectWorker, tmp_path: Path
) -> None:
    """A reset by name from a second namespace, through its own ConnectCluster for the same
    worker, is refused before anything is locked or stopped; Connect's and the broker's offsets
    of the connector are what they were, and it keeps running."""
    from connectops.adapters.kafka import KafkaOffsets
    from tests.e2e.test_offset_reset_e2e import make_source, offsets

    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "main", "Ready", "True")
    name, _ = make_source(k8s, tmp_path, "main", connect)
    rest = ConnectREST(connect)
    before_rest = offsets(rest, name)
    kafka = KafkaOffsets(connect.bootstrap)
    before_records = len(kafka.read_connector_offsets(connect.offset_topic, {name}))
    other_ns.create("connectclusters", "theirs", connect_cluster_spec(connect), "ConnectCluster")
    other_ns.create(
        "offsetresets",
        "steal",
        {"connectorName": name, "clusterRef": {"name": "theirs"}, "action": "reset"},
        "OffsetReset",
    )
    refused = other_ns.wait_condition("offsetresets", "steal", "Succeeded", "False", reason="ManagedElsewhere")
    assert "another namespace" in refused["message"]
    status = other_ns.get("offsetresets", "steal")["status"]
    assert status["phase"] == "Failed"
    assert not status.get("changes")
    assert not status.get("backup")
    assert rest.state(name) == "RUNNING"
    assert offsets(rest, name) == before_rest
    assert len(kafka.read_connector_offsets(connect.offset_topic, {name})) == before_records
    # the owner's own namespace still can
    from tests.e2e.test_offset_reset_e2e import reset

    reset(k8s, "own", {"connectorRef": {"name": name}, "action": "reset"})


def test_a_reset_through_an_alias_takes_the_same_lock(k8s: K8s, connect: ConnectWorker, tmp_path: Path) -> None:
    """Two resets of one connector, one through the ConnectCluster its Connector uses and one
    through an alias of it (named by clusterRef + connectorName), started together: the lock is
    per Kafka cluster and connector, so exactly one runs and the other fails at its lock step
    without changing anything."""
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    k8s.create("connectclusters", "alias", connect_cluster_spec(connect), "ConnectCluster")
    k8s.wait_condition("connectclusters", "alias", "Ready", "True")
    connector = f"locked-{uuid.uuid4().hex[:6]}"
    k8s.create("connectors", "owner", _spec(tmp_path, "main", connector, f"t-{connector}"), "Connector")
    k8s.wait_condition("connectors", "owner", "Ready", "True")
    rest = ConnectREST(connect)
    wait_for(lambda: rest.http.get(rest.path(connector) + "/offsets").json()["offsets"], 60, "offsets committed")
    k8s.create("offsetresets", "via-main", {"connectorRef": {"name": "owner"}, "action": "reset"}, "OffsetReset")
    k8s.create(
        "offsetresets",
        "via-alias",
        {"clusterRef": {"name": "alias"}, "connectorName": connector, "action": "reset"},
        "OffsetReset",
    )

    def finished() -> dict[str, dict[str, Any]] | None:
        statuses = {n: k8s.get("offsetresets", n).get("status") or {} for n in ("via-main", "via-alias")}
        done = all(s.get("phase") in ("Succeeded", "Failed") for s in statuses.values())
        return statuses if done else None

    statuses = wait_for(finished, 150, "both resets finished")
    phases = sorted(s["phase"] for s in statuses.values())
    assert phases == ["Failed", "Succeeded"], statuses
    [loser] = [s for s in statuses.values() if s["phase"] == "Failed"]
    failed = [s for s in loser["steps"] if s.get("state") == "Failed"]
    assert [s["name"] for s in failed] == ["lock"], loser["steps"]
    assert "locked by" in str(loser["conditions"])
    assert not loser.get("changes")
    assert statuses["via-main"]["lockScope"] == statuses["via-alias"]["lockScope"]
    assert statuses["via-main"]["lockScope"].startswith("kafka/")
    k8s.wait_condition("connectors", "owner", "Ready", "True", timeout=60)
    assert rest.state(connector) == "RUNNING"
