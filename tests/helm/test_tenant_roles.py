"""Tenants use connectops with Kubernetes' own roles: the chart's aggregated ClusterRoles, on the
real API server's RBAC.

The chart adds its kinds to the built-in ``view``, ``edit`` and ``admin`` ClusterRoles through
aggregation labels. Filling an aggregated role is kube-controller-manager's job (its
clusterrole-aggregation controller), and only etcd and kube-apiserver run here, so this test does
that one step itself, as the controller does it: for each built-in role, the union of the rules
of every ClusterRole its ``aggregationRule`` selects, written into its ``rules``. Everything else
is the API server's: users bound to the built-in roles by RoleBindings, acting by impersonation.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.conftest import crds
from tests.helm.chart import aggregated, apply, render

__all__ = ["crds"]  # the session fixture from tests/e2e/conftest.py: the connectops CRDs applied

pytestmark = pytest.mark.timeout(120)

GROUP, VERSION = "connectops.io", "v1alpha1"
BUILT_IN = ("view", "edit", "admin")


def aggregate(rbac: client.RbacAuthorizationV1Api) -> None:
    """What the clusterrole-aggregation controller does for view, edit and admin."""
    for name in BUILT_IN:
        role: Any = rbac.read_cluster_role(name)
        rules: list[Any] = []
        for selector in role.aggregation_rule.cluster_role_selectors:
            labels = ",".join(f"{k}={v}" for k, v in (selector.match_labels or {}).items())
            for source in sorted(rbac.list_cluster_role(label_selector=labels).items, key=lambda r: r.metadata.name):
                for rule in source.rules or ():
                    if rule not in rules:
                        rules.append(rule)
        role.rules = rules
        rbac.replace_cluster_role(name, role)


def as_user(admin: client.ApiClient, user: str) -> client.ApiClient:
    """An API client that acts as ``user`` (impersonation by the test's admin identity)."""
    api: client.ApiClient = kubernetes.client.ApiClient(admin.configuration)
    api.set_default_header("Impersonate-User", user)
    api.set_default_header("Impersonate-Group", "system:authenticated")
    return api


def status_of(call: Any) -> int:
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 201


@pytest.fixture
def tenant(kube_client: client.ApiClient, crds: None) -> Iterator[str]:
    rbac = client.RbacAuthorizationV1Api(kube_client)
    ns = f"tenant-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(kube_client).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    roles = [o for o in render({}, release=f"tr-{ns[-8:]}", namespace="ops") if aggregated(o)]
    assert sorted(r["metadata"]["name"].rsplit("-", 1)[1] for r in roles) == ["admin", "edit", "view"]
    apply(kube_client, roles)
    aggregate(rbac)
    for user, role in (("alice", "edit"), ("victor", "view"), ("ada", "admin")):
        rbac.create_namespaced_role_binding(
            ns,
            client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name=f"{user}-{role}"),
                role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role),
                subjects=[client.RbacV1Subject(kind="User", name=user, api_group="rbac.authorization.k8s.io")],
            ),
        )
    try:
        yield ns
    finally:
        for role in roles:
            rbac.delete_cluster_role(role["metadata"]["name"])
        aggregate(rbac)  # the built-in roles lose the rules again, as the controller would do


def test_built_in_roles_reach_connectops_kinds(kube_client: client.ApiClient, tenant: str) -> None:
    ns = tenant
    connector = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Connector",
        "metadata": {"name": "orders"},
        "spec": {"clusterRef": {"name": "main"}, "class": "org.apache.kafka.connect.file.FileStreamSourceConnector"},
    }
    cluster = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConnectCluster",
        "metadata": {"name": "main"},
        "spec": {"restUrl": "http://connect.example:8083", "kafka": {"bootstrapServers": "kafka.example:9092"}},
    }
    reset = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "OffsetReset",
        "metadata": {"name": "back"},
        "spec": {"connectorRef": {"name": "orders"}, "action": "restore", "restoreFrom": "connectops-backup-x"},
    }

    def create(user: str, plural: str, body: dict[str, Any]) -> int:
        api = client.CustomObjectsApi(as_user(kube_client, user))
        return status_of(lambda: api.create_namespaced_custom_object(GROUP, VERSION, ns, plural, body))

    def status_patch(user: str, plural: str, name: str) -> int:
        api = client.CustomObjectsApi(as_user(kube_client, user))
        body = {"status": {"conditions": []}}
        return status_of(lambda: api.patch_namespaced_custom_object_status(GROUP, VERSION, ns, plural, name, body))

    # edit: Connectors and OffsetResets (restoreFrom included), not ConnectClusters
    assert create("alice", "connectors", connector) == 201
    assert create("alice", "offsetresets", reset) == 201
    assert create("alice", "connectclusters", cluster) == 403
    # admin: ConnectClusters too
    assert create("ada", "connectclusters", cluster) == 201
    # view: reads, writes nothing
    viewer = client.CustomObjectsApi(as_user(kube_client, "victor"))
    assert viewer.get_namespaced_custom_object(GROUP, VERSION, ns, "connectors", "orders")["spec"]["class"]
    assert create("victor", "connectors", {**connector, "metadata": {"name": "other"}}) == 403
    # the status is the operator's, at every level
    for user in ("alice", "ada"):
        assert status_patch(user, "connectors", "orders") == 403
        assert status_patch(user, "offsetresets", "back") == 403
    # and nothing outside the namespace bound
    elsewhere = client.CustomObjectsApi(as_user(kube_client, "alice"))
    with pytest.raises(ApiException) as denied:
        elsewhere.list_namespaced_custom_object(GROUP, VERSION, "default", "connectors")
    assert denied.value.status == 403
