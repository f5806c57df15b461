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

``from`` (a rename): Connect keys a source's offsets by connector name and a sink's by its
``connect-<name>`` group, so a new name starts from nothing. The old connector must have been
handed over: its Connector object (of this namespace) deleted while this one names it, which
leaves it in Connect and marks this object (:data:`HANDED_OVER`); while that object still exists
the rename waits. Then, each step idempotent: the marker is stored; the old connector is stopped
and, once STOPPED with no task, its offsets are read over REST; the new connector is created
STOPPED; the OffsetReset is created with the old offsets as its entries (and whatever an earlier
namesake left under the new name removed): from here the entries are durable in its spec, and
the reset's own lock, backup, read-back and crash safety apply. Only after it Succeeded is the
old connector deleted (Connect keeps its offsets in Kafka; nothing reads them any more). A
failure leaves the old connector STOPPED with its offsets untouched, and says so.

Why one module past the usual size: the three modes answer one question, what the connector
holds the moment it is created, and share the marker, the create and its read-back.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from connectops import failpoints
from connectops.adapters.connect_rest import ConnectApi, ConnectConflict, ConnectError
from connectops.adapters.kube import KubeClient, KubeObjectMissing
from connectops.errors import NotReadyYet
from connectops.models.base import GROUP, VERSION
from connectops.models.connect_cluster import Capabilities
from connectops.models.connector import ConnectorSpec, ConnectorStatus, OffsetsOnCreateStatus, OnCreateState
from connectops.models.offset_reset import OffsetResetStatus, ResetPhase
from connectops.planning.on_create import (
    RENAME,
    mode,
    offsets_hash,
    rename_blocker,
    rename_spec,
    reset_manifest,
    reset_name,
)
from connectops.reconcilers.common import Conditions, EmitEvent
from connectops.reconcilers.offsets_listing import listed_when_settled

CONDITION = "OffsetsOnCreate"
#: how many of the offsets found under a reused name status shows
FOUND_SHOWN = 10
#: the most partition offsets a rename carries over: an OffsetReset holds at most this many entries
MAX_CARRIED = 10000


@dataclass(frozen=True)
class NewConnector:
    """The Connector being reconciled, as the on-create steps need it."""

    client: ConnectApi
    namespace: str
    object_name: str
    uid: str
    spec: ConnectorSpec
    connector: str
    desired: dict[str, str]
    #: ``status.offsetsOnCreate`` as stored before this reconcile
    stored: OffsetsOnCreateStatus | None
    #: a rename: the Connector objects (namespace, name) managing the old connector on the same
    #: Kafka cluster, and this object's hand-over annotation
    old_claims: tuple[tuple[str, str], ...] = ()
    handed_over: str | None = None


@dataclass(frozen=True)
class OffsetsAtCreate:
    """What ``GET /offsets`` answered right after the create: the partitions with an offset, or
    the error that stopped the read."""

    entries: list[dict[str, Any]] | None
    error: str | None


class AtCreateProbe:
    """Reads the offsets under the connector's name when called, right after Connect created it
    and before the pass does anything else: its first task commits no earlier than one flush
    interval after it starts, so what is read then was left by an earlier connector of that name.
    Read any later (after the pass's other writes and Events, on a loaded worker) and the new
    connector's own first commit would be taken for an earlier one's."""

    def __init__(self, new: NewConnector, caps: Capabilities) -> None:
        self._new = new
        self._caps = caps
        #: None until called (and when the create found the connector there already)
        self.read: OffsetsAtCreate | None = None

    async def __call__(self) -> None:
        if not self._caps.stop:  # GET /offsets came with STOPPED (KIP-875, Connect 3.5)
            return
        try:
            entries = await self._new.client.get_offsets(self._new.connector)
        except ConnectError as exc:
            self.read = OffsetsAtCreate(entries=None, error=str(exc))
            return
        self.read = OffsetsAtCreate(entries=[e for e in entries if e.get("offset") is not None], error=None)


