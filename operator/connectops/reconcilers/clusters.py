"""Resolving a ``ConnectCluster`` reference into a ready-to-use REST client.

Clients are cached per cluster object and rebuilt when its spec or credentials change, so the
HTTP connection pool and the concurrency bound are shared by every Connector of one worker group.

Connector reconciles reuse a resolution for ``CONNECTOPS_CLUSTER_CACHE_SECONDS`` (one resolve is
three API reads: the ConnectCluster and its Secret); without that a full resync of a thousand
Connectors re-read the same objects a thousand times. Resets and the ConnectCluster's own
reconcile always resolve afresh, and one resolve per cluster runs at a time (the others wait and
share it).
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
import time
from dataclasses import dataclass

from pydantic import ValidationError

from connectops.adapters.connect_rest import ConnectClient
from connectops.adapters.kube import KubeClient
from connectops.errors import SpecInvalid
from connectops.models.connect_cluster import Capabilities, ConnectClusterSpec
from connectops.planning.connector import capabilities_for
from connectops.redact import Redactor
from connectops.settings import Settings
from connectops.validation import describe_validation_error


@dataclass
class ClusterHandle:
    namespace: str
    name: str
    spec: ConnectClusterSpec
    client: ConnectClient
    redactor: Redactor
    fingerprint: str
    _caps: Capabilities | None = None
    _version: str | None = None
    _caps_at: float = 0.0

    async def capabilities(self, ttl: float) -> tuple[str, Capabilities]:
        """Worker version and capabilities, re-read at most every ``ttl`` seconds."""
        if self._caps is None or self._version is None or time.monotonic() - self._caps_at > ttl:
            info = await self.client.server_info()
            self._version = info.version
            self._caps = capabilities_for(info.version)
            self._caps_at = time.monotonic()
        return self._version, self._caps


class ClusterRegistry:
    def __init__(self, kube: KubeClient, settings: Settings) -> None:
        self._kube = kube
        self._settings = settings
        self._handles: dict[tuple[str, str], ClusterHandle] = {}
        self._resolved_at: dict[tuple[str, str], float] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def resolve(self, namespace: str, name: str, *, max_age: float | None = None) -> ClusterHandle:
        """The cluster's handle, re-read from the API if older than ``max_age`` seconds (default:
        the settings' cluster cache; 0 = always)."""
        key = (namespace, name)
        age = self._settings.cluster_cache_seconds if max_age is None else max_age
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            handle = self._handles.get(key)
            if handle is not None and time.monotonic() - self._resolved_at.get(key, 0.0) < age:
                return handle
            handle = await self._resolve(namespace, name)
            self._resolved_at[key] = time.monotonic()
            return handle

    async def _resolve(self, namespace: str, name: str) -> ClusterHandle:
        obj = await self._kube.connect_cluster(namespace, name)
        try:
            spec = ConnectClusterSpec.model_validate(obj.get("spec") or {})
        except ValidationError as exc:
            raise SpecInvalid(f"ConnectCluster {name} is invalid: {describe_validation_error(exc)}") from None
        secrets: list[str] = []
        auth: tuple[str, str] | None = None
        if spec.basic_auth:
            ba = spec.basic_auth
            values = await self._kube.secret_values(namespace, ba.secret_name, [ba.username_key, ba.password_key])
            user, password = values[ba.username_key], values[ba.password_key]
            auth = (user, password)
            secrets.append(password)
        verify: bool | str = True
        ca_pem = ""
        if spec.tls:
            if spec.tls.insecure_skip_verify:
                verify = False
            elif spec.tls.ca_secret_ref:
                ca_pem = await self._kube.secret_value(
                    namespace, spec.tls.ca_secret_ref.name, spec.tls.ca_secret_ref.key
                )
        fingerprint = hashlib.sha256(
            "\x00".join([spec.model_dump_json(), auth[0] if auth else "", *secrets, ca_pem]).encode()
        ).hexdigest()
        key = (namespace, name)
        handle = self._handles.get(key)
        if handle is not None and handle.fingerprint == fingerprint:
            return handle
        if ca_pem:
            # httpx wants a path; the file holds a public CA certificate, not a secret
            with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as fh:
                fh.write(ca_pem)
                verify = fh.name
        redactor = Redactor(secrets)
        client = ConnectClient(
            spec.rest_url,
            auth=auth,
            verify=verify,
            timeout=spec.request_timeout_seconds,
            max_concurrency=self._settings.connect_concurrency,
            redactor=redactor,
        )
        if handle is not None:
            await handle.client.aclose()
        handle = ClusterHandle(namespace, name, spec, client, redactor, fingerprint)
        self._handles[key] = handle
        return handle

    def forget(self, namespace: str, name: str) -> ClusterHandle | None:
        self._resolved_at.pop((namespace, name), None)
        return self._handles.pop((namespace, name), None)

    async def aclose(self) -> None:
        for handle in self._handles.values():
            await handle.client.aclose()
        self._handles.clear()
