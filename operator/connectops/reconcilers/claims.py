"""A Connector's claim on its connector, recorded on the API server before it writes.

Which Connector object owns a connector that several name was decided from the objects this
process had seen (connectops.planning.ownership: the oldest wins). Two gaps remained. Objects
created in the same moment can each be reconciled before the others' watch events arrive, so
the first one processed wrote its config before it learnt of an older rival. And the rule
needs every claim's Kafka cluster, read through its ConnectCluster: a claim whose ConnectCluster
was deleted dropped out, and a rival took the connector over (and could delete it) while the
owner's Connector still existed.

So a claim is also recorded, atomically, as a Lease in the operator's own namespace (no tenant
writes there), named after the Kafka cluster id and the connector name, held by the Connector's
uid: creation is atomic, so of claimants that race, exactly one holds it, and it stands while its
Connector exists whatever happens to its ConnectCluster (the Connector's status keeps where it
is, to release it). The Lease is read only when the decision needs it: when another object
names the same connector, or when this object has not recorded its claim yet (its first
reconcile, an upgrade); a Connector alone with its recorded claim costs no call (a Lease read
per Connector on every resync was a third of the CPU at 3,000 Connectors).
"""

from __future__ import annotations

import logging

from connectops.adapters.kube import KubeClient, KubeError, KubeObjectMissing, LockHeld, lock_name
from connectops.models import GROUP
from connectops.models.connector import ClaimRecord
from connectops.planning.ownership import Claim

log = logging.getLogger(__name__)

PURPOSE = "connector-claim"
_HOLDER_PREFIX = f"{GROUP}/connector/"


def holder_of(claim: Claim) -> str:
    """The Lease holder identity of a Connector (its uid: a re-created namesake is another)."""
    return f"{_HOLDER_PREFIX}{claim.namespace}/{claim.name}/{claim.uid}"


def _parse(holder: str) -> Claim | None:
    if not holder.startswith(_HOLDER_PREFIX):
        return None
    parts = holder[len(_HOLDER_PREFIX) :].split("/")
    if len(parts) != 3 or not all(parts):
        return None
    return Claim(parts[0], parts[1], parts[2], "", "")


def _scope(kafka_cluster: str) -> str:
    return f"claim/kafka/{kafka_cluster}"


class ClaimRecords:
    """The recorded claims, in ``namespace`` (empty: none are recorded; the seen objects decide)."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        self._kube = kube
        self.namespace = namespace

    def record(self, kafka_cluster: str, connector: str) -> ClaimRecord:
        name = lock_name(_scope(kafka_cluster), connector)
        return ClaimRecord(kafka_cluster=kafka_cluster, connector=connector, lease=f"{self.namespace}/{name}")

    async def owner(
        self,
        me: Claim,
        kafka_cluster: str,
        connector: str,
        eldest: Claim,
        recorded: ClaimRecord | None,
        contested: bool,
    ) -> Claim | None:
        """The owner of ``connector`` when it is not ``me`` (None: ``me``, and the claim is
        recorded). ``eldest``: the owner by the seen objects' rule; ``contested``: other objects
        name the connector; ``recorded``: the claim ``me``'s status says it holds."""
        if not self.namespace or not kafka_cluster:
            return None if eldest.uid == me.uid else eldest
        if not contested and recorded == self.record(kafka_cluster, connector):
            return None
        scope, holder = _scope(kafka_cluster), holder_of(me)
        if eldest.uid != me.uid:
            # an older object is seen: it records the claim at its own pass, unless a claimant
            # that is not gone holds it already (then that one owns it, whatever its age)
            current = await self._kube.lock_holder(self.namespace, scope, connector)
            if current is None:
                return eldest
            if current.holder == holder:
                return None
            other = _parse(current.holder)
            return eldest if other is None or await self._gone(other) else other
        try:
            await self._kube.acquire_lock(self.namespace, scope, connector, holder, None, PURPOSE)
        except LockHeld as held:
            other = _parse(held.holder)
            if other is None:
                raise KubeError(f"the claim on connector {connector} is held by an unknown holder") from None
            if not await self._gone(other):
                return other
            await self._kube.transfer_lock(self.namespace, scope, connector, held.holder, holder, None)
            log.info("claim on connector %s taken over from %s, which no longer exists", connector, held.holder)
        return None

    async def release(self, me: Claim, recorded: ClaimRecord | None) -> None:
        """Give up the recorded claim (the Connector is deleted, or names another connector)."""
        if recorded is None or not self.namespace:
            return
        scope = _scope(recorded.kafka_cluster)
        await self._kube.release_lock(self.namespace, scope, recorded.connector, holder_of(me))

    async def _gone(self, claim: Claim) -> bool:
        """Whether a claim's Connector no longer exists (deleted with its finalizer stripped, or
        re-created: another uid). Unreadable is not gone."""
        try:
            obj = await self._kube.custom_object(claim.namespace, "connectors", claim.name)
        except KubeObjectMissing:
            return True
        except KubeError:
            return False
        return bool((obj.get("metadata") or {}).get("uid") != claim.uid)
