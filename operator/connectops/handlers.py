"""kopf handlers: thin bindings from Kubernetes events to the reconcilers.

Every body here does the same three things: find the reconciler, run it under a per-object
lock (change handlers and resync timers must not interleave on one object), then publish the
status diff and translate a failure into kopf's retry via :func:`connectops.errors.as_kopf_error`.

Why one module of over 600 lines: importing it is what fills kopf's registry (``connectops run``
imports this one module, and the e2e harness asserts it is not imported before its settings are
set), and the bindings of the three kinds share the process's Runtime, its locks and indexes.
What is not a binding is the start-up's LIST of claims and its early listings
(:func:`_seed_claims`): the first candidate to move out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, cast

import kopf
from kopf._cogs.structs.references import match_namespace, select_specific_namespaces

from connectops import kopf_fixes, memory, metrics
from connectops.adapters.addresses import api_server_endpoints
from connectops.adapters.kube import KubeClient, KubeObjectMissing, load_kube_config
from connectops.diffbase import DigestDiffBaseStorage
from connectops.errors import as_kopf_error
from connectops.indexes import Indexes
from connectops.models import GROUP, VERSION
from connectops.object_metrics import OBJECTS
from connectops.planning import verbs
from connectops.planning.on_create import renamed_from
from connectops.planning.ownership import Claim
from connectops.planning.secrets import (
    CONNECT_CLUSTER,
    CONNECTOR,
    RotationBook,
    SecretUse,
    cluster_secret_keys,
    connector_secret_keys,
)
from connectops.priority import background
from connectops.reconcilers.checks import CheckRunner, check_defaults
from connectops.reconcilers.clusters import ClusterRegistry
from connectops.reconcilers.common import EmitEvent, KeyedSlots, Outcome, status_patch
from connectops.reconcilers.connect_cluster import ConnectClusterReconciler
from connectops.reconcilers.connector import ConnectorObject, ConnectorReconciler, claim_of, claimed_name
from connectops.reconcilers.group_failover import GroupFailoverReconciler
from connectops.reconcilers.offset_reset import OffsetResetExecutor
from connectops.reconcilers.secret_rotation import SecretRotation
from connectops.reconcilers.sweep import Backlog, Later, sweep
from connectops.settings import load

SETTINGS = load()
kopf_fixes.install()
kopf_fixes.bound_requests(SETTINGS.kube_api_concurrency)
kopf_fixes.strip_managed_fields()
_EVENT_MESSAGE_LIMIT = 1000
#: Connector resyncs at work at once (see Runtime.periodic_slots): 8 keep 1,000 within 10 s
PERIODIC_CONCURRENCY = 8
#: Connector resumes at work at once after a start (see Runtime.resumes)
RESUME_CONCURRENCY = 32
#: the shortest time between two of a Connector's own next looks (see Runtime.later): looks that
#: keep finding their moment a hair early (the timer's clock and the plan's differ) cannot spin
LOOK_SPACING_SECONDS = 0.5
#: Connector changes at work at once per ConnectCluster (see Runtime.change_slots): four times
#: the default of Connect calls in flight to one cluster (CONNECTOPS_CONNECT_CONCURRENCY), so the
#: calls never wait for a change to be let in
CHANGE_CONCURRENCY = 32
logger = logging.getLogger(__name__)


class _QuietIndexing(logging.Filter):
    """kopf logs each handler's success at INFO; for the index-keeping event handlers that is a
    line per watch event of every object (each status write is one), which says nothing."""

    QUIET = frozenset({"Handler 'connector_event' succeeded.", "Handler 'cluster_event' succeeded."})

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in self.QUIET


logging.getLogger("kopf.objects").addFilter(_QuietIndexing())


class Runtime:
    """Process-wide collaborators, built once the operator starts (kube config is loaded then)."""

    def __init__(self) -> None:
        load_kube_config()
        self.kube = KubeClient()
        # no restUrl may lead the operator to its own API server with a user's request
        self.clusters = ClusterRegistry(self.kube, SETTINGS, api_servers=api_server_endpoints())
        self.checks = CheckRunner(self.kube, SETTINGS, check_defaults(SETTINGS))
        # long enough for a retried or queued reconcile to still report what the watch saw
        book = RotationBook(ttl=max(2 * SETTINGS.resync_seconds, 60.0))
        self.connectors = ConnectorReconciler(self.kube, self.clusters, SETTINGS, self.checks, book)
        self.connect_clusters = ConnectClusterReconciler(self.clusters, SETTINGS, book)
        self.resets = OffsetResetExecutor(self.kube, self.clusters, SETTINGS, checks=self.checks)
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        #: every Connector's claim, body and cluster; who reads which Secret (connectops.indexes)
        self.indexes = Indexes(
            connector_claims, connectors_by_cluster, connector_secrets, cluster_secrets, _RESYNC_PARTS, connector_asks
        )
        #: at most PERIODIC_CONCURRENCY Connector resyncs at work at once: a thousand in flight
        #: share the one event loop with a user's change, which then waits a whole round of them
        #: at every await (the apply benchmark's p99 at 1,000 Connectors was 7-9 s)
        self.periodic_slots = asyncio.Semaphore(PERIODIC_CONCURRENCY)
        #: at most CHANGE_CONCURRENCY Connector changes at work at once per ConnectCluster: a
        #: GitOps sync creating thousands at once has one kopf worker each (up to its limit), and
        #: each at work holds its models and reads while it waits for the cluster's Connect calls
        #: (3,000 creations at once: peak RSS 153 -> 133 MiB; benchmarks/README.md, "10,000
        #: Connectors"). Per cluster, so one tenant's unreachable workers cannot hold another
        #: tenant's changes back.
        self.change_slots = KeyedSlots(CHANGE_CONCURRENCY)
        #: every Connector's start-up reconcile, queued by its resume handler (sweep.Backlog says
        #: why not in kopf's handler), at most RESUME_CONCURRENCY at once: kopf releases every
        #: object of its first listing together, and each one at work holds its reads and models
        self.resumes = Backlog(
            lambda uid: _resync_connector(uid, self.indexes, self.indexes.claims, periodic=False),
            workers=RESUME_CONCURRENCY,
        )
        #: a Connector's next look when its automatic restarts need it before the sweep comes by
        #: (a restart falls due in seconds, the sweep comes once a period): a resync of that one
        #: object, through the same path, asked by the reconcile before it (Outcome.look_at)
        self.later = Later(
            lambda uid: _resync_connector(uid, self.indexes, self.indexes.claims), spacing=LOOK_SPACING_SECONDS
        )
        #: set once the startup LIST of claims is read (the start-up listings filter by them)
        self.claims_read = asyncio.Event()
        #: the listings asked while that LIST is read (ClusterRegistry.prefetch_listing)
        self.warming: set[asyncio.Task[None]] = set()
        self.rotation = SecretRotation(
            self.kube,
            self.clusters,
            self.connectors,
            self.connect_clusters,
            self.locks,
            SETTINGS.connect_concurrency,
            book,
        )
        #: the C heap's free pages go back to the system once a minute (see connectops.memory)
        self.trimmer = asyncio.get_running_loop().create_task(
            memory.trim_forever(SETTINGS.malloc_trim_seconds), name="malloc-trim"
        )


_runtime: Runtime | None = None


def runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        _runtime = Runtime()
    return _runtime


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    # kopf's bookkeeping lives in annotations under our own prefix, not in the user's status
    # (kubectl get -o yaml shows what the operator decided, nothing else); the progress ones exist
    # only while a handler is retrying, so GitOps tools see no drift between reconciles.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    # Events say who wrote them ("From" in kubectl describe): this operator, not its framework
    settings.posting.reporting_component = "connectops"
    # digests, not a copy of the spec: a large config must never make the object undeletable
    settings.persistence.diffbase_storage = DigestDiffBaseStorage(prefix=GROUP, key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = max(settings.execution.max_workers or 0, 4)
    settings.watching.server_timeout = 300
    # kopf's first listing of a kind, a page at a time: unpaged, a start with 10,000 Connectors
    # decoded one 10,000-object answer at once and kept it while it handed the objects out
    settings.watching.chunk_size = LIST_PAGE
    # an object's finalizer stays until its timers have returned; a timer caught mid-run when
    # the object is deleted is looked at again after this long (kopf's default, 60 s, kept a
    # deleted ConnectCluster or OffsetReset for a minute after its run had ended)
    settings.background.cancellation_polling = 1.0
    # Without kopf indexes (connectops.indexes) nothing holds kopf's workers until the whole
    # first listing is seen, so a bound on them holds: a start with 10,000 Connectors no longer
    # has 10,000 workers (each with its event's body) alive at once. A worker lets its slot go
    # once idle this long (kopf's 5 s would make a start wait that long per slot).
    settings.queueing.worker_limit = SETTINGS.kopf_workers
    settings.queueing.idle_timeout = 0.1
    # before kopf's first request: each connection it opens from here on gets the smaller buffer
    memory.smaller_tls_buffers()
    rt = runtime()
    # before kopf watches anything: every claim is known before the first Connector acts
    seeded = await _seed_claims(rt)
    logger.info("claims of %d Connectors read before watching", seeded)


async def _seed_claims(rt: Runtime) -> int:
    """The startup LIST of the watched namespaces' Connectors, a page at a time, keeping their
    claims only (connectops.indexes). The namespaces are kopf's (``connectops run`` passes them
    in CONNECTOPS_WATCH_NAMESPACES, one pattern a line; unset: every namespace). Listing every
    namespace for a pattern is what kopf does too; a namespaced install names its namespaces."""
    patterns = [p for p in os.environ.get("CONNECTOPS_WATCH_NAMESPACES", "").splitlines() if p.strip()]
    literal = select_specific_namespaces(patterns)
    named = patterns and len(literal) == len(patterns)
    scopes: list[str | None] = [str(n) for n in sorted(literal)] if named else [None]

    def watched(body: Mapping[str, Any]) -> bool:
        namespace = (body.get("metadata") or {}).get("namespace", "")
        return not patterns or any(match_namespace(namespace, p) for p in patterns)

    seeded = 0
    warmed: set[tuple[str, str]] = set()
    try:
        for scope in scopes:
            async for page in rt.kube.custom_object_pages("connectors", scope):
                kept = [body for body in page if scope is not None or watched(body)]
                seeded += rt.indexes.seed_claims(kept)
                for body in kept:
                    for cluster in connectors_by_cluster(body) or {}:
                        if cluster not in warmed:
                            warmed.add(cluster)
                            # for the resumes to share (ClusterRegistry.prefetch_listing says why)
                            task = asyncio.get_running_loop().create_task(
                                rt.clusters.prefetch_listing(
                                    *cluster,
                                    SETTINGS.resync_seconds / 2,
                                    _named_here(rt.indexes.claims, cluster[0]),
                                    settled=rt.claims_read,
                                )
                            )
                            rt.warming.add(task)
                            task.add_done_callback(rt.warming.discard)
    finally:
        rt.claims_read.set()
    return seeded


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In-cluster service account first, then $KUBECONFIG read at login time (kopf's default
    client-library login snapshots $KUBECONFIG when the library is imported)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.cleanup()
async def shutdown(**_: Any) -> None:
    global _runtime
    if _runtime is not None:
        # batches not launched yet stay QUEUED in their Connectors' status: the next process
        # requests them again (ConnectorReconciler._check)
        await _runtime.checks.batches.close()
        await _runtime.resumes.close()
        await _runtime.later.close()
        for task in _runtime.warming:
            task.cancel()
        await _runtime.clusters.aclose()
        _runtime.trimmer.cancel()
        _runtime = None


def _emitter(body: Any) -> EmitEvent:
    def emit(type_: str, reason: str, message: str) -> None:
        kopf.event(body, type=type_, reason=reason, message=message[:_EVENT_MESSAGE_LIMIT])

    return emit


def _retry_later(exc: BaseException, retry: int) -> kopf.TemporaryError | kopf.PermanentError:
    return as_kopf_error(exc, retry=retry, base=SETTINGS.retry_seconds, maximum=SETTINGS.retry_max_seconds)


def _publish(outcome: Outcome, body: Any, patch: kopf.Patch, retry: int, kind: str) -> None:
    for key, value in status_patch(body.get("status") or {}, outcome.status).items():
        patch.status[key] = value
    if outcome.error is not None:
        metrics.RECONCILE_ERRORS.labels(kind=kind, error=type(outcome.error).__name__).inc()
        raise _retry_later(outcome.error, retry)


# -- Connector -----------------------------------------------------------------------------------


ClaimIndex = Mapping[str, Sequence[Claim]]
#: the Events a resync emits when it put Connect back to the spec
_DRIFT_REASONS = frozenset({"DriftCorrected", "StateDriftCorrected"})


def connector_claims(body: Mapping[str, Any]) -> dict[str, Claim] | None:
    """A Connector object by the connector it names (the claims index, connectops.indexes: seeded
    by the startup LIST before any handler runs, so no object writes before it can see its rivals)."""
    meta, spec = body.get("metadata") or {}, body.get("spec") or {}
    name = str(meta.get("name") or "")
    claim = claim_of(
        str(meta.get("namespace") or ""),
        name,
        str(meta.get("uid") or ""),
        str(meta.get("creationTimestamp") or ""),
        spec,
    )
    return {claimed_name(name, spec): claim} if claim else None


async def _jitter(stopped: kopf.DaemonStopped) -> bool:
    """A resync timer's random wait before its run; True when the object was deleted (or the
    operator is stopping) meanwhile, and the run should not start.

    Jitter: kopf fires every object's timer on the same period, so the objects seen at start-up
    would resync in one burst forever; a random delay of up to a tenth of the period (before the
    object's lock is taken, so no change waits for it) spreads them, and since the next run is
    timed from the end of this one, they stay spread. The wait ends early on deletion because
    kopf keeps the object's finalizer until a running timer returns."""
    await stopped.wait(random.uniform(0, SETTINGS.resync_seconds * 0.1))
    return bool(stopped)


def _claims() -> ClaimIndex:
    return runtime().indexes.claims


async def _confirm(claims: list[Claim]) -> None:
    """Read afresh the claims only the startup LIST vouches for: an object deleted between that
    LIST and kopf's own listing gets no event, and its claim would stop a Connector forever."""
    rt = runtime()
    for claim in rt.indexes.unconfirmed(claims):
        try:
            current = await rt.kube.custom_object(claim.namespace, "connectors", claim.name)
        except KubeObjectMissing:
            current = {}
        if (current.get("metadata") or {}).get("uid") != claim.uid:
            rt.indexes.forget_connector(claim.uid)


def _rivals(claims: ClaimIndex, body: Any) -> list[Claim]:
    return list(claims.get(claimed_name(body["metadata"]["name"], body.get("spec") or {}), []))


def _old_claims(claims: ClaimIndex, body: Any) -> list[Claim]:
    """The Connector objects naming the connector this one renames (spec.offsets.from)."""
    old = renamed_from(body.get("spec"))
    return list(claims.get(old, [])) if old is not None else []


def _named_here(claims: ClaimIndex, namespace: str) -> Callable[[str], bool]:
    """Whether an object of ``namespace`` names a connector: what a shared listing keeps."""
    return lambda connector: any(claim.namespace == namespace for claim in claims.get(connector, []))


async def _reconcile_connector(
    body: Any,
    patch: kopf.Patch,
    retry: int,
    claims: ClaimIndex,
    *,
    periodic: bool,
    listed: bool = False,
    locked: bool = False,
) -> None:
    rt = runtime()
    corrected: list[str] = []
    emit = _emitter(body)

    def counting(type_: str, reason: str, message: str) -> None:
        if reason in _DRIFT_REASONS:
            corrected.append(reason)
        emit(type_, reason, message)

    with metrics.RECONCILE_SECONDS.labels(kind="Connector").time():
        # a resync takes one of the periodic slots once it holds the object, a change one of its
        # cluster's change slots (waiting for a busy object must not hold a slot: a reset holds
        # its Connector for its whole run); a start-up resume is bounded by its Backlog already
        slot: contextlib.AbstractAsyncContextManager[Any]
        if periodic:
            slot = rt.periodic_slots
        elif locked:
            slot = contextlib.nullcontext()
        else:
            slot = rt.change_slots.hold(_cluster_of(body))
        lock: contextlib.AbstractAsyncContextManager[Any] = (
            contextlib.nullcontext() if locked else rt.locks[body["metadata"]["uid"]]
        )
        async with lock, slot:
            await _confirm([*_rivals(claims, body), *_old_claims(claims, body)])
            # read once a slot is held: at start-up every object waits here at once, and what
            # each built before its turn was held by all of them together (a restart with
            # 10,000 Connectors peaked ~60 MiB higher, restart_bench.py)
            obj = ConnectorObject.from_body(body)
            outcome = await rt.connectors.reconcile(
                obj,
                counting,
                periodic=periodic,
                listed=_named_here(claims, obj.namespace) if listed else None,
                rivals=_rivals(claims, body),
                old_claims=_old_claims(claims, body),
            )
    metrics.RECONCILES.labels(kind="Connector", trigger="timer" if periodic else "change").inc()
    _look_later(rt, obj.uid, outcome)
    OBJECTS.observe_connector(
        obj.namespace,
        obj.name,
        body.get("spec") or {},
        {**(body.get("status") or {}), **outcome.status},
        drift=bool(corrected),
        uid=obj.uid,
    )
    _publish(outcome, body, patch, retry, "Connector")


def _look_later(rt: Runtime, uid: str, outcome: Outcome) -> None:
    """The latest reconcile's word on the object's next look replaces any earlier one (None:
    the sweep's)."""
    rt.later.at(uid, None if outcome.look_at is None else outcome.look_at - time.time())


def _cluster_of(body: Mapping[str, Any]) -> tuple[str, str | None]:
    """The ConnectCluster a Connector names (None: it names none; its reconcile says so)."""
    ref = (body.get("spec") or {}).get("clusterRef")
    name = ref.get("name") if isinstance(ref, dict) else None
    return str((body.get("metadata") or {}).get("namespace") or ""), name if isinstance(name, str) else None


@kopf.on.create(GROUP, VERSION, "connectors")
@kopf.on.update(GROUP, VERSION, "connectors", field="spec")
async def connector_changed(body: kopf.Body, patch: kopf.Patch, retry: int, **_: Any) -> None:
    await _reconcile_connector(body, patch, retry, _claims(), periodic=False)


@kopf.on.resume(GROUP, VERSION, "connectors")
async def connector_resumed(body: kopf.Body, **_: Any) -> None:
    """Queues the object's start-up reconcile (Runtime.resumes) and returns. At start-up every
    object resumes at once and they share one listing of their worker group; run here, each
    would hold its kopf worker until that listing answered. (A spec changed while the operator
    was down is an update, not a resume: its change handler runs as for any change.) What the
    reconcile finds is written to the status by :func:`_resync_connector`, a failure included;
    the ConnectCluster's sweep tries again one period later, as for any resync."""
    runtime().resumes.add(body["metadata"]["uid"])


#: objects per page of kopf's listings (the API server's own default page for kubectl is 500)
LIST_PAGE = 500
#: the parts of a Connector its resync reads (the body kopf hands a change handler, less
#: managedFields), kept encoded (connectops.indexes)
_RESYNC_PARTS = ("apiVersion", "kind", "metadata", "spec", "status")
#: resyncs one ConnectCluster's sweep starts before earlier ones finish (each also waits for
#: its object's lock and one of the PERIODIC_CONCURRENCY slots)
SWEEP_IN_FLIGHT = 16


@kopf.on.event(GROUP, VERSION, "connectors")
async def connector_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
    """Every watch event of a Connector keeps its index entries current (connectops.indexes):
    kopf runs this before the object's change handlers, so a resync never acts on a spec older
    than the one they saw, and a change sees its rivals as they are."""
    kopf_fixes.forget_managed_fields(body)
    rt = runtime()
    if rt.indexes.connector_event(body, deleted=event.get("type") == "DELETED"):
        # a verb annotation written or a pause lifted: acted on now, through the resync path
        # (which reads the latest body under the object's lock and acts on a token once), not at
        # the next resync up to a period later; Later keeps one pending look per object
        rt.later.at(body["metadata"]["uid"], 0.0)


def connector_asks(body: Mapping[str, Any]) -> Hashable | None:
    """What a Connector asks through its annotations (connectops.planning.verbs)."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return verbs.asked(annotations) if isinstance(annotations, dict) else None


def connectors_by_cluster(body: Mapping[str, Any]) -> dict[tuple[str, str], str] | None:
    """Each Connector's uid under the ConnectCluster it names (namespace, name)."""
    meta, ref = body.get("metadata") or {}, (body.get("spec") or {}).get("clusterRef")
    name = ref.get("name") if isinstance(ref, dict) else None
    if not name or not meta.get("uid"):
        return None
    return {(str(meta.get("namespace") or ""), str(name)): str(meta["uid"])}


async def _resync_connector(uid: str, indexes: Indexes, claims: ClaimIndex, *, periodic: bool = True) -> None:
    """One Connector's resync, outside kopf's handler machinery: the sweep's (``periodic``, in
    the background lane) and the start-up resume's (a change's lane, as kopf's resume was). Its
    body is looked up once the object's lock is held, and its status written before the lock is
    let go, so a change handler or reset that held the object just before is never undone by a
    body read before it finished (as kopf's timer read its live body then)."""
    rt = runtime()
    if not indexes.known(uid):
        return  # deleted since the pass began: its lock was dropped with it, do not make a new one
    async with rt.locks[uid]:
        stored = indexes.latest(uid)
        if stored is None or (stored.get("metadata") or {}).get("deletionTimestamp"):
            return  # gone, or its delete handler's now
        body = kopf.Body(cast(kopf.RawBody, stored))
        patch = kopf.Patch()
        try:
            with background() if periodic else contextlib.nullcontext():
                await _reconcile_connector(body, patch, 0, claims, periodic=periodic, listed=True, locked=True)
        except (kopf.TemporaryError, kopf.PermanentError):
            pass  # the outcome is in the patch (its conditions say what failed); the next pass retries
        if patch.status:
            meta = body["metadata"]
            await rt.kube.patch_status(meta["namespace"], "connectors", meta["name"], dict(patch.status))


@kopf.daemon(GROUP, VERSION, "connectclusters", cancellation_timeout=30.0)
async def connector_sweep(body: kopf.Body, stopped: kopf.DaemonStopped, **_: Any) -> None:
    """The resync of every Connector of this ConnectCluster, paced across the period."""
    key = (body["metadata"]["namespace"], body["metadata"]["name"])
    indexes = runtime().indexes
    members = indexes.by_cluster
    claims = _claims()

    async def resync(uid: str) -> None:
        await _resync_connector(uid, indexes, claims)

    async def wait(seconds: float) -> bool:
        await stopped.wait(seconds)
        return bool(stopped)

    await sweep(
        lambda: list(members.get(key, [])), resync, wait, period=SETTINGS.resync_seconds, in_flight=SWEEP_IN_FLIGHT
    )


@kopf.on.delete(GROUP, VERSION, "connectors")
async def connector_deleted(body: kopf.Body, retry: int, **_: Any) -> None:
    rt = runtime()
    meta = body["metadata"]
    OBJECTS.forget("Connector", meta["namespace"], meta["name"], uid=meta["uid"])
    rt.later.cancel(meta["uid"])
    async with rt.locks[meta["uid"]]:
        try:
            rivals = _rivals(_claims(), body)
            await rt.connectors.delete(ConnectorObject.from_body(body), _emitter(body), rivals=rivals)
        except Exception as exc:
            raise _retry_later(exc, retry) from None
    rt.locks.pop(body["metadata"]["uid"], None)


# -- ConnectCluster --------------------------------------------------------------------------------


async def _reconcile_cluster(body: Any, patch: kopf.Patch, retry: int) -> None:
    rt = runtime()
    meta = body["metadata"]
    async with rt.locks[meta["uid"]]:
        outcome = await rt.connect_clusters.reconcile(
            meta["namespace"],
            meta["name"],
            meta.get("generation"),
            dict(body.get("status") or {}),
            _emitter(body),
        )
    metrics.RECONCILES.labels(kind="ConnectCluster", trigger="change").inc()
    _publish(outcome, body, patch, retry, "ConnectCluster")


@kopf.on.resume(GROUP, VERSION, "connectclusters")
@kopf.on.create(GROUP, VERSION, "connectclusters")
@kopf.on.update(GROUP, VERSION, "connectclusters", field="spec")
async def cluster_changed(body: kopf.Body, patch: kopf.Patch, retry: int, **_: Any) -> None:
    await _reconcile_cluster(body, patch, retry)


@kopf.timer(
    GROUP,
    VERSION,
    "connectclusters",
    interval=SETTINGS.resync_seconds,
    initial_delay=SETTINGS.resync_seconds,
)
async def cluster_resync(body: kopf.Body, patch: kopf.Patch, **kwargs: Any) -> None:
    if await _jitter(kwargs["stopped"]):
        return
    with background():
        await _reconcile_cluster(body, patch, 0)


@kopf.on.delete(GROUP, VERSION, "connectclusters", optional=True)
async def cluster_deleted(body: kopf.Body, **_: Any) -> None:
    handle = runtime().clusters.forget(body["metadata"]["namespace"], body["metadata"]["name"])
    if handle is not None:
        await handle.client.aclose()


# -- Secrets -------------------------------------------------------------------------------------

#: (namespace, Secret name) -> the objects reading it and which keys: names only, never values
SecretIndex = Mapping[tuple[str, str], Sequence[SecretUse]]


def _secret_uses(
    body: Mapping[str, Any], kind: str, keys: dict[str, frozenset[str]]
) -> dict[tuple[str, str], SecretUse]:
    meta = body.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    return {(namespace, secret): SecretUse(kind, name, used) for secret, used in keys.items()}


def connector_secrets(body: Mapping[str, Any]) -> dict[tuple[str, str], SecretUse] | None:
    return _secret_uses(body, CONNECTOR, connector_secret_keys(body.get("spec") or {})) or None


def cluster_secrets(body: Mapping[str, Any]) -> dict[tuple[str, str], SecretUse] | None:
    return _secret_uses(body, CONNECT_CLUSTER, cluster_secret_keys(body.get("spec") or {})) or None


@kopf.on.event(GROUP, VERSION, "connectclusters")
async def cluster_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
    rt = runtime()
    deleted = event.get("type") == "DELETED"
    rt.indexes.cluster_event(body, deleted=deleted)
    if deleted:
        # its sweep, which refreshed its Connectors' status, is gone with it: each says so now
        # (not Ready, the ConnectCluster named), rather than its last word standing for ever
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        rt.clusters.drop(*key)  # a cached handle would still answer for it
        for uid in rt.indexes.by_cluster.uids(key):
            rt.later.at(uid, 0.0)


async def secret_changed(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
    """A Secret of a watched namespace was listed, changed or deleted: the objects reading a key
    that changed are reconciled now (see :mod:`connectops.reconcilers.secret_rotation`). Secrets
    nobody references cost a dictionary lookup; their data is neither kept nor logged."""
    meta = body.get("metadata") or {}
    where = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    rt = runtime()
    connectors: SecretIndex = rt.indexes.connector_secrets
    clusters: SecretIndex = rt.indexes.cluster_secrets
    uses = [*connectors.get(where, []), *clusters.get(where, [])]
    kind = event.get("type")
    keys = rt.rotation.changed(*where, body.get("data") or {}, uses, listed=kind is None, deleted=kind == "DELETED")
    if not keys:
        return
    claims = _claims()
    # a change, not periodic work: its Connect calls go ahead of a resync burst's
    for use in await rt.rotation.apply(*where, keys, uses, _emitter, lambda b: _rivals(claims, b)):
        metrics.RECONCILES.labels(kind=use.kind, trigger="secret-rotated").inc()


if SETTINGS.secret_rotation:
    # registered only when on: without it kopf neither lists nor watches Secrets (no RBAC for it)
    kopf.on.event("v1", "secrets")(secret_changed)


# -- OffsetReset ---------------------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, "offsetresets")
@kopf.on.create(GROUP, VERSION, "offsetresets")
@kopf.on.update(GROUP, VERSION, "offsetresets", field="spec")
async def offset_reset(body: kopf.Body, retry: int, **_: Any) -> None:
    """Runs (or resumes) the step machine; it writes its own status step by step."""
    rt = runtime()
    _observe_reset(body)
    try:
        async with rt.locks[body["metadata"]["uid"]]:
            ended = await rt.resets.run(body, _emitter(body), _claims())
    except Exception as exc:
        metrics.RECONCILE_ERRORS.labels(kind="OffsetReset", error=type(exc).__name__).inc()
        raise _retry_later(exc, retry) from None
    if ended:
        await _hand_back(body, _claims())


def _observe_reset(body: kopf.Body) -> None:
    meta = body["metadata"]
    OBJECTS.observe_reset(meta["namespace"], meta["name"], body.get("status") or {}, uid=meta["uid"])


async def _hand_back(reset_body: Any, claims: ClaimIndex) -> None:
    """Reconcile the Connectors a finished reset held, now rather than at their next resync, so
    their Ready condition stops saying a reset is in progress. Best effort: the resync timer
    remains the fallback, so a failure here is logged, not retried."""
    rt = runtime()
    namespace = reset_body["metadata"]["namespace"]
    try:
        fresh = await rt.kube.custom_object(namespace, "offsetresets", reset_body["metadata"]["name"])
        for name in await rt.resets.managing_connectors(fresh):
            body = await rt.kube.custom_object(namespace, "connectors", name)
            async with rt.locks[body["metadata"]["uid"]]:
                outcome = await rt.connectors.reconcile(
                    ConnectorObject.from_body(body),
                    _emitter(body),
                    periodic=False,
                    rivals=_rivals(claims, body),
                    old_claims=_old_claims(claims, body),
                )
            _look_later(rt, body["metadata"]["uid"], outcome)
            changes = status_patch(body.get("status") or {}, outcome.status)
            if changes:
                await rt.kube.patch_status(namespace, "connectors", name, changes)
            metrics.RECONCILES.labels(kind="Connector", trigger="reset-finished").inc()
    except Exception as exc:
        # the type only: an unexpected exception's text is not known to be free of secrets
        logger.warning(
            "could not refresh the Connectors of %s/%s (%s); their resync will",
            namespace,
            reset_body["metadata"]["name"],
            type(exc).__name__,
        )


@kopf.timer(GROUP, VERSION, "offsetresets", interval=SETTINGS.resync_seconds, initial_delay=SETTINGS.resync_seconds)
async def offset_reset_check(body: kopf.Body, **kwargs: Any) -> None:
    """Follows the lag/balance check a finished reset launched, until its verdict is published."""
    rt = runtime()
    if await _jitter(kwargs["stopped"]):
        return
    _observe_reset(body)
    with background():
        async with rt.locks[body["metadata"]["uid"]]:
            try:
                await rt.resets.follow_check(body, _emitter(body))
            except Exception as exc:
                raise _retry_later(exc, 0) from None


@kopf.on.delete(GROUP, VERSION, "offsetresets", optional=True)
async def offset_reset_deleted(body: kopf.Body, **_: Any) -> None:
    """Deleting a reset releases its lock (the Lease is owned by it, so garbage collection would
    too, where a controller manager runs)."""
    meta = body["metadata"]
    OBJECTS.forget("OffsetReset", meta["namespace"], meta["name"], uid=meta["uid"])
    await runtime().resets.release(body)


# -- GroupFailover (connectops.reconcilers.group_failover: it writes its own status) --------------

_failovers: GroupFailoverReconciler | None = None


@kopf.on.resume(GROUP, VERSION, "groupfailovers")
@kopf.on.create(GROUP, VERSION, "groupfailovers")
async def group_failover(body: kopf.Body, retry: int, **_: Any) -> None:
    """One pass of the failover (or restore); a final phase is never redone."""
    global _failovers
    rt = runtime()
    if _failovers is None:
        _failovers = GroupFailoverReconciler(rt.kube, rt.clusters)
    try:
        async with rt.locks[body["metadata"]["uid"]]:
            await _failovers.run(body, _emitter(body))
    except Exception as exc:
        metrics.RECONCILE_ERRORS.labels(kind="GroupFailover", error=type(exc).__name__).inc()
        raise _retry_later(exc, retry) from None
