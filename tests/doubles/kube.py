"""``FakeKube``: the part of :class:`connectops.adapters.kube.KubeClient` that the Connector
reconciler, the ClusterRegistry and the OffsetReset executor call, in memory, with the same
answers and typed errors: Secrets for ``configFrom`` and a ConnectCluster's credentials, the
ConnectCluster itself, the offset-reset Lease lock (acquire, release, transfer), custom objects
(Connector and OffsetReset objects, read and listed), their status written as a JSON merge patch
(RFC 7386, as the API server applies it: ``null`` deletes a member, objects merge recursively,
lists are replaced whole, and, unlike RFC 7386, null members of the objects inside a list are
dropped), and ConfigMaps created but never replaced
(the reset backups). ``tests/adapters/test_kube_contract.py`` holds it and the real client against
a real kube-apiserver to the same scenarios.

Not modelled: the CRDs' schema (defaults, pruning of unknown fields, validation); tests store
objects the way the real API server would return them. One refusal is: :meth:`FakeKube.
refuse_status` makes every status write of an object answer as a 1.30-1.32 API server answers
for an object stored before a rule it breaks (422 Invalid, the rule's field and message;
tests/e2e/test_kube_oldest.py holds that answer to the real server's).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes import client

from connectops.adapters.kube import (
    KubeClient,
    KubeError,
    KubeObjectMissing,
    Lock,
    LockHeld,
    SecretKeyMissing,
    StatusGuard,
    StatusRefused,
    lock_name,
    refusal_causes,
)


def invalid_answer(kind: str, name: str, causes: list[tuple[str, str]]) -> str:
    """The body of the API server's 422 for a write refused by the CRD's rules (a metav1.Status
    of reason Invalid), as kube-apiserver 1.30 writes it for a CEL rule: each cause's message
    is ``Invalid value: "object": <the rule's message>``."""
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'{kind}.connectops.io "{name}" is invalid: '
            + ", ".join(f'{field}: Invalid value: "object": {message}' for field, message in causes),
            "reason": "Invalid",
            "details": {
                "name": name,
                "group": "connectops.io",
                "kind": kind,
                "causes": [
                    {"reason": "FieldValueInvalid", "message": f'Invalid value: "object": {message}', "field": field}
                    for field, message in causes
                ],
            },
            "code": 422,
        }
    )


class ConnectorKubeApi(Protocol):
    """What the Connector reconciler and the ClusterRegistry call on the Kubernetes adapter."""

    statuses: StatusGuard

    async def secret_value(self, namespace: str, name: str, key: str) -> str: ...
    async def secret_values(self, namespace: str, name: str, keys: list[str]) -> dict[str, str]: ...
    async def connect_cluster(self, namespace: str, name: str) -> dict[str, Any]: ...
    async def lock_holder(self, namespace: str, cluster: str, connector: str) -> Lock | None: ...
    async def acquire_lock(
        self,
        namespace: str,
        cluster: str,
        connector: str,
        holder: str,
        owner: dict[str, Any] | None,
        purpose: str = "offset-reset",
    ) -> Lock: ...
    async def release_lock(
        self, namespace: str, cluster: str, connector: str, holder: str, version: str | None = None
    ) -> None: ...
    #: spec.offsets: the OffsetReset that applies them, the marker, and a rename's hand-over
    async def custom_object(self, namespace: str, plural: str, name: str) -> dict[str, Any]: ...
    def custom_object_pages(
        self, plural: str, namespace: str | None = None, *, limit: int = 500
    ) -> AsyncIterator[list[dict[str, Any]]]: ...
    async def create_object(
        self, group: str, version: str, namespace: str, plural: str, body: dict[str, Any]
    ) -> bool: ...
    async def patch_status(
        self, namespace: str, plural: str, name: str, status: dict[str, Any], *, meta: Mapping[str, Any] | None = None
    ) -> None: ...
    async def annotate(self, namespace: str, plural: str, name: str, annotations: dict[str, str]) -> None: ...


class ResetKubeApi(ConnectorKubeApi, Protocol):
    """What the OffsetReset executor calls besides: its objects, their status, backups, lock hand-over."""

    async def config_map(self, namespace: str, name: str) -> client.V1ConfigMap: ...
    async def create_config_map(
        self,
        namespace: str,
        name: str,
        *,
        data: dict[str, str] | None = None,
        binary_data: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        dry_run: bool = False,
        owner: dict[str, Any] | None = None,
    ) -> bool: ...
    async def transfer_lock(
        self,
        namespace: str,
        cluster: str,
        connector: str,
        from_holder: str,
        to_holder: str,
        owner: dict[str, Any] | None,
    ) -> Lock: ...


