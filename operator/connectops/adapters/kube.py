"""Kubernetes API access the reconcilers need beyond what kopf hands to handlers.

Secrets, the referenced ConnectCluster, and the per-connector lock that an OffsetReset holds
while it has the connector stopped. The ``kubernetes`` client is synchronous, so every call runs
in a worker thread to keep kopf's event loop free.

Every status write of the operator goes through :meth:`KubeClient.patch_status` and its
:class:`StatusGuard` (a write refused as invalid is made once per spec). One module, past the
usual size, because the calls, their typed errors and that guard share the ApiException
translation and are reached through the one client the reconcilers hold.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import functools
import hashlib
import json
import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from connectops.concurrency.lanes import BACKGROUND
from connectops.failures import ConnectopsError
from connectops.models import GROUP, VERSION

logger = logging.getLogger(__name__)

LOCK_PREFIX = "connectops-lock-"
LOCK_LABEL = f"{GROUP}/lock"
ANNOTATION_CONNECTOR = f"{GROUP}/connector"
ANNOTATION_CLUSTER = f"{GROUP}/cluster"


class KubeError(ConnectopsError):
    """Base of Kubernetes API failures raised by this adapter."""

    retryable = True


class KubeObjectMissing(KubeError):
    """A referenced object (Secret, ConnectCluster) does not exist."""


class SecretKeyMissing(KubeError):
    """The Secret exists but lacks the referenced key."""


class KubeUnavailable(KubeError):
    """The API server failed or refused (5xx, network, 403 from missing RBAC)."""


class KubeForbidden(KubeUnavailable):
    """403 on a write the operator needs (its RBAC does not allow it): a retry does not help
    until the Role changes."""

    retryable = False


class StatusRefused(KubeError):
    """The API server refused a status write as invalid (422 with field errors): the object was
    stored before a rule of its CRD that it breaks, and Kubernetes up to 1.32 validates a status
    write against the whole stored object without ratcheting (the main resource ratchets from
    1.30, the status subresource only from 1.33). The same write fails until the user changes
    the spec, so it is not retried before then (:class:`StatusGuard`)."""

    retryable = False
    refused = True

    def __init__(self, what: str, causes: tuple[tuple[str, str], ...]) -> None:
        said = "; ".join(f"{field}: {message}" if field else message for field, message in causes)
        #: a refused field outside the status: the stored spec breaks a rule of the CRD
        self.spec_refused = any(not field.startswith("status") for field, _ in causes)
        why = (
            "the object was stored before its CRD had this rule, and this Kubernetes release checks "
            "it on every status write: nothing is applied until the spec is fixed"
            if self.spec_refused
            else "it is not written again until the spec changes"
        )
        super().__init__(f"the API server refuses to store the status of {what}: {said}; {why}")
        #: (field path, the rule's message), no values
        self.causes = causes


#: the Go-quoted value (or an unquoted one) an "Invalid value" field error starts with
_INVALID_VALUE = re.compile(r'^(Invalid value|Unsupported value|Duplicate value): (?:"(?:[^"\\]|\\.)*"|[^:]*): ')
#: what of a cause's message is kept: a rule message is short
_CAUSE_MESSAGE_LIMIT = 300


def refusal_causes(status: int | None, body: str | bytes | None) -> tuple[tuple[str, str], ...] | None:
    """The field errors of a 422 Invalid answer (a metav1.Status with ``details.causes``), each
    (field, message) with the offending value cut out (a value may be a config the user wrote);
    None for any other answer."""
    if status != 422 or not body:
        return None
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("reason") != "Invalid":
        return None
    causes = (answer.get("details") or {}).get("causes") or []
    kept: list[tuple[str, str]] = []
    for cause in causes if isinstance(causes, list) else []:
        if not isinstance(cause, dict):
            continue
        message = _INVALID_VALUE.sub("", str(cause.get("message") or cause.get("reason") or ""))
        kept.append((str(cause.get("field") or ""), message[:_CAUSE_MESSAGE_LIMIT]))
    return tuple(kept) or None


#: (the object as the API server returned it, the refusal) -> tell the user (an Event, a log line)
OnRefused = Callable[[Mapping[str, Any], StatusRefused], None]


@dataclass(frozen=True)
class _Refusal:
    uid: str
    generation: int | None
    error: StatusRefused


class StatusGuard:
    """Every status write of the operator goes through here (:meth:`KubeClient.patch_status`),
    so that a write the API server refused as invalid is made once per spec, not once per
    reconcile: the user is told once (``on_refused``: a Warning Event and a log line), and the
    next write is tried when the object's generation moves on (the user changed the spec). A
    write meanwhile raises the same :class:`StatusRefused` without a request."""

    def __init__(self, on_refused: OnRefused | None = None) -> None:
        self.on_refused = on_refused
        self._refused: dict[tuple[str, str, str], _Refusal] = {}

    def refused(self, namespace: str, plural: str, name: str, meta: Mapping[str, Any] | None) -> StatusRefused | None:
        """The refusal that still stands for the object whose metadata is ``meta`` (same uid and
        generation), without a request; None when its status may be written."""
        known = self._refused.get((namespace, plural, name))
        if known is None or meta is None:
            return None
        if (str(meta.get("uid") or ""), meta.get("generation")) != (known.uid, known.generation):
            return None
        return known.error

    def forget(self, namespace: str, plural: str, name: str) -> None:
        self._refused.pop((namespace, plural, name), None)

    async def write(
        self,
        key: tuple[str, str, str],
        meta: Mapping[str, Any] | None,
        write: Callable[[], Awaitable[None]],
        read: Callable[[], Awaitable[Mapping[str, Any]]],
    ) -> None:
        """``write`` the status unless it stands refused for the object's current spec
        (``meta``, or ``read`` for it when the caller has none); on a refusal, remember it
        and say so once, and raise :class:`StatusRefused`."""
        if key in self._refused:
            current = meta if meta is not None else (await read()).get("metadata") or {}
            standing = self.refused(*key, current)
            if standing is not None:
                raise standing
            self.forget(*key)
        try:
            await write()
        except StatusRefused as exc:
            try:
                obj = await read()
            except KubeError:
                raise exc from None  # gone or unreadable meanwhile: nothing to remember it by
            # the spec the caller acted on when it says which: one changed since was not tried
            got = meta if meta is not None else obj.get("metadata") or {}
            self._refused[key] = _Refusal(str(got.get("uid") or ""), got.get("generation"), exc)
            logger.warning("%s/%s %s: %s", key[0], key[2], key[1], exc)
            if self.on_refused is not None:
                self.on_refused(obj, exc)
            raise


class LockHeld(KubeError):
    """Another OffsetReset holds the connector's lock."""

    def __init__(self, holder: str) -> None:
        super().__init__(f"connector is locked by {holder}")
        self.holder = holder


