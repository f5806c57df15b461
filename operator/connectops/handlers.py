"""kopf handlers: thin bindings from Kubernetes events to the reconcilers.

Every body here finds what runs the work in the process's :class:`~connectops.runtime.Runtime`
and hands it the event: a Connector's to its one pass (connectops.reconcilers.connector_pass,
told what asked by a ``Trigger``), a ConnectCluster's, an OffsetReset's and a GroupFailover's to
their reconcilers under the object's lock, and turns a failure into kopf's retry via
:func:`connectops.errors.as_kopf_error`. Importing this module is what fills kopf's registry
(``connectops run`` imports it, and the e2e harness asserts it is not imported before its
settings are set), so nothing else lives here.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import kopf

from connectops import kopf_fixes, memory, metrics
from connectops.adapters.kube import StatusRefused
from connectops.concurrency.lanes import background
from connectops.concurrency.sweep import sweep
from connectops.diffbase import DigestDiffBaseStorage
from connectops.errors import as_kopf_error
from connectops.models import GROUP, VERSION
from connectops.object_metrics import OBJECTS
from connectops.reconcilers.common import Outcome, status_patch
from connectops.reconcilers.connector_pass import ClaimIndex, Published, Trigger
from connectops.reconcilers.group_failover import GroupFailoverReconciler
from connectops.runtime import Runtime, SecretIndex, emitter, seed_claims
from connectops.settings import load

SETTINGS = load()
kopf_fixes.install()
kopf_fixes.bound_requests(SETTINGS.kube_api_concurrency)
kopf_fixes.strip_managed_fields()
logger = logging.getLogger(__name__)


class _QuietIndexing(logging.Filter):
    """kopf logs each handler's success at INFO; for the index-keeping event handlers that is a
    line per watch event of every object (each status write is one), which says nothing."""

    QUIET = frozenset({"Handler 'connector_event' succeeded.", "Handler 'cluster_event' succeeded."})

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in self.QUIET


logging.getLogger("kopf.objects").addFilter(_QuietIndexing())


_runtime: Runtime | None = None


def runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        _runtime = Runtime(SETTINGS)
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
    seeded = await seed_claims(rt, SETTINGS)
    logger.info("claims of %d Connectors read before watching", seeded)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In-cluster service account first, then $KUBECONFIG read at login time (kopf's default
    client-library login snapshots $KUBECONFIG when the library is imported)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.cleanup()
async def shutdown(**_: Any) -> None:
    global _runtime
    if _runtime is not None:
        await _runtime.close()
        _runtime = None


def _retry_later(exc: BaseException, retry: int) -> kopf.TemporaryError | kopf.PermanentError:
    return as_kopf_error(exc, retry=retry, base=SETTINGS.retry_seconds, maximum=SETTINGS.retry_max_seconds)


async def _write_status(body: Any, plural: str, changes: dict[str, Any], retry: int) -> None:
    """A handler's status, written through the operator's one status path (KubeClient.
    patch_status), not kopf's patch: a write the API server refuses as invalid (an object stored
    before a rule it breaks, on Kubernetes < 1.33) fails inside kopf as an unexpected error,
    unseen by the user; here it is told once and not made again until the spec changes."""
    if not changes:
        return
    meta = body["metadata"]
    try:
        await runtime().kube.patch_status(meta["namespace"], plural, meta["name"], changes, meta=meta)
    except StatusRefused:
        return  # told already (StatusGuard); nothing to retry until the spec changes
    except Exception as exc:
        raise _retry_later(exc, retry) from None


async def _publish(outcome: Outcome, body: Any, retry: int, kind: str) -> None:
    await _write_status(body, "connectclusters", status_patch(body.get("status") or {}, outcome.status), retry)
    if outcome.error is not None:
        metrics.RECONCILE_ERRORS.labels(kind=kind, error=type(outcome.error).__name__).inc()
        raise _retry_later(outcome.error, retry)


async def _handed(published: Published, body: Any, retry: int) -> None:
    """A change's pass: the status it decided, the error kopf retries it on."""
    await _write_status(body, "connectors", published.changes, retry)
    if published.error is not None:
        raise _retry_later(published.error, retry)


# -- Connector -----------------------------------------------------------------------------------


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


@kopf.on.create(GROUP, VERSION, "connectors")
@kopf.on.update(GROUP, VERSION, "connectors", field="spec")
async def connector_changed(body: kopf.Body, retry: int, **_: Any) -> None:
    await _handed(await runtime().connector_pass.on_change(body), body, retry)


@kopf.on.resume(GROUP, VERSION, "connectors")
async def connector_resumed(body: kopf.Body, **_: Any) -> None:
    """Queues the object's start-up reconcile (Runtime.resumes) and returns. At start-up every
    object resumes at once and they share one listing of their worker group; run here, each
    would hold its kopf worker until that listing answered. (A spec changed while the operator
    was down is an update, not a resume: its change handler runs as for any change.) What the
    pass finds is written to the status by the pass itself (ConnectorPass.by_uid), a failure included;
    the ConnectCluster's sweep tries again one period later, as for any resync."""
    runtime().resumes.add(body["metadata"]["uid"])


