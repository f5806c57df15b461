"""The Kubernetes calls of the Connector reconciler, the ClusterRegistry and the OffsetReset
executor, one contract for ``FakeKube`` and for ``KubeClient`` against the real kube-apiserver:
same values, same errors, the same JSON merge patch semantics for status."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest

from connectops.adapters.kube import KubeClient, KubeObjectMissing, LockHeld, SecretKeyMissing
from tests.doubles.kube import FakeKube, ResetKubeApi
from tests.e2e.conftest import GROUP, VERSION, crds

__all__ = ["crds"]  # the session fixture that installs the CRDs, for the real half

pytestmark = pytest.mark.timeout(120)

#: every field with a schema default given: the API server fills the ones left out, the fake does not
SPEC = {"restUrl": "http://connect.example:8083", "requestTimeoutSeconds": 5, "listingTimeoutSeconds": 60}


@dataclass
class Backend:
    api: ResetKubeApi
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

    def add_object(self, plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
        if self.fake is not None:
            self.fake.add_object(self.namespace, plural, kind, name, spec)
            return
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}
        kubernetes.client.CustomObjectsApi(self.client).create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, body
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


async def test_a_lock_released_at_its_own_version_is_never_one_handed_over(backend: Backend) -> None:
    """The holder's release names the Lease's version its own acquire returned: deleted when
    unchanged since; a Lease handed over meanwhile is left to its new holder, whatever version
    the former holder names (its own, or none: then read first)."""
    ns = backend.namespace
    first, second = "connectops.io/offsetreset/x/a/1", "connectops.io/offsetreset/x/b/2"
    lock = await backend.api.acquire_lock(ns, "kafka/v", "orders", first, None)
    assert lock.version
    await backend.api.release_lock(ns, "kafka/v", "orders", first, lock.version)
    assert await backend.api.lock_holder(ns, "kafka/v", "orders") is None

    lock = await backend.api.acquire_lock(ns, "kafka/v", "orders", first, None)
    handed = await backend.api.transfer_lock(ns, "kafka/v", "orders", first, second, None)
    assert handed.version
    assert handed.version != lock.version
    for version in (lock.version, None):
        await backend.api.release_lock(ns, "kafka/v", "orders", first, version)
        held = await backend.api.lock_holder(ns, "kafka/v", "orders")
        assert held is not None
        assert held.holder == second
    await backend.api.release_lock(ns, "kafka/v", "orders", second, "not-its-version")  # read, then deleted
    assert await backend.api.lock_holder(ns, "kafka/v", "orders") is None


CONNECTOR_SPEC = {"clusterRef": {"name": "main"}, "class": "FileStreamSource", "config": {"topic": "t"}}
RESET_SPEC = {"connectorName": "orders", "clusterRef": {"name": "main"}, "action": "reset"}


async def listed(backend: Backend, plural: str, *, limit: int = 500) -> list[list[dict[str, Any]]]:
    return [page async for page in backend.api.custom_object_pages(plural, backend.namespace, limit=limit)]


async def test_custom_objects(backend: Backend) -> None:
    ns = backend.namespace
    assert await listed(backend, "connectors") == [[]]
    backend.add_object("connectors", "Connector", "zeta", CONNECTOR_SPEC)
    backend.add_object("connectors", "Connector", "alpha", {**CONNECTOR_SPEC, "connectorName": "other"})
    backend.add_object("connectors", "Connector", "mid", CONNECTOR_SPEC)
    pages = await listed(backend, "connectors", limit=2)
    assert [[o["metadata"]["name"] for o in page] for page in pages] == [["alpha", "mid"], ["zeta"]]  # by name
    assert pages[0][0]["spec"]["connectorName"] == "other"
    assert [[o["metadata"]["name"] for o in page] for page in await listed(backend, "connectors")] == [
        ["alpha", "mid", "zeta"]
    ]
    obj = await backend.api.custom_object(ns, "connectors", "zeta")
    assert (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["generation"]) == ("Connector", ns, 1)
    assert obj["metadata"]["uid"]
    assert obj["spec"]["config"] == {"topic": "t"}
    assert await listed(backend, "offsetresets") == [[]]
    with pytest.raises(KubeObjectMissing, match=f"connectors {ns}/nope not found"):
        await backend.api.custom_object(ns, "connectors", "nope")


ENTRY_0 = {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": None}
ENTRY_1 = {"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": {"kafka_offset": 5}}
#: ENTRY_0 as the API server stores it inside a list: the null member is gone
ENTRY_0_STORED = {"partition": {"kafka_topic": "t", "kafka_partition": 0}}


async def test_patch_status_is_a_json_merge_patch(backend: Backend) -> None:
    """RFC 7386 as the API server applies it to a status subresource: null deletes a member,
    objects merge recursively, lists are replaced whole; and, unlike RFC 7386, the null members of
    objects inside a list are dropped (a KIP-875 entry's ``offset: null`` does not survive)."""
    ns = backend.namespace
    backend.add_object("offsetresets", "OffsetReset", "r1", RESET_SPEC)
    first: dict[str, Any] = {
        "phase": "Running",
        "currentStep": "lock",
        "connectors": ["orders"],
        "steps": [{"name": "lock", "state": "Running", "attempts": 1}, {"name": "inspect", "state": "Pending"}],
        "plan": {
            "strategy": "rest",
            "workerVersion": "4.3.0",
            "entries": {"orders": [ENTRY_0, ENTRY_1]},
            "currentCounts": {"orders": 2, "other": 1},
        },
        "executedSpec": {"action": "alter", "offsets": [ENTRY_0]},
    }
    await backend.api.patch_status(ns, "offsetresets", "r1", first)
    assert (await backend.api.custom_object(ns, "offsetresets", "r1"))["status"] == {
        **first,
        "plan": {**first["plan"], "entries": {"orders": [ENTRY_0_STORED, ENTRY_1]}},
        "executedSpec": {"action": "alter", "offsets": [ENTRY_0_STORED]},
    }

    await backend.api.patch_status(
        ns,
        "offsetresets",
        "r1",
        {
            "currentStep": None,
            "pendingResume": True,
            "steps": [{"name": "lock", "state": "Done", "attempts": 1}],
            "plan": {"workerVersion": None, "currentCounts": {"other": None}, "entries": {"orders": [ENTRY_1]}},
        },
    )
    obj = await backend.api.custom_object(ns, "offsetresets", "r1")
    assert obj["status"] == {
        "phase": "Running",
        "pendingResume": True,
        "connectors": ["orders"],
        "steps": [{"name": "lock", "state": "Done", "attempts": 1}],
        "plan": {"strategy": "rest", "entries": {"orders": [ENTRY_1]}, "currentCounts": {"orders": 2}},
        "executedSpec": {"action": "alter", "offsets": [ENTRY_0_STORED]},
    }
    assert obj["metadata"]["generation"] == 1  # a status write is not a spec change
    assert obj["spec"]["connectorName"] == "orders"
    await backend.api.patch_status(ns, "offsetresets", "r1", {"plan": None, "steps": []})
    status = (await backend.api.custom_object(ns, "offsetresets", "r1"))["status"]
    assert "plan" not in status
    assert status["steps"] == []
    with pytest.raises(KubeObjectMissing, match=f"offsetresets {ns}/nope status not found"):
        await backend.api.patch_status(ns, "offsetresets", "nope", {"phase": "Running"})


async def test_config_map_is_created_never_replaced(backend: Backend) -> None:
    ns = backend.namespace
    labels = {"connectops.io/backup": "offsets"}
    annotations = {"connectops.io/offset-reset-uid": "u-1"}
    assert await backend.api.create_config_map(
        ns, "backup-1", data={"backup.json": '{"version": 1}'}, labels=labels, annotations=annotations
    )
    assert not await backend.api.create_config_map(
        ns, "backup-1", data={"backup.json": "later"}, annotations={"connectops.io/offset-reset-uid": "u-2"}
    )
    cm = await backend.api.config_map(ns, "backup-1")
    assert cm.metadata is not None
    assert cm.data == {"backup.json": '{"version": 1}'}
    assert cm.binary_data is None
    assert (cm.metadata.name, cm.metadata.labels, cm.metadata.annotations) == ("backup-1", labels, annotations)

    assert await backend.api.create_config_map(
        ns, "backup-2", binary_data={"backup.json.gz": "H4sIAAAAAAAAA6uuBQBDv6ajAgAAAA=="}
    )
    cm = await backend.api.config_map(ns, "backup-2")
    assert cm.metadata is not None
    assert cm.data is None
    assert cm.binary_data == {"backup.json.gz": "H4sIAAAAAAAAA6uuBQBDv6ajAgAAAA=="}
    assert (cm.metadata.labels, cm.metadata.annotations) == (None, None)  # empty maps are not kept
    with pytest.raises(KubeObjectMissing, match=f"ConfigMap {ns}/nope not found"):
        await backend.api.config_map(ns, "nope")
    # a dry run checks the create and stores nothing; a taken name is said the same way
    assert await backend.api.create_config_map(ns, "backup-3", data={}, dry_run=True)
    with pytest.raises(KubeObjectMissing):
        await backend.api.config_map(ns, "backup-3")
    assert not await backend.api.create_config_map(ns, "backup-1", data={}, dry_run=True)


async def test_reset_lock_transfer(backend: Backend) -> None:
    ns = backend.namespace
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "OffsetReset", "name": "r1", "uid": str(uuid.uuid4())}
    failed, restore, other = "holder/failed", "holder/restore", "holder/other"
    with pytest.raises(KubeObjectMissing, match="not found"):
        await backend.api.transfer_lock(ns, "main", "orders", failed, restore, owner)
    await backend.api.acquire_lock(ns, "main", "orders", failed, owner)
    moved = await backend.api.transfer_lock(ns, "main", "orders", failed, restore, owner)
    assert moved.holder == restore
    assert moved.acquired_at
    held = await backend.api.lock_holder(ns, "main", "orders")
    assert held is not None
    assert held.holder == restore
    # taken over already: idempotent for the new holder
    again = await backend.api.transfer_lock(ns, "main", "orders", failed, restore, owner)
    assert (again.holder, again.acquired_at) == (restore, None)
    # held by someone else than the expected previous holder: refused, unchanged
    with pytest.raises(LockHeld) as refused:
        await backend.api.transfer_lock(ns, "main", "orders", failed, other, owner)
    assert refused.value.holder == restore
    held = await backend.api.lock_holder(ns, "main", "orders")
    assert held is not None
    assert held.holder == restore
