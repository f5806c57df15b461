"""``FakeKube``: the part of :class:`connectops.adapters.kube.KubeClient` that the Connector
reconciler and the ClusterRegistry call (Secrets for ``configFrom`` and a ConnectCluster's
credentials, the ConnectCluster itself, the offset-reset Lease lock), in memory, with the same
answers and typed errors. ``tests/adapters/test_kube_contract.py`` holds it and the real client
against a real kube-apiserver to the same scenarios.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any, Protocol

from connectops.adapters.kube import KubeClient, KubeObjectMissing, Lock, LockHeld, SecretKeyMissing, lock_name


class ConnectorKubeApi(Protocol):
    """What the Connector reconciler and the ClusterRegistry call on the Kubernetes adapter."""

    async def secret_value(self, namespace: str, name: str, key: str) -> str: ...
    async def secret_values(self, namespace: str, name: str, keys: list[str]) -> dict[str, str]: ...
    async def connect_cluster(self, namespace: str, name: str) -> dict[str, Any]: ...
    async def lock_holder(self, namespace: str, cluster: str, connector: str) -> Lock | None: ...
    async def acquire_lock(
        self, namespace: str, cluster: str, connector: str, holder: str, owner: dict[str, Any]
    ) -> Lock: ...
    async def release_lock(self, namespace: str, cluster: str, connector: str, holder: str) -> None: ...


class FakeKube:
    def __init__(self) -> None:
        #: (namespace, name) -> decoded data
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}
        #: (namespace, name) -> the ConnectCluster object as the API server returns it
        self.connect_clusters: dict[tuple[str, str], dict[str, Any]] = {}
        #: (namespace, lease name) -> Lock
        self.leases: dict[tuple[str, str], Lock] = {}
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    # -- test controls --------------------------------------------------------------------------

    def add_secret(self, namespace: str, name: str, data: dict[str, str]) -> None:
        self.secrets[(namespace, name)] = dict(data)

    def add_connect_cluster(self, namespace: str, name: str, spec: dict[str, Any]) -> None:
        self.connect_clusters[(namespace, name)] = {
            "apiVersion": "connectops.io/v1alpha1",
            "kind": "ConnectCluster",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-cc-{name}"},
            "spec": copy.deepcopy(spec),
        }

    # -- the adapter's interface ----------------------------------------------------------------

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        return (await self.secret_values(namespace, name, [key]))[key]

    async def secret_values(self, namespace: str, name: str, keys: list[str]) -> dict[str, str]:
        self.calls.append(("secret_values", (namespace, name, tuple(keys))))
        data = self.secrets.get((namespace, name))
        if data is None:
            raise KubeObjectMissing(f"Secret {namespace}/{name} not found")
        for key in keys:
            if key not in data:
                raise SecretKeyMissing(f"Secret {namespace}/{name} has no key {key!r}")
        return {key: data[key] for key in keys}

    async def connect_cluster(self, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(("connect_cluster", (namespace, name)))
        obj = self.connect_clusters.get((namespace, name))
        if obj is None:
            raise KubeObjectMissing(f"ConnectCluster {namespace}/{name} not found")
        return copy.deepcopy(obj)

    async def lock_holder(self, namespace: str, cluster: str, connector: str) -> Lock | None:
        self.calls.append(("lock_holder", (namespace, cluster, connector)))
        return self.leases.get((namespace, lock_name(cluster, connector)))

    async def acquire_lock(
        self, namespace: str, cluster: str, connector: str, holder: str, owner: dict[str, Any]
    ) -> Lock:
        self.calls.append(("acquire_lock", (namespace, cluster, connector, holder)))
        name = lock_name(cluster, connector)
        current = self.leases.get((namespace, name))
        if current is not None:
            if current.holder != holder:
                raise LockHeld(current.holder)
            return current
        lock = Lock(name=name, holder=holder, acquired_at=datetime.now(UTC).isoformat())
        self.leases[(namespace, name)] = lock
        return lock

    async def release_lock(self, namespace: str, cluster: str, connector: str, holder: str) -> None:
        self.calls.append(("release_lock", (namespace, cluster, connector, holder)))
        name = lock_name(cluster, connector)
        current = self.leases.get((namespace, name))
        if current is not None and current.holder == holder:
            del self.leases[(namespace, name)]


#: checked by mypy: the real adapter and the double both implement the interface
_REAL_IMPLEMENTS_API: type[ConnectorKubeApi] = KubeClient
_FAKE_IMPLEMENTS_API: type[ConnectorKubeApi] = FakeKube
