"""One pass of a Connector, whatever asked for it.

A Connector is reconciled when its spec changes (kopf's change handler), at its resync (the
ConnectCluster's sweep, a verb written, a restart falling due), once at start-up (its resume),
when a reset that held it finishes, and when a Secret it reads rotates. Each of these used to
write the sequence itself (find the body, take the object's lock and a slot, confirm the claims
the start-up LIST vouched for, reconcile, count, publish the status), each with different
extras. Here it is written once; a :class:`Trigger` says what differs, and nothing else does:

- where the body comes from: the one kopf handed the change handler; for a resync or a resume,
  the latest the watch delivered (:class:`~connectops.indexes.Indexes`), read once the object's
  lock is held, so a change that held the object just before is never undone by a body read
  before it finished; for a reset's hand-back or a rotation, the API server's, then the index's
  under the lock;
- which slot bounds it: a resync takes one of the few periodic slots, a change (a hand-back and
  a rotation are changes too) one of its ConnectCluster's change slots, a resume none (its
  :class:`~connectops.concurrency.queues.Backlog` bounds it);
- which lane its Connect calls take (a resync's go behind a user's change) and how its Events
  are worded (a resync that puts Connect back says drift; a change says it applied the spec);
- who writes the status: the change handler, from what this pass returns, for a change (kopf's
  retry machinery needs the error); this pass, before the lock is let go, for every other
  trigger. Both through KubeClient.patch_status, whose StatusGuard makes a write the API server
  refuses as invalid once per spec; a spec whose status stands refused is not acted on.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections.abc import Callable, Hashable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from connectops import metrics
from connectops.adapters.kube import KubeClient, KubeObjectMissing, StatusRefused
from connectops.concurrency.lanes import background
from connectops.concurrency.queues import Later
from connectops.concurrency.slots import KeyedSlots
from connectops.indexes import Indexes
from connectops.object_metrics import OBJECTS
from connectops.planning.on_create import renamed_from
from connectops.planning.ownership import Claim
from connectops.reconcilers.common import EmitEvent, Outcome, status_patch
from connectops.reconcilers.connector import ConnectorObject, ConnectorReconciler, claimed_name

ClaimIndex = Mapping[str, Sequence[Claim]]
#: a Connector body -> the Event poster for it (kopf's, in the handlers)
Emitter = Callable[[Any], EmitEvent]
#: the Events a resync emits when it put Connect back to the spec
_DRIFT_REASONS = frozenset({"DriftCorrected", "StateDriftCorrected"})


class Trigger(enum.Enum):
    """What asked for a pass. The value is the ``trigger`` label of
    ``connectops_reconciles_total`` (a resync keeps "timer" and a resume "change", the labels
    dashboards and the benchmarks already count by)."""

    CHANGE = "change"
    RESUME = "resume"
    RESYNC = "resync"
    RESET_FINISHED = "reset-finished"
    SECRET_ROTATED = "secret-rotated"

    @property
    def periodic(self) -> bool:
        """Background work: the slow lane, and Events that call a correction drift."""
        return self is Trigger.RESYNC

    @property
    def listed(self) -> bool:
        """Observed through the worker group's shared listing (many objects at once)."""
        return self in (Trigger.RESYNC, Trigger.RESUME)

    @property
    def label(self) -> str:
        return {Trigger.RESYNC: "timer", Trigger.RESUME: "change"}.get(self, self.value)


@dataclass(frozen=True)
class Published:
    """What a pass published: the status changes (written already unless the trigger is a
    change, whose handler writes them) and the error kopf retries a change on."""

    changes: dict[str, Any]
    error: BaseException | None