#: objects per page of kopf's listings (the API server's own default page for kubectl is 500)
LIST_PAGE = 500
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


@kopf.daemon(GROUP, VERSION, "connectclusters", cancellation_timeout=30.0)
async def connector_sweep(body: kopf.Body, stopped: kopf.DaemonStopped, **_: Any) -> None:
    """The resync of every Connector of this ConnectCluster, paced across the period."""
    key = (body["metadata"]["namespace"], body["metadata"]["name"])
    rt = runtime()
    members = rt.indexes.by_cluster

    async def resync(uid: str) -> None:
        await rt.connector_pass.by_uid(uid, Trigger.RESYNC)

    async def wait(seconds: float) -> bool:
        await stopped.wait(seconds)
        return bool(stopped)

    await sweep(
        lambda: list(members.get(key, [])), resync, wait, period=SETTINGS.resync_seconds, in_flight=SWEEP_IN_FLIGHT
    )


@kopf.on.delete(GROUP, VERSION, "connectors")
async def connector_deleted(body: kopf.Body, retry: int, **_: Any) -> None:
    try:
        await runtime().connector_pass.delete(body)
    except Exception as exc:
        raise _retry_later(exc, retry) from None


# -- ConnectCluster --------------------------------------------------------------------------------


async def _reconcile_cluster(body: Any, retry: int) -> None:
    rt = runtime()
    meta = body["metadata"]
    refused = rt.kube.statuses.refused(meta["namespace"], "connectclusters", meta["name"], meta)
    if refused is not None and refused.spec_refused:
        return  # a spec the CRD's rules now refuse: acted on again once it is changed
    async with rt.locks[meta["uid"]]:
        outcome = await rt.connect_clusters.reconcile(
            meta["namespace"],
            meta["name"],
            meta.get("generation"),
            dict(body.get("status") or {}),
            emitter(body),
        )
    metrics.RECONCILES.labels(kind="ConnectCluster", trigger="change").inc()
    await _publish(outcome, body, retry, "ConnectCluster")


@kopf.on.resume(GROUP, VERSION, "connectclusters")
@kopf.on.create(GROUP, VERSION, "connectclusters")
@kopf.on.update(GROUP, VERSION, "connectclusters", field="spec")
async def cluster_changed(body: kopf.Body, retry: int, **_: Any) -> None:
    await _reconcile_cluster(body, retry)


@kopf.timer(
    GROUP,
    VERSION,
    "connectclusters",
    interval=SETTINGS.resync_seconds,
    initial_delay=SETTINGS.resync_seconds,
)
async def cluster_resync(body: kopf.Body, **kwargs: Any) -> None:
    if await _jitter(kwargs["stopped"]):
        return
    with background():
        await _reconcile_cluster(body, 0)


@kopf.on.delete(GROUP, VERSION, "connectclusters", optional=True)
async def cluster_deleted(body: kopf.Body, **_: Any) -> None:
    handle = runtime().clusters.forget(body["metadata"]["namespace"], body["metadata"]["name"])
    if handle is not None:
        await handle.client.aclose()


# -- Secrets -------------------------------------------------------------------------------------


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
    # a change, not periodic work: its Connect calls go ahead of a resync burst's
    for use in await rt.rotation.apply(*where, keys, uses, emitter):
        metrics.RECONCILES.labels(kind=use.kind, trigger=Trigger.SECRET_ROTATED.value).inc()


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
            ended = await rt.resets.run(body, emitter(body), _claims())
    except Exception as exc:
        metrics.RECONCILE_ERRORS.labels(kind="OffsetReset", error=type(exc).__name__).inc()
        raise _retry_later(exc, retry) from None
    if ended:
        await _hand_back(body)


def _observe_reset(body: kopf.Body) -> None:
    meta = body["metadata"]
    OBJECTS.observe_reset(meta["namespace"], meta["name"], body.get("status") or {}, uid=meta["uid"])


async def _hand_back(reset_body: Any) -> None:
    """Reconcile the Connectors a finished reset held, now rather than at their next resync, so
    their Ready condition stops saying a reset is in progress. Best effort: the resync timer
    remains the fallback, so a failure here is logged, not retried."""
    rt = runtime()
    namespace = reset_body["metadata"]["namespace"]
    try:
        fresh = await rt.kube.custom_object(namespace, "offsetresets", reset_body["metadata"]["name"])
        for name in await rt.resets.managing_connectors(fresh):
            await rt.connector_pass.by_name(namespace, name, Trigger.RESET_FINISHED)
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
    meta = body["metadata"]
    if rt.kube.statuses.refused(meta["namespace"], "offsetresets", meta["name"], meta) is not None:
        return  # its status cannot be stored for this spec: told once (StatusGuard)
    _observe_reset(body)
    with background():
        async with rt.locks[body["metadata"]["uid"]]:
            try:
                await rt.resets.follow_check(body, emitter(body))
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
            await _failovers.run(body, emitter(body))
    except Exception as exc:
        metrics.RECONCILE_ERRORS.labels(kind="GroupFailover", error=type(exc).__name__).inc()
        raise _retry_later(exc, retry) from None
