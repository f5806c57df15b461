"""Resolving a ``ConnectCluster`` reference into a ready-to-use REST client.

Clients are cached per cluster object and rebuilt when its spec or credentials change, so the
HTTP connection pool and the concurrency bound are shared by every Connector of one worker group.

Resyncs observe a worker group with one call: the expanded listing
(``GET /connectors?expand=status&expand=info``) is kept on the handle for half the resync period
and shared by the Connectors that reach the group through this ConnectCluster object. A handle
belongs to one namespace's object and is rebuilt when its credentials change, so no namespace
reads what another's credentials fetched.

Connector reconciles reuse a resolution for ``CONNECTOPS_CLUSTER_CACHE_SECONDS`` (one resolve is
three API reads: the ConnectCluster and its Secret); without that a full resync of a thousand
Connectors re-read the same objects a thousand times. Resets and the ConnectCluster's own
reconcile always resolve afresh, and one resolve per cluster runs at a time (the others wait and
share it).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from pydantic import ValidationError

from connectops.adapters.addresses import AddressGuard
from connectops.adapters.connect_rest import ConnectApi, ConnectClient, ConnectError, ListedConnector, Plugin
from connectops.adapters.kafka.status_topic import StatusTopic
from connectops.adapters.kube import KubeClient
from connectops.concurrency.gather import each
from connectops.errors import SpecInvalid, UrlNotAllowed
from connectops.failures import ConnectopsError
from connectops.models.base import SecretKeyRef
from connectops.models.connect_cluster import Capabilities, ConnectClusterSpec
from connectops.planning.connector import capabilities_for
from connectops.planning.ownership import Claim
from connectops.planning.urls import ApiServer, UrlPolicy
from connectops.redact import Redactor, redact_url
from connectops.settings import Settings
from connectops.validation import describe_validation_error

log = logging.getLogger(__name__)

#: how long a replaced Connect client stays open for the calls already made through it
RETIRED_CLIENT_GRACE_SECONDS = 600.0


class ConnectClientFactory(Protocol):
    """Builds the client of one worker group; :class:`ConnectClient` itself is the default, tests
    pass a factory of in-memory doubles (``tests/doubles``) to run the reconcilers without a worker."""

    def __call__(  # noqa: PLR0913 - ConnectClient's keyword-only settings, as its factory
        self,
        base_url: str,
        *,
        auth: tuple[str, str] | None,
        verify: bool | str,
        timeout: float,
        listing_timeout: float,
        max_concurrency: int,
        max_response_bytes: int,
        redactor: Redactor,
        address_guard: AddressGuard | None,
    ) -> ConnectApi: ...


@dataclass
class ClusterHandle:
    namespace: str
    name: str
    spec: ConnectClusterSpec
    client: ConnectApi
    redactor: Redactor
    fingerprint: str
    #: the Kafka client settings: spec.kafka.config with spec.kafka.configFrom's Secret values
    kafka_config: dict[str, str] = field(default_factory=dict)
    _caps: Capabilities | None = None
    _version: str | None = None
    _caps_at: float = 0.0
    _kafka_cluster_id: str | None = None
    _plugins: list[Plugin] | None = None
    _plugins_at: float = 0.0
    _status_reader: StatusTopic | None = None
    #: the expanded listing (None: not read, or the worker could not give it), and when
    _listing: dict[str, ListedConnector] | None = None
    _listing_at: float = float("-inf")
    #: how long the worker took to give the last one (or to fail to)
    _listing_took: float = 0.0
    _listing_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: one reader at a time of what the worker says of itself (version, plugins)
    _info_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def listing(
        self, ttl: float, keep: Callable[[str], bool] = lambda _: True, *, settled: asyncio.Event | None = None
    ) -> Mapping[str, ListedConnector] | None:
        """The worker group's connectors that ``keep`` names (the ones this namespace's objects
        manage: a worker shared by many teams lists theirs too, and none of it is kept) with
        their config and status, read at most every ``ttl`` seconds by one caller while the
        others wait and share it; None when the worker cannot answer it (too large for the
        response cap, a worker before 2.3, unreachable): the caller then reads its connector
        alone, and the listing is not asked again before ``ttl`` has passed, so a worker that
        cannot answer it costs one call per period.

        Nor is it asked again sooner than the last one took: Connect builds it in time quadratic
        in its connectors, and at 10,000 an answer took tens of seconds, so with half a period
        alone the resumes of a restart still at work when it expired asked again (3 listings,
        161 s, apply_bench). A worker that needs that long is then busy listing at most half the
        time. Safe because the listing only ever decides that nothing is to be done; a drift is
        noticed later by up to the listing's own duration.

        ``settled``: the answer is filtered by ``keep`` only once it is set. A start asks for the
        listing while it still reads the Connectors' claims (what ``keep`` consults): filtered
        before they are all read, it would drop connectors whose objects came later, and each
        of them would then be read alone."""
        async with self._listing_lock:
            if time.monotonic() - self._listing_at < max(ttl, self._listing_took):
                return self._view()
            started = time.monotonic()
            # let the old answer go before the new is read: no one reads it meanwhile (they wait
            # on the lock), and at 10,000 connectors it is ~10 MiB kept beside the new one's build
            self._listing = None
            listed: Mapping[str, ListedConnector] | None = None
            try:
                # filtered as it is parsed, once the claims are read: at a start the answer waits
                # for them as bytes (parsed whole, a 50,000-connector listing is ~140 MiB more)
                wait = None if settled is None or settled.is_set() else settled.wait
                listed = await self.client.list_expanded(keep, settled=wait)
            except ConnectError as exc:
                log.info(
                    "ConnectCluster %s/%s: no expanded listing, connectors read one by one: %s",
                    self.namespace,
                    self.name,
                    exc,
                )
            # its age and cost are the answer's, with the wait for the claims: not exact, and
            # only at a start (the answer is not read sooner again than it took)
            self._listing_at = time.monotonic()
            self._listing_took = self._listing_at - started
            self._listing = None if listed is None else {name: entry for name, entry in listed.items() if keep(name)}
            return self._view()

    def _view(self) -> Mapping[str, ListedConnector] | None:
        # shared by every Connector of the handle: read-only, so no caller changes what the
        # others read (forget_listed, the one writer, changes it under the view)
        return None if self._listing is None else MappingProxyType(self._listing)

    def forget_listed(self, connector: str) -> None:
        """Forget what the listing says of ``connector``: the operator has just written to it."""
        if self._listing is not None:
            self._listing.pop(connector, None)

    def status_reader(self) -> StatusTopic | None:
        """The reader of the workers' status topic (one per handle: a rotated Secret makes a new
        handle), when ``spec.kafka`` says how to reach it."""
        if self.spec.kafka is None:
            return None
        if self._status_reader is None:
            self._status_reader = StatusTopic(self.spec.kafka.bootstrap_servers, self.kafka_config, timeout_s=5)
        return self._status_reader

    async def capabilities(self, ttl: float) -> tuple[str, Capabilities]:
        """Worker version and capabilities, re-read at most every ``ttl`` seconds, by one caller
        while the others wait (at start-up every Connector asks at once: 1,000 identical
        ``GET /`` before the first answer, without the lock)."""
        async with self._info_lock:
            if self._caps is None or self._version is None or time.monotonic() - self._caps_at > ttl:
                info = await self.client.server_info()
                self._version = info.version
                self._caps = capabilities_for(info.version)
                self._kafka_cluster_id = info.kafka_cluster_id
                self._caps_at = time.monotonic()
            return self._version, self._caps

    async def plugins(self, ttl: float) -> list[Plugin]:
        """The worker's plugins, every installed version, re-read at most every ``ttl`` seconds: a
        missing plugin or version is re-checked on this slow timer, never in a retry loop."""
        async with self._info_lock:
            if self._plugins is None or time.monotonic() - self._plugins_at > ttl:
                self._plugins = await self.client.list_plugins()
                self._plugins_at = time.monotonic()
            return self._plugins

    async def lock_scope(self, ttl: float) -> str:
        """Whose reset lock guards a connector reached through this handle: one per Kafka cluster
        and connector name, so that an alias ConnectCluster (another name, URL or Secret for the
        same workers) takes the same lock, not a second one."""
        cluster_id = await self.kafka_cluster_id(ttl)
        return f"kafka/{cluster_id}" if cluster_id else self.name

    async def kafka_cluster_id(self, ttl: float) -> str:
        """The Kafka cluster behind the worker group, as the worker reports it: what makes two
        ConnectCluster objects (an alias, another namespace's) the same place for connectors."""
        await self.capabilities(ttl)
        return self._kafka_cluster_id or ""


def _ca_ref(spec: ConnectClusterSpec) -> SecretKeyRef | None:
    """The Secret key holding the CA to verify Connect with; none when verification is off."""
    return spec.tls.ca_secret_ref if spec.tls and not spec.tls.insecure_skip_verify else None


class ClusterRegistry:
    def __init__(
        self,
        kube: KubeClient,
        settings: Settings,
        *,
        client_factory: ConnectClientFactory = ConnectClient,
        api_servers: Iterable[tuple[str, int]] = (),
    ) -> None:
        """``api_servers``: where this operator reaches the Kubernetes API server (host, port),
        which no restUrl may name unless the allowlist does (planning/urls.py)."""
        self._kube = kube
        self._settings = settings
        self._client_factory = client_factory
        self._policy = UrlPolicy.build(settings.allowed_rest_urls, (ApiServer(h, p) for h, p in api_servers))
        for ignored in self._policy.ignored:
            log.error("allowlist entry %s: it admits nothing (CONNECTOPS_ALLOWED_REST_URLS)", ignored)
        self._handles: dict[tuple[str, str], ClusterHandle] = {}
        self._resolved_at: dict[tuple[str, str], float] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._retired: set[ConnectApi] = set()
        self._closing: set[asyncio.Task[None]] = set()

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

    async def prefetch_listing(
        self, namespace: str, name: str, ttl: float, keep: Callable[[str], bool], *, settled: asyncio.Event
    ) -> None:
        """Asks a ConnectCluster's expanded listing as soon as a start's LIST of Connectors shows
        one on it, for the resumes to share. Connect builds it in time quadratic in its
        connectors (20-61 s at 10,000), and asked by the first resume it began only once the
        whole LIST was read and kopf had started (~6 s later at 10,000). The answer is kept only
        for what ``keep`` names once ``settled`` is set (ClusterHandle.listing). Nothing acts on
        it here; a failure is the resumes' to meet and report."""
        try:
            handle = await self.resolve(namespace, name)
            await handle.listing(ttl, keep, settled=settled)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("ConnectCluster %s/%s: no listing asked ahead of the resumes: %s", namespace, name, exc)

    def _checked_spec(self, name: str, obj: Any) -> ConnectClusterSpec:
        """The ConnectCluster's spec, refused before any request when invalid or when a URL it
        names is outside the operator's allowlist."""
        try:
            spec = ConnectClusterSpec.model_validate(obj.get("spec") or {})
        except ValidationError as exc:
            raise SpecInvalid(f"ConnectCluster {name} is invalid: {describe_validation_error(exc)}") from None
        urls = [("restUrl", spec.rest_url)]
        urls += [("workerMetrics URL", url) for url in (spec.worker_metrics.urls if spec.worker_metrics else [])]
        for what, url in urls:
            refused = self._policy.check_url(url)
            if refused is not None:
                # the URL as shown: whatever it holds before its host is masked
                raise UrlNotAllowed(
                    f"ConnectCluster {name}: {what} {redact_url(url)[:200]} {refused}; no request was made"
                )
        return spec

    async def _secrets(self, namespace: str, spec: ConnectClusterSpec) -> dict[str, dict[str, str]]:
        """Every Secret value the spec names, by Secret and key: each Secret read once, all at
        once (a reset reads its cluster afresh before it locks, while its connector still runs).
        A missing one fails as the first of them in the spec's order would have."""
        refs: list[tuple[str, str]] = []
        if spec.basic_auth:
            ba = spec.basic_auth
            refs += [(ba.secret_name, ba.username_key), (ba.secret_name, ba.password_key)]
        if spec.kafka is not None:
            refs += [(ref.name, ref.key) for _, ref in sorted(spec.kafka.config_from.items())]
        if ca_ref := _ca_ref(spec):
            refs.append((ca_ref.name, ca_ref.key))
        wanted: dict[str, list[str]] = {}
        for name, key in refs:
            keys = wanted.setdefault(name, [])
            if key not in keys:
                keys.append(key)
        values = await each(self._kube.secret_values(namespace, n, k) for n, k in wanted.items())
        return dict(zip(wanted, values, strict=True))

    async def _resolve(self, namespace: str, name: str) -> ClusterHandle:
        spec = self._checked_spec(name, await self._kube.connect_cluster(namespace, name))
        ca_ref = _ca_ref(spec)
        read = await self._secrets(namespace, spec)
        secrets: list[str] = []
        auth: tuple[str, str] | None = None
        if spec.basic_auth:
            ba = read[spec.basic_auth.secret_name]
            user, password = ba[spec.basic_auth.username_key], ba[spec.basic_auth.password_key]
            auth = (user, password)
            secrets.append(password)
        kafka_config: dict[str, str] = {}
        if spec.kafka is not None:
            kafka_config = dict(spec.kafka.config)
            for setting, ref in sorted(spec.kafka.config_from.items()):
                # a credential (sasl.password, ssl.key.password): redacted wherever it could surface
                kafka_config[setting] = read[ref.name][ref.key]
                secrets.append(kafka_config[setting])
        verify: bool | str = True
        ca_pem = ""
        if spec.tls and spec.tls.insecure_skip_verify:
            verify = False
        elif ca_ref:
            ca_pem = read[ca_ref.name][ca_ref.key]
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
        client = self._client_factory(
            spec.rest_url,
            auth=auth,
            verify=verify,
            timeout=spec.request_timeout_seconds,
            listing_timeout=spec.listing_timeout_seconds,
            max_concurrency=self._settings.connect_concurrency,
            max_response_bytes=self._settings.connect_max_response_bytes,
            redactor=redactor,
            address_guard=self._policy.guard(spec.rest_url),
        )
        if handle is not None:
            self._retire(handle.client)
        handle = ClusterHandle(namespace, name, spec, client, redactor, fingerprint, kafka_config)
        self._handles[key] = handle
        return handle

    async def same_kafka_cluster(self, handle: ClusterHandle, claims: Iterable[Claim], ttl: float) -> list[Claim]:
        """The claims whose ConnectCluster reaches the same Kafka cluster as ``handle`` (the
        worker's ``kafka_cluster_id``: a user cannot forge it, unlike names or URLs, which aliases
        and DNS make unequal for one worker). Conservative: two worker groups on one Kafka
        cluster count as one place per connector name. A claim whose ConnectCluster cannot be
        resolved or reached cannot act either and is left out."""
        mine = await handle.kafka_cluster_id(ttl)
        same = []
        for claim in claims:
            try:
                other = await self.resolve(claim.namespace, claim.cluster)
                if await other.kafka_cluster_id(ttl) == mine:
                    same.append(claim)
            except ConnectopsError:
                continue
        return same

    def _retire(self, old: ConnectApi) -> None:
        """Close a replaced client later, not now: a reconcile or a reset step that resolved the
        handle a moment ago may still be in a call on it (a rotated Secret must not fail it)."""
        self._retired.add(old)

        def close() -> None:
            if old in self._retired:
                self._retired.discard(old)
                task = asyncio.ensure_future(old.aclose())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

        asyncio.get_running_loop().call_later(RETIRED_CLIENT_GRACE_SECONDS, close)

    def fingerprint(self, namespace: str, name: str) -> str | None:
        """The digest of the spec and Secret values the cluster's current client was built from
        (None: not resolved yet); it moves when a rotated Secret made a new client."""
        handle = self._handles.get((namespace, name))
        return handle.fingerprint if handle is not None else None

    def drop(self, namespace: str, name: str) -> None:
        """The ConnectCluster is deleted: nothing may resolve it from the cache any more; its
        client is closed once calls already on it had time to end."""
        handle = self.forget(namespace, name)
        if handle is not None:
            self._retire(handle.client)

    def forget(self, namespace: str, name: str) -> ClusterHandle | None:
        self._resolved_at.pop((namespace, name), None)
        return self._handles.pop((namespace, name), None)

    async def aclose(self) -> None:
        for handle in self._handles.values():
            await handle.client.aclose()
            if handle._status_reader is not None:
                handle._status_reader.close()
        self._handles.clear()
        for old in list(self._retired):
            await old.aclose()
        self._retired.clear()
