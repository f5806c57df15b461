"""The reset lock: one Lease per real connector (Kafka cluster id and connector name, see
:meth:`ClusterHandle.lock_scope`), taken first and released last by the step machine.

Where the Lease lives decides what it excludes. In the operator's lock namespace (the chart's
setting) resets from every namespace meet at one Lease, where no tenant can write; such a Lease
cannot be owned by its OffsetReset (owners never cross namespaces), so a Lease whose holder no
longer exists is taken over here rather than locking the connector for ever. Without a lock
namespace, or for a lock taken before there was one (``status.lockNamespace`` absent), the Lease
lives in the reset's namespace, owned by it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from connectops.adapters.kube import KubeClient, KubeError, KubeObjectMissing, LockHeld
from connectops.models import API_VERSION
from connectops.models.offset_reset import OffsetResetStatus, ResetAction, ResetPhase
from connectops.planning.reset_holder import lock_holder, parse_holder
from connectops.reconcilers.reset_run import PLURAL, Run

log = logging.getLogger(__name__)


class ResetLocks:
    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    async def take(self, run: Run) -> str:
        """Take the lock of every connector of ``run`` where ``run.status`` says (its scope and
        namespace are recorded before, so unlock and deletion release this very Lease)."""
        said = f"locked {', '.join(run.connectors)}"
        scope = run.status.lock_scope or run.cluster.name
        where = run.status.lock_namespace or run.namespace
        holder = lock_holder(run.namespace, run.name, run.uid)
        # an owner in another namespace would have the garbage collector delete the Lease at once
        owner = (
            {"apiVersion": API_VERSION, "kind": "OffsetReset", "name": run.name, "uid": run.uid}
            if where == run.namespace
            else None
        )
        for connector in run.connectors:
            try:
                lock = await self._kube.acquire_lock(where, scope, connector, holder, owner)
            except LockHeld as held:
                if await self._holder_gone(held.holder):
                    said = f"took over the lock left by {held.holder}, which no longer exists"
                elif await self._restores_failed_reset(run, held.holder):
                    said = f"took over the lock of the failed reset whose backup this restores ({held.holder})"
                elif (parse_holder(held.holder) or ("",))[0] != run.namespace:
                    # another tenant's reset: that it exists is enough, not its namespace or name
                    raise LockHeld("an OffsetReset in another namespace") from None
                else:
                    raise
                lock = await self._kube.transfer_lock(where, scope, connector, held.holder, holder, owner)
                run.took_over_lock = True
            if lock.version is not None:
                run.lease_versions[connector] = lock.version
        return said

    async def release(
        self,
        meta: Any,
        status: OffsetResetStatus,
        scope: str,
        *,
        deleting: bool = False,
        versions: Mapping[str, str] | None = None,
    ) -> None:
        """Release the locks of the OffsetReset ``meta`` (its unlock step, or its deletion).
        ``versions``: the Leases as this process's lock step left them (Run.lease_versions)."""
        holder = lock_holder(meta["namespace"], meta["name"], meta["uid"])
        where = status.lock_namespace or meta["namespace"]
        for connector in status.connectors:
            try:
                await self._kube.release_lock(where, scope, connector, holder, (versions or {}).get(connector))
            except KubeError as exc:
                if not deleting or where != meta["namespace"]:
                    raise
                # a Lease in the reset's own namespace is owned by it: the garbage collector
                # removes it with the reset, and an operator without rights there (its locks now
                # live in its own namespace) must not block the deletion
                log.warning("lock of %s/%s left to the garbage collector: %s", meta["namespace"], meta["name"], exc)

    async def _holder_gone(self, holder: str) -> bool:
        """Whether a lock's holder is an OffsetReset that no longer exists (deleted with its
        finalizer stripped, or re-created: another uid)."""
        parsed = parse_holder(holder)
        if parsed is None:
            return False
        namespace, name, uid = parsed
        try:
            obj = await self._kube.custom_object(namespace, PLURAL, name)
        except KubeObjectMissing:
            return True
        except KubeError:
            return False  # unreadable is not gone
        return bool(obj["metadata"].get("uid") != uid)

    async def _restores_failed_reset(self, run: Run, holder: str) -> bool:
        """A restore of a failed reset's own backup may take that reset's lock: the connector then
        stays locked (and stopped) from the failure until its offsets are back. Only a reset of
        the restore's own namespace: its backup is the only one the restore may name."""
        parsed = parse_holder(holder)
        if run.spec.action != ResetAction.RESTORE or parsed is None or parsed[0] != run.namespace:
            return False
        _, name, uid = parsed
        try:
            obj = await self._kube.custom_object(run.namespace, PLURAL, name)
        except KubeObjectMissing:
            return False
        status = OffsetResetStatus.from_storage(obj.get("status"))
        return (
            obj["metadata"].get("uid") == uid
            and status.phase == ResetPhase.FAILED
            and status.backup_config_map == run.spec.restore_from
        )
