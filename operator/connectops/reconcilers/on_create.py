"""``spec.offsets``: where a connector starts when the operator creates it.

``clear`` / ``set``: the connector is created STOPPED (KIP-980, Connect 3.7+) and an OffsetReset
owned by the Connector applies the offsets while no task runs, then returns it to
``spec.state``; until that reset has Succeeded the Connector reconciler changes nothing else.
The marker ``status.offsetsOnCreate`` (state Applying) is stored before the connector is
created, so an operator that dies at any point finds it and carries on: it creates what is
missing (the connector, STOPPED; the OffsetReset, by its fixed name) and waits for the reset. A
failed reset leaves the connector as the reset's own failure path left it (resumed when nothing
was changed, STOPPED and locked when offsets may be half-written); deleting the failed
OffsetReset makes the next reconcile create it afresh.

``resume`` (the default): the connector is created as before, and the offsets Connect already
holds under its name (left by an earlier connector of the same name) are reported in status and
as a Warning Event.
"""

from __future__ import annotations

import contextlib
from typing import Any

from connectops.adapters.connect_rest import ConnectApi, ConnectConflict, ConnectError
from connectops.adapters.kube import KubeClient, KubeObjectMissing
from connectops.models.base import GROUP, VERSION
from connectops.models.connector import ConnectorSpec, ConnectorStatus, OffsetsOnCreateStatus
from connectops.models.offset_reset import OffsetResetStatus
from connectops.planning.on_create import (
    APPLIED,
    APPLYING,
    FAILED,
    RESUMED,
    offsets_hash,
    reset_manifest,
    reset_name,
)
from connectops.reconcilers.common import Conditions, EmitEvent

CONDITION = "OffsetsOnCreate"
#: how many of the offsets found under a reused name status shows
FOUND_SHOWN = 10