class OffsetsOnCreate:
    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    async def pending(
        self, new: NewConnector, status: ConnectorStatus, conditions: Conditions, emit: EmitEvent
    ) -> bool | None:
        """Carry on with spec.offsets of a connector being created: True while nothing else may
        change (being applied, or failed), False when it was applied just now, None when nothing
        is pending."""
        if new.stored is None or new.stored.state not in (OnCreateState.APPLYING, OnCreateState.FAILED):
            return None
        return await self._progress(new, new.stored, status, conditions, emit)

    async def create(
        self, new: NewConnector, caps: Capabilities, status: ConnectorStatus, conditions: Conditions, emit: EmitEvent
    ) -> None:
        """Create a connector whose first offsets spec.offsets (clear, set) writes."""
        if not caps.initial_state:
            message = (
                "spec.offsets onCreate clear/set creates the connector STOPPED, which needs Kafka Connect 3.7 "
                "or later (KIP-980); nothing was created. Upgrade the workers, or use onCreate: resume and an "
                "OffsetReset"
            )
            conditions.set(CONDITION, False, "NeedsConnect37", message, event_on_change=True, warning=True)
            conditions.set("Synced", False, "NeedsConnect37", "nothing was created")
            conditions.set("Ready", False, "NeedsConnect37", message)
            return
        renamed_from = None
        if new.spec.offsets is not None and new.spec.offsets.from_ is not None:
            renamed_from = new.spec.offsets.from_.connector
            if not await self._may_rename(new, renamed_from, conditions):
                return
        marker = await self._start(new, status, renamed_from)
        await self._progress(new, marker, status, conditions, emit)

    async def _may_rename(self, new: NewConnector, old: str, conditions: Conditions) -> bool:
        """Whether the rename from ``old`` may start; if not, the conditions say why and nothing
        was created or changed (the next reconcile looks again)."""
        blocker = rename_blocker(old, new.connector, new.namespace, list(new.old_claims), new.handed_over)
        if blocker is None and await new.client.get_connector(old) is None:
            blocker = (
                "RenameSourceMissing",
                f"connector {old} does not exist in Kafka Connect: there is nothing to rename from (a Connector "
                "object deleted before this one named it deletes its connector); remove spec.offsets.from to "
                "create this connector afresh",
            )
        if blocker is None:
            found = len(await new.client.get_offsets(old))
            if found > MAX_CARRIED:
                blocker = (
                    "RenameTooLarge",
                    f"connector {old} has {found} partition offsets; a rename carries at most {MAX_CARRIED}",
                )
        if blocker is None:
            return True
        reason, message = blocker
        conditions.set(CONDITION, False, reason, message, event_on_change=True, warning=True)
        conditions.set("Synced", False, reason, "nothing was created")
        conditions.set("Ready", False, reason, message)
        return False

    async def report(
        self,
        new: NewConnector,
        caps: Capabilities,
        created: bool,
        at_create: OffsetsAtCreate | None,
        status: ConnectorStatus,
        conditions: Conditions,
        emit: EmitEvent,
    ) -> None:
        """What spec.offsets (resume, or none) meant: for a connector just created, what it resumes
        from (``at_create``, read the moment it was created); for one that exists, that a later
        spec.offsets does nothing."""
        if created and caps.stop:
            self._report_resume(new, at_create, status, emit)
        elif not created:
            self._later(new.spec, new.stored, conditions)

    async def _start(
        self, new: NewConnector, status: ConnectorStatus, renamed_from: str | None
    ) -> OffsetsOnCreateStatus:
        """Store the marker before anything is created: from here on every reconcile finishes
        the job (see the module docstring)."""
        assert new.spec.offsets is not None
        marker = OffsetsOnCreateStatus(
            on_create=mode(new.spec.offsets),
            state=OnCreateState.APPLYING,
            offset_reset=reset_name(new.object_name, new.uid),
            spec_hash=offsets_hash(new.spec.offsets),
            renamed_from=renamed_from,
            message="the connector is created STOPPED; an OffsetReset applies spec.offsets before its first task runs",
        )
        status.offsets_on_create = marker
        patch = status.for_storage("offsets_on_create")
        await self._kube.patch_status(new.namespace, "connectors", new.object_name, patch)
        return marker

    async def _progress(
        self,
        new: NewConnector,
        marker: OffsetsOnCreateStatus,
        status: ConnectorStatus,
        conditions: Conditions,
        emit: EmitEvent,
    ) -> bool:
        """Carry the job on; True while the Connector must change nothing else (applying, or failed)."""
        name = marker.offset_reset or reset_name(new.object_name, new.uid)
        if marker.on_create == RENAME and marker.renamed_from:
            carried = await self._carry_over(new, marker, name, status, conditions, emit)
            if carried is not marker and carried.state == OnCreateState.FAILED:
                return True  # failed just now, before any reset (a failed reset is judged below)
            marker = carried
        if await new.client.get_connector(new.connector) is None:
            # a conflict: created concurrently, or by an attempt whose answer was lost
            with contextlib.suppress(ConnectConflict):
                await new.client.create(new.connector, new.desired, "STOPPED")
            emit(
                "Normal",
                "Created",
                f"connector {new.connector} created STOPPED: spec.offsets ({marker.on_create}) is applied "
                "before its first task runs",
            )
        reset = await self._reset(new, name)
        phase = reset.phase
        if phase == ResetPhase.SUCCEEDED:
            message = f"applied by OffsetReset {name} before the first task ran"
            if marker.on_create == RENAME and marker.renamed_from:
                message = await self._retire(new, marker.renamed_from, marker.carried, name, emit)
            done = marker.model_copy(update={"state": OnCreateState.APPLIED, "message": message})
            status.offsets_on_create = done
            conditions.set(
                CONDITION,
                True,
                "Applied",
                f"spec.offsets ({marker.on_create}) applied by OffsetReset {name}",
                event_on_change=True,
            )
            return False
        if phase == ResetPhase.FAILED:
            succeeded = next((c for c in reset.conditions if c.type == "Succeeded"), None)
            why = succeeded.message if succeeded is not None else "see the OffsetReset"
            old = (
                f" Connector {marker.renamed_from} (renamed from) is left STOPPED with its offsets untouched."
                if marker.on_create == RENAME
                else ""
            )
            message = (
                f"OffsetReset {name} failed: {why}. The connector is as that reset left it;{old} delete the "
                "OffsetReset to try again"
            )
            status.offsets_on_create = marker.model_copy(
                update={"state": OnCreateState.FAILED, "message": message[:1000]}
            )
            conditions.set(CONDITION, False, "ResetFailed", message, event_on_change=True, warning=True)
            conditions.set("Synced", False, "OffsetsOnCreateFailed", "changes wait until spec.offsets is applied")
            conditions.set("Ready", False, "OffsetsOnCreateFailed", f"OffsetReset {name} failed")
            return True
        if marker.state != OnCreateState.APPLYING:
            status.offsets_on_create = marker.model_copy(update={"state": OnCreateState.APPLYING})
        message = f"OffsetReset {name} applies spec.offsets ({marker.on_create}) before the first task runs"
        conditions.set(CONDITION, None, "Applying", message)
        conditions.set("Synced", False, "ApplyingOffsets", "changes wait until spec.offsets is applied")
        conditions.set("Ready", False, "ApplyingOffsets", message)
        return True

    async def _carry_over(
        self,
        new: NewConnector,
        marker: OffsetsOnCreateStatus,
        name: str,
        status: ConnectorStatus,
        conditions: Conditions,
        emit: EmitEvent,
    ) -> OffsetsOnCreateStatus:
        """Until the OffsetReset exists: stop the old connector, read its offsets, create the new
        connector STOPPED and the OffsetReset that writes them. Each step is safe to repeat (a
        crash between them redoes them). Returns the marker: as it was once the reset exists,
        with what was carried, or Failed (also in ``status``, with the conditions saying why)."""
        with contextlib.suppress(KubeObjectMissing):
            await self._kube.custom_object(new.namespace, "offsetresets", name)
            return marker
        old = marker.renamed_from
        assert old is not None
        if await new.client.get_connector(old) is None:
            message = (
                f"connector {old} vanished before its offsets were read: nothing was written; delete this Connector "
                "and create it without spec.offsets.from"
            )
            failed = status.offsets_on_create = marker.model_copy(
                update={"state": OnCreateState.FAILED, "message": message}
            )
            conditions.set(CONDITION, False, "RenameSourceMissing", message, event_on_change=True, warning=True)
            conditions.set("Synced", False, "OffsetsOnCreateFailed", "nothing was created")
            conditions.set("Ready", False, "OffsetsOnCreateFailed", message)
            return failed
        state = await new.client.get_status(old)
        if state is None or state.state != "STOPPED" or state.tasks:
            await new.client.stop(old)
            message = f"connector {old} is being stopped so its offsets can be carried over to {new.connector}"
            conditions.set(CONDITION, None, "Renaming", message, event_on_change=True)
            conditions.set("Synced", False, "ApplyingOffsets", "changes wait until spec.offsets is applied")
            conditions.set("Ready", False, "ApplyingOffsets", message)
            # its tasks commit their last offsets as they stop: read only once none is left
            raise NotReadyYet(f"waiting for connector {old} to stop before its offsets are read")
        failpoints.hit("rename", "stopped")
        carried = [e for e in await listed_when_settled(new.client, old) if e.get("offset") is not None]
        if len(carried) > MAX_CARRIED:
            await new.client.resume(old)
            message = f"connector {old} has {len(carried)} partition offsets; a rename carries at most {MAX_CARRIED}"
            failed = status.offsets_on_create = marker.model_copy(
                update={"state": OnCreateState.FAILED, "message": message}
            )
            conditions.set(CONDITION, False, "RenameTooLarge", message, event_on_change=True, warning=True)
            conditions.set("Ready", False, "OffsetsOnCreateFailed", message)
            return failed
        if await new.client.get_connector(new.connector) is None:
            with contextlib.suppress(ConnectConflict):
                await new.client.create(new.connector, new.desired, "STOPPED")
            emit("Normal", "Created", f"connector {new.connector} created STOPPED: it takes over from {old}")
        leftover = [e for e in await new.client.get_offsets(new.connector) if e.get("offset") is not None]
        assert new.spec.offsets is not None
        spec = rename_spec(new.object_name, carried, leftover)
        manifest = reset_manifest(new.spec.offsets, new.namespace, new.object_name, new.uid, spec=spec)
        await self._kube.create_object(GROUP, VERSION, new.namespace, "offsetresets", manifest)
        failpoints.hit("rename", "reset-created")
        emit(
            "Normal",
            "RenameCarrying",
            f"OffsetReset {name} writes the {len(carried)} partition offset(s) of {old} for {new.connector}",
        )
        updated = marker.model_copy(update={"carried": len(carried)})
        status.offsets_on_create = updated
        return updated

    async def _retire(self, new: NewConnector, old: str, carried: int | None, name: str, emit: EmitEvent) -> str:
        """The new connector verifiably holds the old one's offsets: the old one goes."""
        if await new.client.delete(old):
            emit("Normal", "Renamed", f"connector {new.connector} took over from {old}, which was deleted")
        failpoints.hit("rename", "old-deleted")
        return (
            f"renamed from {old}: {carried if carried is not None else 'its'} partition offset(s) carried over by "
            f"OffsetReset {name} before the first task ran; {old} was deleted from Kafka Connect (Connect keeps its "
            "offsets in Kafka, unused)"
        )

    async def _reset(self, new: NewConnector, name: str) -> OffsetResetStatus:
        """The OffsetReset's status; created (by its fixed name) when missing."""
        try:
            found = await self._kube.custom_object(new.namespace, "offsetresets", name)
        except KubeObjectMissing:
            assert new.spec.offsets is not None
            manifest = reset_manifest(new.spec.offsets, new.namespace, new.object_name, new.uid)
            await self._kube.create_object(GROUP, VERSION, new.namespace, "offsetresets", manifest)
            return OffsetResetStatus()
        return OffsetResetStatus.salvage(found.get("status"))

    @staticmethod
    def _report_resume(
        new: NewConnector, at_create: OffsetsAtCreate | None, status: ConnectorStatus, emit: EmitEvent
    ) -> None:
        """A connector just created with ``resume``: say what it resumes from, if anything."""
        resumed = OffsetsOnCreateStatus(
            on_create="resume", state=OnCreateState.RESUMED, spec_hash=offsets_hash(new.spec.offsets)
        )
        if at_create is None:
            message = (
                "Connect already had this connector when the operator created it (an earlier attempt whose "
                "answer was lost, or a concurrent create): what it resumes from was not read before its first commit"
            )
            status.offsets_on_create = resumed.model_copy(update={"message": message})
            return
        if at_create.entries is None:
            message = f"the offsets under this name could not be read when it was created: {at_create.error}"
            status.offsets_on_create = resumed.model_copy(update={"message": message[:1000]})
            return
        found = at_create.entries
        message = (
            f"created under a name used before: it resumes from {len(found)} partition offset(s) left by an "
            "earlier connector of that name (on a worker shared by several teams they may be another "
            "team's); spec.offsets.onCreate: clear starts a connector from scratch"
            if found
            else "no offsets under this name: it starts from the beginning its config says"
        )
        status.offsets_on_create = resumed.model_copy(
            update={"found_partitions": len(found), "found": found[:FOUND_SHOWN], "message": message}
        )
        if found:
            emit("Warning", "ExistingOffsets", f"connector {new.connector} {message}")

    @staticmethod
    def _later(spec: ConnectorSpec, marker: OffsetsOnCreateStatus | None, conditions: Conditions) -> None:
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
        elif marker.spec_hash != offsets_hash(spec.offsets) and marker.state in (
            OnCreateState.APPLIED,
            OnCreateState.RESUMED,
        ):
            conditions.set(
                CONDITION,
                True,
                "ChangeIgnored",
                f"spec.offsets ({marker.on_create}) was applied when the connector was created; a later change "
                "does nothing (an OffsetReset changes the offsets of an existing connector)",
            )
