"""Secret rotation, the work: when a watched Secret changes, reconcile the objects that read a
changed key, now rather than at their next resync.

The decisions are in :mod:`connectops.planning.secrets`. What is kept here between events is a
keyed digest per referenced key of each referenced Secret (never a value, and nothing for the
Secrets nobody references). A Connector is reconciled as usual, so Connect's own config decides
whether anything is written: the same value, or a value Connect already holds, writes nothing
and restarts nothing. A ConnectCluster is resolved afresh: a new client (new credentials, new
CA) serves new calls, the old one stays open for the calls already made through it
(:meth:`ClusterRegistry._retire`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from connectops.adapters.kube import KubeClient, KubeObjectMissing
from connectops.planning.secrets import CONNECTOR, RotationBook, SecretUse, affected, changed_keys, key_digests
from connectops.reconcilers.clusters import ClusterRegistry
from connectops.reconcilers.common import EmitEvent, status_patch
from connectops.reconcilers.connect_cluster import ConnectClusterReconciler

logger = logging.getLogger(__name__)

#: a Kubernetes object body -> the Event poster for it (kopf's, in the handlers)
Emitter = Callable[[Any], EmitEvent]


class SecretRotation:
    def __init__(
        self,
        kube: KubeClient,
        clusters: ClusterRegistry,
        connector_pass: Callable[[str, str], Awaitable[None]],
        connect_clusters: ConnectClusterReconciler,
        locks: Mapping[str, asyncio.Lock],
        concurrency: int,
        book: RotationBook,
    ) -> None:
        self._kube = kube
        self._book = book
        self._clusters = clusters
        #: a Connector's pass by (namespace, name) (connectops.reconcilers.connector_pass)
        self._connector_pass = connector_pass
        self._connect_clusters = connect_clusters
        self._locks = locks
        self._concurrency = max(concurrency, 1)
        # per process: the digests are comparable only within it, and useless outside it
        self._salt = secrets.token_bytes(32)
        self._digests: dict[tuple[str, str], dict[str, str]] = {}

    @property
    def remembered(self) -> int:
        """How many Secrets have digests kept (the referenced ones that were seen)."""
        return len(self._digests)

    def changed(
        self,
        namespace: str,
        name: str,
        data: Mapping[str, Any],
        uses: Iterable[SecretUse],
        *,
        listed: bool,
        deleted: bool,
    ) -> frozenset[str]:
        """The referenced keys this event changed; remembers the new digests, and notes the
        change in the book the reconcilers report ``SecretRotated`` from."""
        where = (namespace, name)
        keys = frozenset(k for use in uses for k in use.keys)
        if not keys:
            self._digests.pop(where, None)  # nobody reads it (any more): nothing to keep
            return frozenset()
        current = key_digests(data, keys, self._salt)
        previous = self._digests.get(where)
        if deleted:
            self._digests.pop(where, None)
        else:
            self._digests[where] = current
        changed = changed_keys(previous, current, listed=listed, deleted=deleted)
        if changed and not deleted:
            self._book.note(namespace, name, changed, time.monotonic())
        return changed

    async def apply(
        self,
        namespace: str,
        secret: str,
        keys: frozenset[str],
        uses: Iterable[SecretUse],
        emitter: Emitter,
    ) -> list[SecretUse]:
        """Reconcile every object reading one of ``keys``, a few at a time; those it tried.

        Best effort: a failure is logged (its type only: an exception's text is not known to be
        free of the values) and left to the object's resync, which reads the Secret anyway."""
        gate = asyncio.Semaphore(self._concurrency)
        targets = affected(uses, keys)

        async def one(use: SecretUse) -> None:
            async with gate:
                try:
                    if use.kind == CONNECTOR:
                        await self._connector_pass(namespace, use.name)
                    else:
                        await self._cluster(namespace, use.name, emitter)
                except KubeObjectMissing:
                    pass  # deleted meanwhile: the index forgets it with its next event
                except Exception as exc:
                    logger.warning(
                        "Secret %s/%s changed; refreshing %s %s failed (%s); its resync will retry",
                        namespace,
                        secret,
                        use.kind,
                        use.name,
                        type(exc).__name__,
                    )

        await asyncio.gather(*(one(use) for use in targets))
        return targets

    async def _cluster(self, namespace: str, name: str, emitter: Emitter) -> None:
        body = await self._kube.custom_object(namespace, "connectclusters", name)
        async with self._locks[body["metadata"]["uid"]]:
            # resolves afresh: the client is rebuilt when the values it was built from moved
            outcome = await self._connect_clusters.reconcile(
                namespace, name, body["metadata"].get("generation"), dict(body.get("status") or {}), emitter(body)
            )
        changes = status_patch(body.get("status") or {}, outcome.status)
        if changes:
            await self._kube.patch_status(namespace, "connectclusters", name, changes, meta=body["metadata"])