class OffsetsOnCreate:
    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    async def start(
        self,
        namespace: str,
        object_name: str,
        uid: str,
        spec: ConnectorSpec,
        status: ConnectorStatus,
    ) -> OffsetsOnCreateStatus:
        """Store the marker before anything is created: from here on every reconcile finishes
        the job (see the module docstring)."""
        assert spec.offsets is not None
        marker = OffsetsOnCreateStatus(
            on_create=str(spec.offsets.on_create),
            state=APPLYING,
            offset_reset=reset_name(object_name, uid),
            spec_hash=offsets_hash(spec.offsets),
            message="the connector is created STOPPED; an OffsetReset applies spec.offsets before its first task runs",
        )
        status.offsets_on_create = marker
        await self._kube.patch_status(namespace, "connectors", object_name, status.for_storage("offsets_on_create"))
        return marker

    async def progress(
        self,
        client: ConnectApi,
        namespace: str,
        object_name: str,
        uid: str,
        spec: ConnectorSpec,
        connector: str,
        desired: dict[str, str],
        marker: OffsetsOnCreateStatus,
        status: ConnectorStatus,
        conditions: Conditions,
        emit: EmitEvent,
    ) -> bool:
        """Carry the job on; True while the Connector must change nothing else (applying, or failed)."""
        if await client.get_connector(connector) is None:
            # a conflict: created concurrently, or by an attempt whose answer was lost
            with contextlib.suppress(ConnectConflict):
                await client.create(connector, desired, "STOPPED")
            emit(
                "Normal",
                "Created",
                f"connector {connector} created STOPPED: spec.offsets ({marker.on_create}) is applied "
                "before its first task runs",
            )
        name = marker.offset_reset or reset_name(object_name, uid)
        reset = await self._reset(namespace, name, object_name, uid, spec)
        phase = reset.phase
        if phase == "Succeeded":
            done = marker.model_copy(
                update={"state": APPLIED, "message": f"applied by OffsetReset {name} before the first task ran"}
            )
            status.offsets_on_create = done
            conditions.set(
                CONDITION,
                True,
                "Applied",
                f"spec.offsets ({marker.on_create}) applied by OffsetReset {name}",
                event_on_change=True,
            )
            return False
        if phase == "Failed":
            succeeded = next((c for c in reset.conditions if c.type == "Succeeded"), None)
            why = succeeded.message if succeeded is not None else "see the OffsetReset"
            message = (
                f"OffsetReset {name} failed: {why}. The connector is as that reset left it; delete the "
                "OffsetReset to try again"
            )
            status.offsets_on_create = marker.model_copy(update={"state": FAILED, "message": message[:1000]})
            conditions.set(CONDITION, False, "ResetFailed", message, event_on_change=True, warning=True)
            conditions.set("Synced", False, "OffsetsOnCreateFailed", "changes wait until spec.offsets is applied")
            conditions.set("Ready", False, "OffsetsOnCreateFailed", f"OffsetReset {name} failed")
            return True
        if marker.state != APPLYING:
            status.offsets_on_create = marker.model_copy(update={"state": APPLYING})
        message = f"OffsetReset {name} applies spec.offsets ({marker.on_create}) before the first task runs"
        conditions.set(CONDITION, None, "Applying", message)
        conditions.set("Synced", False, "ApplyingOffsets", "changes wait until spec.offsets is applied")
        conditions.set("Ready", False, "ApplyingOffsets", message)
        return True

    async def _reset(
        self, namespace: str, name: str, object_name: str, uid: str, spec: ConnectorSpec
    ) -> OffsetResetStatus:
        """The OffsetReset's status; created (by its fixed name) when missing."""
        try:
            found = await self._kube.custom_object(namespace, "offsetresets", name)
        except KubeObjectMissing:
            assert spec.offsets is not None
            manifest = reset_manifest(spec.offsets, namespace, object_name, uid)
            await self._kube.create_object(GROUP, VERSION, namespace, "offsetresets", manifest)
            return OffsetResetStatus()
        return OffsetResetStatus.salvage(found.get("status"))

    async def report_resume(
        self,
        client: ConnectApi,
        spec: ConnectorSpec,
        connector: str,
        status: ConnectorStatus,
        emit: EmitEvent,
    ) -> None:
        """A connector just created with ``resume``: say what it resumes from, if anything."""
        try:
            found: list[dict[str, Any]] = [
                e for e in await client.get_offsets(connector) if e.get("offset") is not None
            ]
        except ConnectError as exc:
            status.offsets_on_create = OffsetsOnCreateStatus(
                on_create="resume",
                state=RESUMED,
                spec_hash=offsets_hash(spec.offsets),
                message=f"the offsets under this name could not be read when it was created: {exc}"[:1000],
            )
            return
        message = (
            f"created under a name used before: it resumes from {len(found)} partition offset(s) left by an "
            "earlier connector of that name (on a worker shared by several teams they may be another "
            "team's); spec.offsets.onCreate: clear starts a connector from scratch"
            if found
            else "no offsets under this name: it starts from the beginning its config says"
        )
        status.offsets_on_create = OffsetsOnCreateStatus(
            on_create="resume",
            state=RESUMED,
            spec_hash=offsets_hash(spec.offsets),
            found_partitions=len(found),
            found=found[:FOUND_SHOWN],
            message=message,
        )
        if found:
            emit("Warning", "ExistingOffsets", f"connector {connector} {message}")

    @staticmethod
    def later(spec: ConnectorSpec, marker: OffsetsOnCreateStatus | None, conditions: Conditions) -> None:
        """spec.offsets on a connector that exists: applied once, at creation; say what a later
        edit does (nothing)."""
        if spec.offsets is None:
            return
        if marker is None:
            conditions.set(
                CONDITION,
                False,
                "NotAtCreation",
                "spec.offsets applies when the operator creates the connector; this one existed already, so "
                "nothing was done (an OffsetReset changes the offsets of an existing connector)",
            )
        elif marker.spec_hash != offsets_hash(spec.offsets) and marker.state in (APPLIED, RESUMED):
            conditions.set(
                CONDITION,
                True,
                "ChangeIgnored",
                f"spec.offsets ({marker.on_create}) was applied when the connector was created; a later change "
                "does nothing (an OffsetReset changes the offsets of an existing connector)",
            )
