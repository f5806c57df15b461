"""The operator's process-wide collaborators, built once it starts, and the index keys kopf's
watch keeps them current by.

Out of :mod:`connectops.handlers` so that module is only the kopf bindings: what a handler
finds here is built once (the kube client, the cluster registry, the reconcilers, the locks and
slots, the Connector pass and the queues that run it), and the start-up LIST of claims that has
to be read before kopf watches anything.
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import kopf
from kopf._cogs.structs.references import match_namespace, select_specific_namespaces

from connectops import memory
from connectops.adapters.addresses import api_server_endpoints
from connectops.adapters.kube import KubeClient, load_kube_config
from connectops.concurrency.queues import Backlog, Later
from connectops.concurrency.slots import KeyedSlots
from connectops.indexes import Indexes
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
from connectops.reconcilers.checks import CheckRunner, check_defaults
from connectops.reconcilers.clusters import ClusterRegistry
from connectops.reconcilers.common import EmitEvent
from connectops.reconcilers.connect_cluster import ConnectClusterReconciler
from connectops.reconcilers.connector import ConnectorReconciler, claim_of, claimed_name
from connectops.reconcilers.connector_pass import ConnectorPass, Trigger, named_here
from connectops.reconcilers.offset_reset import OffsetResetExecutor
from connectops.reconcilers.secret_rotation import SecretRotation
from connectops.settings import Settings

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
#: the parts of a Connector its resync reads (the body kopf hands a change handler, less
#: managedFields), kept encoded (connectops.indexes)
RESYNC_PARTS = ("apiVersion", "kind", "metadata", "spec", "status")
#: at most this many characters of an Event's message (the API server refuses longer ones)
EVENT_MESSAGE_LIMIT = 1000


def emitter(body: Any) -> EmitEvent:
    """The Event poster for one object (kopf's, which writes them in the background)."""

    def emit(type_: str, reason: str, message: str) -> None:
        kopf.event(body, type=type_, reason=reason, message=message[:EVENT_MESSAGE_LIMIT])

    return emit


class Runtime:
    """Process-wide collaborators, built once the operator starts (kube config is loaded then)."""

    def __init__(self, settings: Settings) -> None:
        load_kube_config()
        self.kube = KubeClient()
        # a status write refused as invalid is told where the user looks, once per spec
        self.kube.statuses.on_refused = lambda obj, exc: emitter(obj)("Warning", exc.reason, str(exc))
        # no restUrl may lead the operator to its own API server with a user's request
        self.clusters = ClusterRegistry(self.kube, settings, api_servers=api_server_endpoints())
        self.checks = CheckRunner(self.kube, settings, check_defaults(settings))
        # long enough for a retried or queued reconcile to still report what the watch saw
        book = RotationBook(ttl=max(2 * settings.resync_seconds, 60.0))
        self.connectors = ConnectorReconciler(self.kube, self.clusters, settings, self.checks, book)
        self.connect_clusters = ConnectClusterReconciler(self.clusters, settings, book)
        self.resets = OffsetResetExecutor(self.kube, self.clusters, settings, checks=self.checks)
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        #: every Connector's claim, body and cluster; who reads which Secret (connectops.indexes)
        self.indexes = connector_indexes()
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
        #: one pass of a Connector, whatever asked for it (connectops.reconcilers.connector_pass)
        self.connector_pass = ConnectorPass(
            self.kube,
            self.connectors,
            self.indexes,
            locks=self.locks,
            periodic_slots=self.periodic_slots,
            change_slots=self.change_slots,
            emitter=emitter,
        )
        passes = self.connector_pass
        #: every Connector's start-up reconcile, queued by its resume handler (queues.Backlog says
        #: why not in kopf's handler), at most RESUME_CONCURRENCY at once: kopf releases every
        #: object of its first listing together, and each one at work holds its reads and models
        self.resumes = Backlog(lambda uid: _ran(passes.by_uid(uid, Trigger.RESUME)), workers=RESUME_CONCURRENCY)
        #: a Connector's next look when its automatic restarts need it before the sweep comes by
        #: (a restart falls due in seconds, the sweep comes once a period), a verb written or a
        #: pause lifted: a resync of that one object, asked by the pass before it (Outcome.look_at)
        #: or by its watch event
        self.later = Later(lambda uid: _ran(passes.by_uid(uid, Trigger.RESYNC)), spacing=LOOK_SPACING_SECONDS)
        passes.later = self.later
        # a Connector whose check batch was refused, or that waited for SparkApplications to be
        # served and now they are, is looked at now rather than at its next resync
        self.checks.batches.wake = lambda uid: self.later.at(uid, 0.0)
        #: set once the startup LIST of claims is read (the start-up listings filter by them)
        self.claims_read = asyncio.Event()
        #: the listings asked while that LIST is read (ClusterRegistry.prefetch_listing)
        self.warming: set[asyncio.Task[None]] = set()
        self.rotation = SecretRotation(
            self.kube,
            self.clusters,
            lambda namespace, name: _ran(passes.by_name(namespace, name, Trigger.SECRET_ROTATED)),
            self.connect_clusters,
            self.locks,
            settings.connect_concurrency,
            book,
        )
        #: the C heap's free pages go back to the system once a minute (see connectops.memory)
        self.trimmer = asyncio.get_running_loop().create_task(
            memory.trim_forever(settings.malloc_trim_seconds), name="malloc-trim"
        )

    async def close(self) -> None:
        # batches not launched yet stay QUEUED in their Connectors' status: the next process
        # requests them again (ConnectorReconciler._check)
        await self.checks.batches.close()
        await self.resumes.close()
        await self.later.close()
        for task in self.warming:
            task.cancel()
        await self.clusters.aclose()
        self.trimmer.cancel()


def connector_indexes() -> Indexes:
    """The indexes the watch keeps, by this module's keys (one place: the tests build theirs here)."""
    return Indexes(
        connector_claims,
        connectors_by_cluster,
        connector_secrets,
        cluster_secrets,
        RESYNC_PARTS,
        connector_asks,
        connector_renames,
    )


async def seed_claims(rt: Runtime, settings: Settings) -> int:
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
                                    settings.resync_seconds / 2,
                                    named_here(rt.indexes.claims, cluster[0]),
                                    settled=rt.claims_read,
                                )
                            )
                            rt.warming.add(task)
                            task.add_done_callback(rt.warming.discard)
    finally:
        rt.claims_read.set()
    return seeded


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


def connector_renames(body: Mapping[str, Any]) -> dict[str, Claim] | None:
    """A Connector object by the connector it renames (spec.offsets.from), if it renames one."""
    meta, spec = body.get("metadata") or {}, body.get("spec") or {}
    old = renamed_from(spec)
    if old is None:
        return None
    claim = claim_of(
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
        str(meta.get("creationTimestamp") or ""),
        spec,
    )
    return {old: claim} if claim else None


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


async def _ran(run: Any) -> None:
    """A pass run for its effect (it writes its own status); what it published is not needed."""
    await run
