"""The Kubernetes calls of the Connector reconciler and the ClusterRegistry, one contract for
``FakeKube`` and for ``KubeClient`` against the real kube-apiserver: same values, same errors."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest

from connectops.adapters.kube import KubeClient, KubeObjectMissing, LockHeld, SecretKeyMissing
from tests.doubles.kube import ConnectorKubeApi, FakeKube
from tests.e2e.conftest import GROUP, VERSION, crds

__all__ = ["crds"]  # the session fixture that installs the CRDs, for the real half

pytestmark = pytest.mark.timeout(120)

SPEC = {"restUrl": "http://connect.example:8083", "requestTimeoutSeconds": 5}


@dataclass
class Backend:
    api: ConnectorKubeApi
    namespace: str
    fake: FakeKube | None
    client: Any = None

    def add_secret(self, name: str, data: dict[str, str]) -> None:
        if self.fake is not None:
            self.fake.add_secret(self.namespace, name, data)
            return
        core = kubernetes.client.CoreV1Api(self.client)
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        core.create_namespaced_secret(
            self.namespace, kubernetes.client.V1Secret(metadata=kubernetes.client.V1ObjectMeta(name=name), data=encoded)
        )

    def add_connect_cluster(self, name: str, spec: dict[str, Any]) -> None:
        if self.fake is not None:
            self.fake.add_connect_cluster(self.namespace, name, spec)
            return
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ConnectCluster", "metadata": {"name": name}, "spec": spec}
        kubernetes.client.CustomObjectsApi(self.client).create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "connectclusters", body
        )


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.e2e)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    namespace = f"kc-{uuid.uuid4().hex[:6]}"
    if request.param == "fake":
        fake = FakeKube()
        yield Backend(fake, namespace, fake)
        return
    request.getfixturevalue("crds")
    client = request.getfixturevalue("kube_client")
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=namespace)))
    try:
        yield Backend(KubeClient(client), namespace, None, client)
    finally:
        core.delete_namespace(namespace)


async def test_secrets(backend: Backend) -> None:
    ns = backend.namespace
    backend.add_secret("creds", {"user": "alice", "password": "s3cr=t\n"})
    assert await backend.api.secret_value(ns, "creds", "password") == "s3cr=t\n"
    assert await backend.api.secret_values(ns, "creds", ["user", "password"]) == {
        "user": "alice",
        "password": "s3cr=t\n",
    }
    with pytest.raises(SecretKeyMissing, match="has no key 'token'"):
        await backend.api.secret_value(ns, "creds", "token")
    with pytest.raises(KubeObjectMissing, match="not found"):
        await backend.api.secret_value(ns, "nope", "user")


async def test_connect_cluster(backend: Backend) -> None:
    ns = backend.namespace
    backend.add_connect_cluster("main", SPEC)
    obj = await backend.api.connect_cluster(ns, "main")
    assert obj["spec"] == SPEC
    assert (obj["metadata"]["name"], obj["metadata"]["namespace"], obj["kind"]) == ("main", ns, "ConnectCluster")
    with pytest.raises(KubeObjectMissing, match="not found"):
        await backend.api.connect_cluster(ns, "other")


async def test_reset_lock(backend: Backend) -> None:
    ns = backend.namespace
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "OffsetReset", "name": "r1", "uid": str(uuid.uuid4())}
    holder = f"connectops.io/offsetreset/{ns}/r1/{owner['uid']}"
    # names may hold any character; the Lease name is a digest
    connector = "orders sink/v2"
    assert await backend.api.lock_holder(ns, "kafka/abc", connector) is None
    lock = await backend.api.acquire_lock(ns, "kafka/abc", connector, holder, owner)
    assert lock.holder == holder
    held = await backend.api.lock_holder(ns, "kafka/abc", connector)
    assert held is not None
    assert (held.name, held.holder) == (lock.name, holder)
    assert held.acquired_at
    # per cluster scope and connector
    assert await backend.api.lock_holder(ns, "main", connector) is None
    assert await backend.api.lock_holder(ns, "kafka/abc", "orders") is None
    # re-acquiring is idempotent for the holder, refused for anyone else
    assert (await backend.api.acquire_lock(ns, "kafka/abc", connector, holder, owner)).holder == holder
    with pytest.raises(LockHeld) as refused:
        await backend.api.acquire_lock(ns, "kafka/abc", connector, "someone-else", owner)
    assert refused.value.holder == holder
    await backend.api.release_lock(ns, "kafka/abc", connector, "someone-else")  # not theirs: no-op
    assert await backend.api.lock_holder(ns, "kafka/abc", connector) is not None
    await backend.api.release_lock(ns, "kafka/abc", connector, holder)
    assert await backend.api.lock_holder(ns, "kafka/abc", connector) is None