def _prune_nulls(value: Any) -> Any:
    """What the API server stores of a list in a merge patch: the members of every object in it
    whose value is null are dropped, at any depth (null elements of the list itself stay)."""
    if isinstance(value, dict):
        return {k: _prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune_nulls(v) for v in value]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """A JSON merge patch as the API server applies it (``patch`` applied to ``target``, neither
    changed): RFC 7386 (null deletes a member, objects merge recursively, a list replaces the
    stored one whole), except that the null members of objects inside a list are dropped too
    (evanphx/json-patch prunes them; RFC 7386 would keep them). The contract test pins this."""
    if isinstance(patch, list):
        return _prune_nulls(patch)
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class FakeKube:
    def __init__(self) -> None:
        #: (namespace, name) -> decoded data
        self.secrets: dict[tuple[str, str], dict[str, str]] = {}
        #: (namespace, name) -> the ConnectCluster object as the API server returns it
        self.connect_clusters: dict[tuple[str, str], dict[str, Any]] = {}
        #: (namespace, lease name) -> Lock
        self.leases: dict[tuple[str, str], Lock] = {}
        self._lease_writes = 0
        #: (namespace, plural, name) -> a custom object of this operator's group (not ConnectClusters)
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        #: (namespace, name) -> ConfigMap
        self.config_maps: dict[tuple[str, str], client.V1ConfigMap] = {}
        #: every status patch sent, in order: (namespace, plural, name, patch)
        self.status_patches: list[tuple[str, str, str, dict[str, Any]]] = []
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self._faults: dict[str, list[KubeError]] = {}
        self._uids = itertools.count(1)
        #: (group, version, plural) of kinds the API server does not serve (their CRD is not
        #: installed): creating or reading one is refused with 404, as KubeClient raises it
        self.not_served: set[tuple[str, str, str]] = set()
        #: the production guard over status writes (one write per spec once refused)
        self.statuses = StatusGuard()
        #: (namespace, plural, name) -> the 422 body every status write of that object gets
        self._refusing: dict[tuple[str, str, str], str] = {}
        #: status writes that reached the "API server" (refused ones included)
        self.status_attempts = 0

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

    def add_object(self, namespace: str, plural: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """A custom object as the API server returns it after a create (generation 1, a uid)."""
        obj = {
            "apiVersion": "connectops.io/v1alpha1",
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"{next(self._uids):08d}-fake-{name}",
                "generation": 1,
                "resourceVersion": "1",
                "creationTimestamp": "2024-05-01T10:00:00Z",
            },
            "spec": copy.deepcopy(spec),
        }
        self.objects[(namespace, plural, name)] = obj
        return copy.deepcopy(obj)

    def replace_spec(self, namespace: str, plural: str, name: str, spec: dict[str, Any]) -> None:
        """kubectl apply of a new spec: the generation moves on when the spec changes."""
        obj = self.objects[(namespace, plural, name)]
        if obj["spec"] != spec:
            obj["spec"] = copy.deepcopy(spec)
            obj["metadata"]["generation"] += 1
            self._bump(obj)

    def add_config_map(
        self, namespace: str, name: str, data: dict[str, str], *, annotations: dict[str, str] | None = None
    ) -> None:
        """A ConfigMap someone else made."""
        self.config_maps[(namespace, name)] = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, annotations=dict(annotations or {})),
            data=dict(data),
        )

    def refuse_status(self, namespace: str, plural: str, name: str, causes: list[tuple[str, str]] | None) -> None:
        """Every status write of the object is refused as invalid with ``causes`` (field, rule
        message), as an API server before 1.33 does for an object stored before a rule it
        breaks; None: accepted again (the user fixed the spec)."""
        if causes is None:
            self._refusing.pop((namespace, plural, name), None)
        else:
            kind = self.objects[(namespace, plural, name)]["kind"]
            self._refusing[(namespace, plural, name)] = invalid_answer(kind, name, causes)

    def fail_next(self, method: str, error: KubeError, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` raise ``error`` (and change nothing)."""
        self._faults.setdefault(method, []).extend([error] * times)

    def _enter(self, method: str, *args: Any) -> None:
        self.calls.append((method, args))
        queued = self._faults.get(method)
        if queued:
            raise queued.pop(0)

    @staticmethod
    def _bump(obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta["resourceVersion"] = str(int(meta.get("resourceVersion", "0")) + 1)

    # -- the adapter's interface ----------------------------------------------------------------

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        return (await self.secret_values(namespace, name, [key]))[key]

    async def secret_values(self, namespace: str, name: str, keys: list[str]) -> dict[str, str]:
        self._enter("secret_values", namespace, name, tuple(keys))
        data = self.secrets.get((namespace, name))
        if data is None:
            raise KubeObjectMissing(f"Secret {namespace}/{name} not found")
        for key in keys:
            if key not in data:
                raise SecretKeyMissing(f"Secret {namespace}/{name} has no key {key!r}")
        return {key: data[key] for key in keys}

    async def connect_cluster(self, namespace: str, name: str) -> dict[str, Any]:
        self._enter("connect_cluster", namespace, name)
        obj = self.connect_clusters.get((namespace, name))
        if obj is None:
            raise KubeObjectMissing(f"ConnectCluster {namespace}/{name} not found")
        return copy.deepcopy(obj)

    async def lock_holder(self, namespace: str, cluster: str, connector: str) -> Lock | None:
        self._enter("lock_holder", namespace, cluster, connector)
        return self.leases.get((namespace, lock_name(cluster, connector)))

    async def acquire_lock(
        self,
        namespace: str,
        cluster: str,
        connector: str,
        holder: str,
        owner: dict[str, Any] | None,
        purpose: str = "offset-reset",
    ) -> Lock:
        self._enter("acquire_lock", namespace, cluster, connector, holder)
        name = lock_name(cluster, connector)
        current = self.leases.get((namespace, name))
        if current is not None:
            if current.holder != holder:
                raise LockHeld(current.holder)
            return current
        lock = Lock(name=name, holder=holder, acquired_at=datetime.now(UTC).isoformat(), version=self._next_version())
        self.leases[(namespace, name)] = lock
        return lock

    def _next_version(self) -> str:
        # the API server's resourceVersion: a new one on every write of a Lease
        self._lease_writes += 1
        return str(self._lease_writes)

    async def release_lock(
        self, namespace: str, cluster: str, connector: str, holder: str, version: str | None = None
    ) -> None:
        self._enter("release_lock", namespace, cluster, connector, holder)
        name = lock_name(cluster, connector)
        current = self.leases.get((namespace, name))
        # as the adapter: a delete at the holder's own version, else at the version read now
        # if the holder still holds it
        if current is not None and ((version is not None and current.version == version) or current.holder == holder):
            del self.leases[(namespace, name)]

    async def transfer_lock(
        self,
        namespace: str,
        cluster: str,
        connector: str,
        from_holder: str,
        to_holder: str,
        owner: dict[str, Any] | None,
    ) -> Lock:
        self._enter("transfer_lock", namespace, cluster, connector, from_holder, to_holder)
        name = lock_name(cluster, connector)
        current = self.leases.get((namespace, name))
        if current is None:
            raise KubeObjectMissing(f"Lease {namespace}/{name} not found")
        if current.holder == to_holder:
            return Lock(name=name, holder=to_holder, acquired_at=None)
        if current.holder != from_holder:
            raise LockHeld(current.holder)
        lock = Lock(
            name=name, holder=to_holder, acquired_at=datetime.now(UTC).isoformat(), version=self._next_version()
        )
        self.leases[(namespace, name)] = lock
        return lock

    # -- custom objects ---------------------------------------------------------------------------

    async def custom_object(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        self._enter("custom_object", namespace, plural, name)
        if plural == "connectclusters" and (namespace, name) in self.connect_clusters:
            return copy.deepcopy(self.connect_clusters[(namespace, name)])
        obj = self.objects.get((namespace, plural, name))
        if obj is None:
            raise KubeObjectMissing(f"{plural} {namespace}/{name} not found")
        return copy.deepcopy(obj)

    async def custom_object_pages(
        self, plural: str, namespace: str | None = None, *, limit: int = 500
    ) -> AsyncIterator[list[dict[str, Any]]]:
        self._enter("custom_object_pages", namespace, plural)
        # the API server lists by namespace and name, ``limit`` at a time
        listed = [
            obj
            for (ns, pl, _), obj in sorted(self.objects.items())
            if pl == plural and (namespace is None or ns == namespace)
        ]
        for start in range(0, len(listed), limit):
            yield [copy.deepcopy(obj) for obj in listed[start : start + limit]]
            await asyncio.sleep(0)
        if not listed:
            yield []

    async def serves(self, group: str, version: str, plural: str, *, timeout: float) -> bool:
        self._enter("serves", group, version, plural)
        await asyncio.sleep(0)
        return (group, version, plural) not in self.not_served

    def _served(self, group: str, version: str, plural: str) -> None:
        if (group, version, plural) in self.not_served:
            raise KubeObjectMissing(f"{plural}.{group}/{version} is not served by this cluster")

    async def create_object(self, group: str, version: str, namespace: str, plural: str, body: dict[str, Any]) -> bool:
        self._enter("create_object", namespace, plural, body["metadata"]["name"])
        await asyncio.sleep(0)  # a real call gives the loop to others while it is in flight
        self._served(group, version, plural)
        key = (namespace, plural, body["metadata"]["name"])
        if key in self.objects:
            return False  # 409: the API server keeps the first
        obj = copy.deepcopy(body)
        obj["metadata"].setdefault("uid", f"uid-{body['metadata']['name']}")
        obj["metadata"]["resourceVersion"] = "1"
        self.objects[key] = obj
        return True

    async def get_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> dict[str, Any]:
        self._enter("get_object", namespace, plural, name)
        self._served(group, version, plural)
        obj = self.objects.get((namespace, plural, name))
        if obj is None:
            raise KubeObjectMissing(f"{plural} {namespace}/{name} not found")
        return copy.deepcopy(obj)

    async def delete_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> None:
        self._enter("delete_object", namespace, plural, name)
        self.objects.pop((namespace, plural, name), None)  # the API server's 404 is taken as done

    async def annotate(self, namespace: str, plural: str, name: str, annotations: dict[str, str]) -> None:
        self._enter("annotate", namespace, plural, name)
        obj = self.objects.get((namespace, plural, name))
        if obj is None:
            raise KubeObjectMissing(f"{plural} {namespace}/{name} not found")
        obj["metadata"].setdefault("annotations", {}).update(annotations)
        self._bump(obj)

    async def patch_status(
        self, namespace: str, plural: str, name: str, status: dict[str, Any], *, meta: Mapping[str, Any] | None = None
    ) -> None:
        async def write() -> None:
            self._enter("patch_status", namespace, plural, name)
            obj = self.objects.get((namespace, plural, name))
            if obj is None:
                raise KubeObjectMissing(f"{plural} {namespace}/{name} status not found")
            self.status_attempts += 1
            refusal = self._refusing.get((namespace, plural, name))
            causes = refusal_causes(422, refusal) if refusal is not None else None
            if causes is not None:
                raise StatusRefused(f"{plural} {namespace}/{name}", causes)
            self.status_patches.append((namespace, plural, name, copy.deepcopy(status)))
            patched = merge_patch(obj, {"status": status})
            obj["status"] = patched.get("status", {})
            self._bump(obj)

        await self.statuses.write(
            (namespace, plural, name), meta, write, lambda: self.custom_object(namespace, plural, name)
        )

    # -- config maps ------------------------------------------------------------------------------

    async def config_map(self, namespace: str, name: str) -> client.V1ConfigMap:
        self._enter("config_map", namespace, name)
        cm = self.config_maps.get((namespace, name))
        if cm is None:
            raise KubeObjectMissing(f"ConfigMap {namespace}/{name} not found")
        return copy.deepcopy(cm)

    async def create_config_map(
        self,
        namespace: str,
        name: str,
        *,
        data: dict[str, str] | None = None,
        binary_data: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        dry_run: bool = False,
        owner: dict[str, Any] | None = None,
    ) -> bool:
        self._enter("create_config_map_dry_run" if dry_run else "create_config_map", namespace, name)
        if (namespace, name) in self.config_maps:
            return False
        if dry_run:
            return True
        self.config_maps[(namespace, name)] = client.V1ConfigMap(
            # the API server drops empty maps: an empty labels or annotations map reads back as None
            metadata=client.V1ObjectMeta(
                name=name,
                namespace=namespace,
                labels=dict(labels) if labels else None,
                annotations=dict(annotations) if annotations else None,
                owner_references=[client.V1OwnerReference(**owner)] if owner else None,
            ),
            data=dict(data) if data is not None else None,
            binary_data=dict(binary_data) if binary_data is not None else None,
            immutable=True,  # as the real adapter creates every ConfigMap
        )
        return True


#: checked by mypy: the real adapter and the double both implement the interfaces
_REAL_IMPLEMENTS_API: type[ConnectorKubeApi] = KubeClient
_FAKE_IMPLEMENTS_API: type[ConnectorKubeApi] = FakeKube
_REAL_IMPLEMENTS_RESET_API: type[ResetKubeApi] = KubeClient
_FAKE_IMPLEMENTS_RESET_API: type[ResetKubeApi] = FakeKube