class ConnectorPass:
    def __init__(
        self,
        kube: KubeClient,
        reconciler: ConnectorReconciler,
        indexes: Indexes,
        *,
        locks: MutableMapping[str, asyncio.Lock],
        periodic_slots: asyncio.Semaphore,
        change_slots: KeyedSlots,
        emitter: Emitter,
    ) -> None:
        self._kube = kube
        self._reconciler = reconciler
        self._indexes = indexes
        self._locks = locks
        self._periodic_slots = periodic_slots
        self._change_slots = change_slots
        self._emitter = emitter
        #: a Connector's next look before its sweep comes by (set once built: it runs passes)
        self.later: Later | None = None

    async def on_change(self, body: Mapping[str, Any]) -> Published:
        """The change handler's pass, on the body kopf handed it; kopf writes the status."""
        async with self._locks[body["metadata"]["uid"]]:
            return await self._pass(Trigger.CHANGE, body)

    async def by_uid(self, uid: str, trigger: Trigger) -> Published | None:
        """A resync's or a resume's pass, on the latest body the watch delivered; None when the
        object is gone (or being deleted: its delete handler's now)."""
        if not self._indexes.known(uid):
            return None  # deleted since the pass was asked for: do not make a lock for it again
        async with self._locks[uid]:
            stored = self._indexes.latest(uid)
            if stored is None or (stored.get("metadata") or {}).get("deletionTimestamp"):
                return None
            return await self._pass(trigger, stored)

    async def by_name(self, namespace: str, name: str, trigger: Trigger) -> Published | None:
        """A pass asked from outside the object's own events (a reset finished, a Secret
        rotated): read from the API server for its uid, then the latest body under its lock.
        None when the object does not exist."""
        try:
            read = await self._kube.custom_object(namespace, "connectors", name)
        except KubeObjectMissing:
            return None
        uid = read["metadata"]["uid"]
        async with self._locks[uid]:
            body = self._indexes.latest(uid) or read
            if (body.get("metadata") or {}).get("deletionTimestamp"):
                return None
            return await self._pass(trigger, body)

    async def delete(self, body: Mapping[str, Any]) -> None:
        """The delete handler's work: the connector removed from Connect (ConnectorReconciler.
        delete), and everything this process kept for the object forgotten, once: its gauges,
        its next look, its memo, its lock. A failure leaves the lock (the retry takes it again)."""
        meta = body["metadata"]
        uid = meta["uid"]
        OBJECTS.forget("Connector", meta["namespace"], meta["name"], uid=uid)
        self._kube.statuses.forget(meta["namespace"], "connectors", meta["name"])
        if self.later is not None:
            self.later.cancel(uid)
        async with self._locks[uid]:
            obj = ConnectorObject.from_body(body)
            claims = self._indexes.claims
            heirs = self._indexes.renames.get(claimed_name(obj.name, body.get("spec") or {}), [])
            await self._reconciler.delete(obj, self._emitter(body), rivals=rivals_of(claims, body), heirs=heirs)
        self._locks.pop(uid, None)

    async def _pass(self, trigger: Trigger, body: Mapping[str, Any]) -> Published:
        """The pass itself, the object's lock held."""
        meta = body.get("metadata") or {}
        refused = self._kube.statuses.refused(str(meta.get("namespace") or ""), "connectors", meta["name"], meta)
        if refused is not None and refused.spec_refused:
            # the API server refused this spec's status (a rule added since the object was
            # stored): the user was told once; nothing is applied until the spec is changed
            return Published({}, None)
        corrected: list[str] = []
        emit = self._emitter(body)

        def counting(type_: str, reason: str, message: str) -> None:
            if reason in _DRIFT_REASONS:
                corrected.append(reason)
            emit(type_, reason, message)

        claims = self._indexes.claims
        with metrics.RECONCILE_SECONDS.labels(kind="Connector").time():
            # the slot once the object is held: waiting for a busy object (a reset holds its
            # Connector for its whole run) must not hold a slot others could use
            async with self._slot(trigger, body):
                await self._confirm([*rivals_of(claims, body), *_old_claims(claims, body)])
                # read once a slot is held: at start-up every object waits here at once, and
                # what each built before its turn would be held by all of them together
                obj = ConnectorObject.from_body(body)
                with background() if trigger.periodic else contextlib.nullcontext():
                    outcome = await self._reconciler.reconcile(
                        obj,
                        counting,
                        periodic=trigger.periodic,
                        listed=named_here(claims, obj.namespace) if trigger.listed else None,
                        # read again: the confirmation may have dropped a claim
                        rivals=rivals_of(claims, body),
                        old_claims=_old_claims(claims, body),
                    )
        metrics.RECONCILES.labels(kind="Connector", trigger=trigger.label).inc()
        self._look_later(obj.uid, outcome)
        OBJECTS.observe_connector(
            obj.namespace,
            obj.name,
            body.get("spec") or {},
            {**(body.get("status") or {}), **outcome.status},
            drift=bool(corrected),
            uid=obj.uid,
        )
        if outcome.error is not None:
            metrics.RECONCILE_ERRORS.labels(kind="Connector", error=type(outcome.error).__name__).inc()
        changes = status_patch(body.get("status") or {}, outcome.status)
        if changes and trigger is not Trigger.CHANGE:
            try:
                await self._kube.patch_status(obj.namespace, "connectors", obj.name, changes, meta=meta)
            except StatusRefused:
                return Published({}, outcome.error)  # told once (StatusGuard), not retried
        return Published(changes, outcome.error)

    def _slot(self, trigger: Trigger, body: Mapping[str, Any]) -> contextlib.AbstractAsyncContextManager[Any]:
        if trigger is Trigger.RESYNC:
            return self._periodic_slots
        if trigger is Trigger.RESUME:
            return contextlib.nullcontext()
        return self._change_slots.hold(cluster_of(body))

    async def _confirm(self, claims: list[Claim]) -> None:
        """Read afresh the claims only the startup LIST vouches for: an object deleted between
        that LIST and kopf's own listing gets no event, and its claim would stop a Connector
        forever."""
        for claim in self._indexes.unconfirmed(claims):
            try:
                current = await self._kube.custom_object(claim.namespace, "connectors", claim.name)
            except KubeObjectMissing:
                current = {}
            if (current.get("metadata") or {}).get("uid") != claim.uid:
                self._indexes.forget_connector(claim.uid)

    def _look_later(self, uid: str, outcome: Outcome) -> None:
        """The latest pass's word on the object's next look replaces any earlier one (None: the
        sweep's)."""
        if self.later is not None:
            self.later.at(uid, None if outcome.look_at is None else outcome.look_at - time.time())


def cluster_of(body: Mapping[str, Any]) -> Hashable:
    """The ConnectCluster a Connector names, (namespace, name); name None when it names none (its
    reconcile says so)."""
    ref = (body.get("spec") or {}).get("clusterRef")
    name = ref.get("name") if isinstance(ref, dict) else None
    return str((body.get("metadata") or {}).get("namespace") or ""), name if isinstance(name, str) else None


def rivals_of(claims: ClaimIndex, body: Mapping[str, Any]) -> list[Claim]:
    """The other Connector objects naming the same connector."""
    return list(claims.get(claimed_name(body["metadata"]["name"], body.get("spec") or {}), []))


def _old_claims(claims: ClaimIndex, body: Mapping[str, Any]) -> list[Claim]:
    """The Connector objects naming the connector this one renames (spec.offsets.from)."""
    old = renamed_from(body.get("spec"))
    return list(claims.get(old, [])) if old is not None else []


def named_here(claims: ClaimIndex, namespace: str) -> Callable[[str], bool]:
    """Whether an object of ``namespace`` names a connector: what a shared listing keeps."""
    return lambda connector: any(claim.namespace == namespace for claim in claims.get(connector, []))