@dataclass(frozen=True)
class Lock:
    name: str
    holder: str
    acquired_at: str | None
    #: the Lease's resourceVersion when this was read or written: its holder's release deletes
    #: exactly that version (see :meth:`KubeClient.release_lock`)
    version: str | None = None


#: threads per lane (changes, periodic work); the client's connection pool holds 5 per CPU
THREADS = 4


def _version(obj: Any) -> str | None:
    """An object's resourceVersion as the client library returned it (its metadata is optional)."""
    meta = obj.metadata
    return str(meta.resource_version) if meta is not None and meta.resource_version else None


def lock_name(cluster: str, connector: str) -> str:
    """A DNS-safe Lease name for (ConnectCluster, connector name): names may hold any character."""
    digest = hashlib.sha256(f"{cluster}\x00{connector}".encode()).hexdigest()[:20]
    return LOCK_PREFIX + digest


def load_kube_config() -> None:
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        # the client snapshots $KUBECONFIG at import time; read it now instead
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))  # type: ignore[no-untyped-call]


class _CoreCalls:
    """The three core/v1 calls the operator makes, on the client's own ApiClient machinery.

    Why not ``client.CoreV1Api``: in kubernetes 37 that module holds every core/v1 operation,
    each wrapped by pydantic's validate_call, and importing it costs 22 MiB of RSS and 0.5 s in
    every operator process (measured: ``/usr/bin/time -f %M python -c "from kubernetes.client
    import CoreV1Api"``, 66 MB vs 44 MB for the rest of the client) to reach three endpoints.
    Requests and answers go through the same ``param_serialize`` / ``call_api`` /
    ``response_deserialize`` as the generated methods, so the models and errors are the same.
    """

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    def _call(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        answer: str,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
    ) -> Any:
        request = self._api.param_serialize(
            method=method,
            resource_path=path,
            path_params=params,
            query_params=query or [],
            header_params={"Accept": "application/json", **({"Content-Type": "application/json"} if body else {})},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(*request)
        response.read()  # type: ignore[no-untyped-call]
        answers = {"200": answer, "201": answer}
        return self._api.response_deserialize(response_data=response, response_types_map=answers).data

    def read_namespaced_secret(self, name: str, namespace: str) -> client.V1Secret:
        path = "/api/v1/namespaces/{namespace}/secrets/{name}"
        return self._call("GET", path, {"namespace": namespace, "name": name}, "V1Secret")  # type: ignore[no-any-return]

    def read_namespaced_config_map(self, name: str, namespace: str) -> client.V1ConfigMap:
        path = "/api/v1/namespaces/{namespace}/configmaps/{name}"
        return self._call("GET", path, {"namespace": namespace, "name": name}, "V1ConfigMap")  # type: ignore[no-any-return]

    def create_namespaced_config_map(
        self, namespace: str, body: client.V1ConfigMap, *, dry_run: bool = False
    ) -> client.V1ConfigMap:
        path = "/api/v1/namespaces/{namespace}/configmaps"
        query = [("dryRun", "All")] if dry_run else None
        return self._call("POST", path, {"namespace": namespace}, "V1ConfigMap", body, query)  # type: ignore[no-any-return]


class KubeClient:
    def __init__(self, api_client: client.ApiClient | None = None) -> None:
        self._api = api_client or client.ApiClient()
        self._core = _CoreCalls(self._api)
        self._custom = client.CustomObjectsApi(self._api)
        self._coord = client.CoordinationV1Api(self._api)
        # The client is synchronous: each call holds a thread. Periodic work (a resync's Lease
        # and Secret reads, a thousand at a time) gets threads of its own, so a change never
        # queues behind it (see connectops.concurrency.lanes).
        self._threads = ThreadPoolExecutor(THREADS, thread_name_prefix="kube")
        self._background_threads = ThreadPoolExecutor(THREADS, thread_name_prefix="kube-background")
        #: the one way status is written (a refused write is made once per spec)
        self.statuses = StatusGuard()

    async def _in_thread(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        pool = self._background_threads if BACKGROUND.get() else self._threads
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(pool, call)

    async def _call(self, fn: Any, *args: Any, what: str, **kwargs: Any) -> Any:
        try:
            return await self._in_thread(fn, *args, **kwargs)
        except ApiException as exc:
            if exc.status == 404:
                raise KubeObjectMissing(f"{what} not found") from None
            raise KubeUnavailable(f"{what}: Kubernetes API answered {exc.status} {exc.reason}") from None
        except Exception as exc:  # urllib3/network errors: keep the type, not the payload
            raise KubeUnavailable(f"{what}: {type(exc).__name__}") from None

    # -- reads ----------------------------------------------------------------------------------

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        """One decoded Secret value. Errors name the Secret and key, never the data."""
        return (await self.secret_values(namespace, name, [key]))[key]

    async def secret_values(self, namespace: str, name: str, keys: list[str]) -> dict[str, str]:
        """Several decoded values of one Secret, read once. Errors name the Secret and key, never the data."""
        secret = await self._call(self._core.read_namespaced_secret, name, namespace, what=f"Secret {namespace}/{name}")
        data = secret.data or {}
        for key in keys:
            if key not in data:
                raise SecretKeyMissing(f"Secret {namespace}/{name} has no key {key!r}")
        return {key: base64.b64decode(data[key]).decode() for key in keys}

    async def connect_cluster(self, namespace: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = await self._call(
            self._custom.get_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            "connectclusters",
            name,
            what=f"ConnectCluster {namespace}/{name}",
        )
        return obj

    async def custom_object(self, namespace: str, plural: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = await self._call(
            self._custom.get_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            plural,
            name,
            what=f"{plural} {namespace}/{name}",
        )
        return obj

    async def custom_object_pages(
        self, plural: str, namespace: str | None = None, *, limit: int = 500
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """One of connectops' kinds, a page of ``limit`` at a time (all namespaces when
        ``namespace`` is None): a caller that keeps a little of each object never holds them all.
        (Whole, the 10,000 Connectors of one namespace decoded to ~100 MiB of dicts at once, on
        every Connector deleted: the apply benchmark's peak at 10,000.)"""
        token: str | None = None
        where = f"list {plural} in {namespace}" if namespace else f"list {plural} in all namespaces"
        while True:
            paging: dict[str, Any] = {"limit": limit, **({"_continue": token} if token else {})}
            if namespace is None:
                page = await self._call(
                    self._custom.list_cluster_custom_object, GROUP, VERSION, plural, what=where, **paging
                )
            else:
                page = await self._call(
                    self._custom.list_namespaced_custom_object, GROUP, VERSION, namespace, plural, what=where, **paging
                )
            yield list(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                return

    async def patch_status(
        self,
        namespace: str,
        plural: str,
        name: str,
        status: dict[str, Any],
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Merge-patch ``status`` now (not at the end of a kopf handler): the reset step machine
        must have each step's start and end durable before it moves on. ``meta``: the object's
        metadata as the caller read it (its uid and generation), so that a refused status
        (:class:`StatusRefused`, through :attr:`statuses`) is known without a read."""
        what = f"{plural} {namespace}/{name} status"

        async def write() -> None:
            try:
                await self._in_thread(
                    self._custom.patch_namespaced_custom_object_status,
                    GROUP,
                    VERSION,
                    namespace,
                    plural,
                    name,
                    {"status": status},
                )
            except ApiException as exc:
                causes = refusal_causes(exc.status, exc.body)
                if causes is not None:
                    raise StatusRefused(f"{plural} {namespace}/{name}", causes) from None
                if exc.status == 404:
                    raise KubeObjectMissing(f"{what} not found") from None
                raise KubeUnavailable(f"{what}: Kubernetes API answered {exc.status} {exc.reason}") from None
            except Exception as exc:  # urllib3/network errors: keep the type, not the payload
                raise KubeUnavailable(f"{what}: {type(exc).__name__}") from None

        await self.statuses.write(
            (namespace, plural, name), meta, write, lambda: self.custom_object(namespace, plural, name)
        )

    async def annotate(self, namespace: str, plural: str, name: str, annotations: dict[str, str]) -> None:
        """Merge ``annotations`` into one of connectops' objects (a hand-over mark on another object)."""
        await self._call(
            self._custom.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            plural,
            name,
            {"metadata": {"annotations": annotations}},
            what=f"{plural} {namespace}/{name}",
        )

    async def create_object(self, group: str, version: str, namespace: str, plural: str, body: dict[str, Any]) -> bool:
        """Create a namespaced custom object; False when it already exists (deterministic names
        make creation idempotent). A missing kind (CRD not installed) raises KubeObjectMissing."""
        try:
            await self._in_thread(self._custom.create_namespaced_custom_object, group, version, namespace, plural, body)
        except ApiException as exc:
            if exc.status == 409:
                return False
            if exc.status == 404:
                raise KubeObjectMissing(f"{plural}.{group}/{version} is not served by this cluster") from None
            raise KubeUnavailable(f"create {plural} {namespace}: API answered {exc.status} {exc.reason}") from None
        return True

    async def serves(self, group: str, version: str, plural: str, *, timeout: float) -> bool:
        """Whether the API server serves ``plural`` in ``group/version`` now, by discovery
        (``GET /apis/{group}/{version}``: every authenticated identity may read it, through the
        ``system:discovery`` ClusterRole). A group/version not served answers 404: False."""
        try:
            resources = await self._call(
                self._discover, group, version, timeout, what=f"discovery of {group}/{version}"
            )
        except KubeObjectMissing:
            return False
        return any(r.name == plural for r in resources.resources or [])

    def _discover(self, group: str, version: str, timeout: float) -> client.V1APIResourceList:
        request = self._api.param_serialize(
            method="GET",
            resource_path="/apis/{group}/{version}",
            path_params={"group": group, "version": version},
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        response = self._api.call_api(*request, _request_timeout=timeout)
        response.read()  # type: ignore[no-untyped-call]
        answer: Any = self._api.response_deserialize(
            response_data=response, response_types_map={"200": "V1APIResourceList"}
        )
        resources: client.V1APIResourceList = answer.data
        return resources

    async def get_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = await self._call(
            self._custom.get_namespaced_custom_object,
            group,
            version,
            namespace,
            plural,
            name,
            what=f"{plural} {namespace}/{name}",
        )
        return obj

    async def delete_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> None:
        try:
            await self._call(
                self._custom.delete_namespaced_custom_object,
                group,
                version,
                namespace,
                plural,
                name,
                what=f"{plural} {namespace}/{name}",
            )
        except KubeObjectMissing:
            return

    # -- config maps (offset backups, check verdicts) ---------------------------------------------

    async def config_map(self, namespace: str, name: str) -> client.V1ConfigMap:
        cm: client.V1ConfigMap = await self._call(
            self._core.read_namespaced_config_map, name, namespace, what=f"ConfigMap {namespace}/{name}"
        )
        return cm

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
        """Create a ConfigMap, never replacing one: False when the name is taken (the caller
        decides whether the existing one is its own). Backups are written this way, so a second
        writer (a retried step, a second operator process) can never overwrite the first copy.
        Every one is created ``immutable``: each is a document written once (a backup, a piece
        of a chunked plan), and the API server then refuses any change to its data from anyone,
        the Spark check's identity included, which may patch the verdict ConfigMaps of the same
        namespace and so, by RBAC alone, any ConfigMap there.
        ``dry_run``: the API server checks the create (RBAC, admission, the name) and stores
        nothing, so a backup that could not be written is found before anything is stopped.
        ``owner``: an ownerReference (apiVersion, kind, name, uid): deleted with its owner."""
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(
                name=name,
                namespace=namespace,
                labels=labels or {},
                annotations=annotations or {},
                owner_references=[client.V1OwnerReference(**owner)] if owner else None,
            ),
            data=data,
            binary_data=binary_data,
            immutable=True,
        )
        try:
            await asyncio.to_thread(self._core.create_namespaced_config_map, namespace, body, dry_run=dry_run)
        except ApiException as exc:
            if exc.status == 409:
                return False
            text = f"ConfigMap {namespace}/{name}: API answered {exc.status} {exc.reason}"
            if exc.status == 403:
                raise KubeForbidden(f"{text}: the operator may not create ConfigMaps here") from None
            raise KubeUnavailable(text) from None
        return True

    # -- offset-reset lock ------------------------------------------------------------------------

    async def lock_holder(self, namespace: str, cluster: str, connector: str) -> Lock | None:
        name = lock_name(cluster, connector)
        try:
            lease = await self._call(
                self._coord.read_namespaced_lease, name, namespace, what=f"Lease {namespace}/{name}"
            )
        except KubeObjectMissing:
            return None
        spec = lease.spec
        acquired = spec.acquire_time.isoformat() if spec and spec.acquire_time else None
        return Lock(
            name=name,
            holder=(spec.holder_identity if spec else "") or "",
            acquired_at=acquired,
            version=_version(lease),
        )

    async def acquire_lock(
        self,
        namespace: str,
        cluster: str,
        connector: str,
        holder: str,
        owner: dict[str, Any] | None,
        purpose: str = "offset-reset",
    ) -> Lock:
        """Create the Lease; creation is atomic, so two resets can never both hold it.

        Re-acquiring a lock this holder already has succeeds (a resumed reset after a crash).
        With an ``owner`` (same namespace only: an owner in another namespace makes the garbage
        collector delete the Lease at once) deleting the holder releases the lock too; without
        one the holder releases it, and a Lease whose holder is gone is taken over by
        :meth:`transfer_lock`.
        """
        name = lock_name(cluster, connector)
        now = datetime.now(UTC)
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(
                name=name,
                namespace=namespace,
                labels={LOCK_LABEL: purpose},
                annotations={ANNOTATION_CONNECTOR: connector, ANNOTATION_CLUSTER: cluster},
                owner_references=[owner] if owner else None,
            ),
            spec=client.V1LeaseSpec(holder_identity=holder, acquire_time=now),
        )
        try:
            created = await asyncio.to_thread(self._coord.create_namespaced_lease, namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise KubeUnavailable(f"Lease {namespace}/{name}: API answered {exc.status}") from None
            current = await self.lock_holder(namespace, cluster, connector)
            if current is None:
                return await self.acquire_lock(namespace, cluster, connector, holder, owner, purpose)
            if current.holder != holder:
                raise LockHeld(current.holder) from None
            return current
        return Lock(name=name, holder=holder, acquired_at=now.isoformat(), version=_version(created))

    async def transfer_lock(
        self,
        namespace: str,
        cluster: str,
        connector: str,
        from_holder: str,
        to_holder: str,
        owner: dict[str, Any] | None,
    ) -> Lock:
        """Hand a held Lease from ``from_holder`` to ``to_holder`` without a moment unlocked (a
        restore taking over from the failed reset whose backup it restores; a reset taking over
        from a holder that no longer exists). The replace carries the read resourceVersion, so a
        concurrent change makes it fail instead of overwriting."""
        name = lock_name(cluster, connector)
        lease = await self._call(self._coord.read_namespaced_lease, name, namespace, what=f"Lease {namespace}/{name}")
        current = (lease.spec.holder_identity if lease.spec else "") or ""
        if current == to_holder:
            return Lock(name=name, holder=to_holder, acquired_at=None)
        if current != from_holder:
            raise LockHeld(current)
        now = datetime.now(UTC)
        lease.metadata.owner_references = [owner] if owner else None
        lease.spec.holder_identity = to_holder
        lease.spec.acquire_time = now
        try:
            replaced = await asyncio.to_thread(self._coord.replace_namespaced_lease, name, namespace, lease)
        except ApiException as exc:
            if exc.status == 409:
                raise LockHeld(current) from None
            raise KubeUnavailable(f"Lease {namespace}/{name}: API answered {exc.status}") from None
        return Lock(name=name, holder=to_holder, acquired_at=now.isoformat(), version=_version(replaced))

    async def release_lock(
        self, namespace: str, cluster: str, connector: str, holder: str, version: str | None = None
    ) -> None:
        """Delete the Lease if ``holder`` holds it. The delete names the resourceVersion the
        holder was seen at, so a Lease handed over meanwhile (:meth:`transfer_lock`) is never
        deleted by its former holder. ``version``: the one this holder's own acquire or transfer
        returned; while the Lease is unchanged since, that delete is the whole release (no read
        first: one round trip on the reset's path to its end)."""
        name = lock_name(cluster, connector)
        if version is not None and await self._delete_lease(namespace, name, version):
            return
        for _ in range(3):
            current = await self.lock_holder(namespace, cluster, connector)
            if current is None or current.holder != holder:
                return
            if await self._delete_lease(namespace, name, current.version):
                return
        raise KubeUnavailable(f"Lease {namespace}/{name} kept changing while its holder released it")

    async def _delete_lease(self, namespace: str, name: str, version: str | None) -> bool:
        """Delete the Lease at ``version``: True when it is gone (or already was), False when it
        has changed since (the API server's precondition failed, 409)."""
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version=version))
        try:
            await self._in_thread(self._coord.delete_namespaced_lease, name, namespace, body=options)
        except ApiException as exc:
            if exc.status == 404:
                return True
            if exc.status == 409:
                return False
            raise KubeUnavailable(f"Lease {namespace}/{name}: API answered {exc.status} {exc.reason}") from None
        except Exception as exc:  # urllib3/network errors: keep the type, not the payload
            raise KubeUnavailable(f"Lease {namespace}/{name}: {type(exc).__name__}") from None
        return True
