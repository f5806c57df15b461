"""Claims are complete before the first Connector acts, also when the operator starts.

The operator no longer uses kopf's indexes (connectops.indexes: they held every listed object's
worker until all were indexed). What that gate gave, that no Connector acts before it can see
every other object naming the same connector, now comes from the LIST of claims the operator
makes before kopf watches anything. Here a second tenant's younger Connector names a connector
the first tenant's older one owns, both made while no operator watched them; the operator then
starts on a namespace pattern (its LIST covers what kopf will watch). The younger object must
say NameConflict and never write, read from Connect's own config topic.

kopf starts the two namespaces' watchers together, so which object it handles first is not
forced (forcing it with a slow owner's namespace, 30 Connectors listed before it under a worker
limit of 1, starved the owner instead: a retrying object holds its kopf worker through its
backoff; see CONNECTOPS_KOPF_WORKERS). What ties the outcome to the LIST is read from the
operator's log: the claims of both objects were read before the first line about either.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from tests.e2e.conftest import ConnectREST, K8s, OperatorProcess, connect_cluster_spec, count_config_writes, wait_for
from tests.env.servers import ConnectWorker, KubeAPI

pytestmark = pytest.mark.e2e

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def _spec(tmp_path: Path, connector: str, topic: str) -> dict[str, Any]:
    src = tmp_path / f"{topic}.txt"
    src.write_text("one\n")
    return {
        "clusterRef": {"name": "main"},
        "connectorName": connector,
        "class": SOURCE,
        "config": {"file": str(src), "topic": topic},
    }


def test_a_younger_claim_in_another_namespace_never_writes_after_a_start(
    kube: KubeAPI, kube_client: Any, crds: None, connect: ConnectWorker, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    core = kubernetes.client.CoreV1Api(kube_client)
    # "a" sorts first: the younger object's namespace
    attacker, victim = (K8s(kube_client, f"own-{suffix}-{t}") for t in ("a", "b"))
    for k8s in (attacker, victim):
        core.create_namespace(kubernetes.client.V1Namespace(metadata={"name": k8s.ns}))
        k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    connector = f"owned-{suffix}"
    victim.create("connectors", "payments", _spec(tmp_path, connector, "victim-topic"), "Connector")
    time.sleep(1.1)  # creation times are whole seconds: the younger one is made in a later second
    attacker.create("connectors", "grab", _spec(tmp_path, connector, "attacker-topic"), "Connector")

    rest = ConnectREST(connect)
    operator = OperatorProcess(kube, f"own-{suffix}-*", tmp_path)
    try:
        operator.start()
        victim.wait_condition("connectors", "payments", "Ready", "True", timeout=120)
        conflict = attacker.wait_condition("connectors", "grab", "Ready", "False", reason="NameConflict", timeout=120)
        assert victim.ns not in conflict["message"]
        assert rest.config(connector)["topic"] == "victim-topic"
        assert count_config_writes(connect, connector) == 1  # the owner's create, and nothing else
        log = operator.log()
        seeded = log.find("claims of 2 Connectors read before watching")
        assert seeded >= 0, operator.log_tail()
        first = min(i for i in (log.find(f"[{attacker.ns}/grab]"), log.find(f"[{victim.ns}/payments]")) if i >= 0)
        assert seeded < first, log[: first + 500]
        # their finalizers are this operator's: deleted while it runs
        for k8s, name in ((attacker, "grab"), (victim, "payments")):
            k8s.delete("connectors", name)
        for k8s, name in ((attacker, "grab"), (victim, "payments")):
            wait_for(lambda k=k8s, n=name: not k.exists("connectors", n), 120, f"{name} deleted")
    finally:
        operator.stop()
    assert not rest.exists(connector)  # the owner's deletion removed it
