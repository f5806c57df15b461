"""Claims recorded on the API server (connectops.reconcilers.claims): ownership of a connector
stands while the owner's Connector exists, whatever happens to its ConnectCluster, and of
claimants that race only one ever writes. Truth from Connect's own config topic (every config
record the worker wrote), its REST answers, and the Lease the API server holds."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import (
    CLAIM_NAMESPACE,
    ConnectREST,
    K8s,
    connect_cluster_spec,
    count_config_writes,
    wait_for,
)
from tests.e2e.test_ownership import _no_alternation, _spec, other_ns  # noqa: F401 (a fixture)
from tests.env.servers import ConnectWorker

#: claimants of one connector made at once, and how many times over
CLAIMANTS, ROUNDS = 3, 20


def _holders(kube_client: Any) -> dict[str, str]:
    """connector name -> the holder identity of its claim Lease, as the API server has it."""
    leases = kubernetes.client.CoordinationV1Api(kube_client).list_namespaced_lease(
        CLAIM_NAMESPACE, label_selector="connectops.io/lock=connector-claim"
    )
    return {
        (lease.metadata.annotations or {}).get("connectops.io/connector", ""): lease.spec.holder_identity
        for lease in leases.items
    }


@pytest.fixture
def tenants(k8s: K8s, kube_client: Any) -> Iterator[list[K8s]]:
    """Two more namespaces on the same API server and operator."""
    core = kubernetes.client.CoreV1Api(kube_client)
    more = []
    for suffix in ("b", "c"):
        ns = f"{k8s.ns}-{suffix}"
        core.create_namespace(kubernetes.client.V1Namespace(metadata={"name": ns}))
        more.append(K8s(kube_client, ns))
    everyone = [k8s, *more]
    yield everyone
    for tenant in more:
        items = tenant.custom.list_namespaced_custom_object("connectops.io", "v1alpha1", tenant.ns, "connectors")
        for item in items["items"]:
            with contextlib.suppress(ApiException):
                tenant.delete("connectors", item["metadata"]["name"])


def test_ownership_stands_when_the_owners_connect_cluster_is_deleted(
    k8s: K8s,
    other_ns: K8s,  # noqa: F811
    connect: ConnectWorker,
    kube_client: Any,
    tmp_path: Path,
) -> None:
    rest = ConnectREST(connect)
    k8s.create("connectclusters", "main", connect_cluster_spec(connect), "ConnectCluster")
    other_ns.create("connectclusters", "theirs", connect_cluster_spec(connect), "ConnectCluster")
    connector = f"owned-{uuid.uuid4().hex[:6]}"
    k8s.create("connectors", "owner", _spec(tmp_path, "main", connector, "owner-topic"), "Connector")
    k8s.wait_condition("connectors", "owner", "Ready", "True")
    owner_uid = k8s.get("connectors", "owner")["metadata"]["uid"]
    assert _holders(kube_client).get(connector, "").endswith(f"/{k8s.ns}/owner/{owner_uid}")
    other_ns.create("connectors", "rival", _spec(tmp_path, "theirs", connector, "rival-topic"), "Connector")
    other_ns.wait_condition("connectors", "rival", "Ready", "False", reason="NameConflict")

    k8s.delete("connectclusters", "main")
    wait_for(lambda: not k8s.exists("connectclusters", "main"), 60, "ConnectCluster main deleted")
    # the owner says its ConnectCluster is gone, at once, not at a sweep that no longer runs
    cond = k8s.wait_condition("connectors", "owner", "Ready", "False", reason="ReferenceNotFound", timeout=30)
    assert "main" in cond["message"], cond
    # the rival neither takes the connector over nor writes to it, over several resyncs (3 s)
    _no_alternation(connect, connector, "owner-topic", 12)
    assert other_ns.condition("connectors", "rival", "Ready")["reason"] == "NameConflict"
    assert count_config_writes(connect, connector) == 1
    # and its deletion leaves the owner's connector in Connect, config and all
    other_ns.delete("connectors", "rival")
    wait_for(lambda: not other_ns.exists("connectors", "rival"), 120, "rival deleted")
    assert rest.exists(connector)
    assert rest.config(connector)["topic"] == "owner-topic"
    assert k8s.exists("connectors", "owner")
    assert _holders(kube_client).get(connector, "").endswith(f"/{owner_uid}")

    # the owner's deletion, its ConnectCluster gone, cannot reach Connect: it says so, and gives
    # its claim up (the connector is then anyone's to manage)
    k8s.delete("connectors", "owner")
    wait_for(lambda: not k8s.exists("connectors", "owner"), 120, "owner deleted")
    assert connector not in _holders(kube_client)
    assert any(e.reason == "ClusterGone" for e in k8s.events("owner"))


def test_of_claimants_made_at_once_only_the_holder_ever_writes(
    tenants: list[K8s], connect: ConnectWorker, kube_client: Any, tmp_path: Path
) -> None:
    # one worker spelled three ways: names and URLs cannot tell they are one place
    spellings = [connect.url, connect.url.replace("127.0.0.1", "localhost"), connect.url + "/"]
    for tenant, url in zip(tenants, spellings, strict=True):
        tenant.create("connectclusters", "main", {**connect_cluster_spec(connect), "restUrl": url}, "ConnectCluster")
    for tenant in tenants:
        tenant.wait_condition("connectclusters", "main", "Ready", "True")
    rounds = [f"race-{n}-{uuid.uuid4().hex[:6]}" for n in range(ROUNDS)]
    for connector in rounds:
        for i, tenant in enumerate(tenants):
            tenant.create(
                "connectors", "c-" + connector, _spec(tmp_path, "main", connector, f"{connector}-{i}"), "Connector"
            )
    rest = ConnectREST(connect)
    for connector in rounds:
        wait_for(lambda c=connector: rest.exists(c), 120, f"{connector} created")
        wait_for(lambda c=connector: c in _holders(kube_client), 60, f"{connector}'s claim")
        holder = _holders(kube_client)[connector]
        owners = [t for t in tenants if holder.startswith(f"connectops.io/connector/{t.ns}/")]
        assert len(owners) == 1, holder
        (owner,) = owners
        owner.wait_condition("connectors", "c-" + connector, "Ready", "True", timeout=60)
        for tenant in tenants:
            if tenant is not owner:
                tenant.wait_condition("connectors", "c-" + connector, "Ready", "False", reason="NameConflict")
    for connector in rounds:
        holder = _holders(kube_client)[connector]
        i = next(i for i, t in enumerate(tenants) if holder.startswith(f"connectops.io/connector/{t.ns}/"))
        # Connect wrote exactly one config for the connector: the holder's, and nobody else's ever
        assert count_config_writes(connect, connector) == 1, connector
        assert rest.config(connector)["topic"] == f"{connector}-{i}"
