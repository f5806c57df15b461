"""GroupFailover: move consumer group G from MM2's source cluster to its target, or restore it.

One pass, run once per object (a final phase is never redone):

1. the namespace may move G (the operator's allowlist, ``CONNECTOPS_FAILOVER_GROUPS``, read at
   each run so a changed chart value needs no restart);
2. the MirrorCheckpointConnector's config, read from the Connect worker, gives the flow; any
   MirrorCheckpointConnector of the worker that syncs G's offsets itself
   (``sync.group.offsets.enabled``) refuses the move: MirrorCheckpointTask.syncGroupOffset writes
   translated offsets to target groups with no members, which a failed-over (or restored) G is
   until its consumers start, and would overwrite what this wrote. Refused rather than G taken out
   of the sync: that means editing the connector's ``groups.exclude`` (its Connector object's
   spec, the user's) and restarting its task, and putting it back at the end a second change the
   failover would own; the refusal says which setting to change;
3. G has no members on the target (refused, members named; Kafka refuses a commit to a group
   with members anyway, which covers a consumer joining in between);
4. the plan (connectops.planning.group_failover): G's committed offsets on the source, MM2's
   checkpoints and offset syncs, per partition; a dry run stops here;
5. a backup of G's target offsets before the write: a create-only ConfigMap, never replaced (a
   retried pass keeps the first copy), not owned by the object (it outlives it);
6. the write, then G's offsets read back from the target and compared.

Refusals end the object (phase Refused, a Warning Event) with nothing written. Kafka, Connect or
API server failures before the write are retried by kopf; a read-back that disagrees after the
write ends it as Failed, naming the backup to restore.

A failback runs the same pass the other way: the group's offsets on the target's remote topics
are translated back through the flow's offset syncs (planning.group_failover.plan_failback, with
the remote topic's records between each sync and the group's offset counted on the target) and
written on the source. A restore writes a backup back where it was taken.

One module (~500 lines) because it is one pass over one object: its steps share the spec, the
status and the clients, and apart they would only pass them along.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from pydantic import ValidationError

from connectops.adapters.kafka import GroupActive, KafkaOffsets, TopicMissing, TopicRecord
from connectops.adapters.kube import KubeClient, KubeObjectMissing
from connectops.models import GROUP
from connectops.models.base import set_condition, utcnow_iso
from connectops.models.bounds import STATUS_SAMPLE
from connectops.models.group_failover import (
    FINAL_PHASES,
    FailoverAction,
    FailoverPartition,
    FailoverPhase,
    FailoverPlan,
    GroupFailoverSpec,
    GroupFailoverStatus,
)
from connectops.models.offset_reset import KafkaClusterAccess, OffsetsTopicLocation
from connectops.planning import group_failover as planning
from connectops.planning.group_failover import FailoverRefused, TopicPartition
from connectops.reconcilers.clusters import ClusterRegistry
from connectops.reconcilers.common import EmitEvent
from connectops_rules import mm2

log = logging.getLogger(__name__)

PLURAL: Final = "groupfailovers"
#: the operator setting naming, per namespace, the groups its GroupFailovers may move
ALLOWLIST_ENV: Final = "CONNECTOPS_FAILOVER_GROUPS"


class GroupKafka(Protocol):
    """What a failover needs of a Kafka cluster (connectops.adapters.kafka.KafkaOffsets)."""

    def group_offsets(self, group: str) -> dict[TopicPartition, int]: ...
    def group_members(self, group: str) -> list[str] | None: ...
    def alter_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None: ...
    def delete_group(self, group: str) -> bool: ...
    def read_topic(self, topic: str) -> list[TopicRecord] | None: ...
    def count_records(self, topic: str, ranges: Mapping[int, tuple[int, int]]) -> dict[int, int]: ...
    def watermarks(self, topic: str, *, read_committed: bool = False) -> dict[int, tuple[int, int]]: ...


KafkaFactory = Callable[[str, Mapping[str, str]], GroupKafka]


def _kafka(bootstrap: str, config: Mapping[str, str]) -> GroupKafka:
    return KafkaOffsets(bootstrap, config, timeout_s=30)


class GroupFailoverReconciler:
    def __init__(
        self,
        kube: KubeClient,
        clusters: ClusterRegistry,
        *,
        kafka_factory: KafkaFactory = _kafka,
        allowlist: Callable[[], str | None] = lambda: os.environ.get(ALLOWLIST_ENV),
    ) -> None:
        self._kube = kube
        self._clusters = clusters
        self._kafka = kafka_factory
        self._allowlist = allowlist
        #: one move of a group at a time in this process (target bootstrap, group)
        self._moving: dict[tuple[str, str], asyncio.Lock] = {}

    async def run(self, body: Mapping[str, Any], emit: EmitEvent) -> None:
        """One pass (see the module doc); writes the object's status itself."""
        meta = body["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        status = GroupFailoverStatus.from_storage(body.get("status"))
        if status.phase in FINAL_PHASES:
            return
        status.observed_generation = meta.get("generation")
        try:
            spec = GroupFailoverSpec.model_validate(body.get("spec") or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            await self._end(status, namespace, name, emit, FailoverRefused(f"invalid spec: {where}: {first['msg']}"))
            return
        lock = self._moving.setdefault((spec.target_cluster.bootstrap_servers, spec.group), asyncio.Lock())
        async with lock:
            try:
                await self._act(spec, status, namespace, name, meta["uid"], emit)
            except FailoverRefused as exc:
                await self._end(status, namespace, name, emit, exc)
                return
        await self._store(status, namespace, name)

    # -- the pass ----------------------------------------------------------------------------------

    async def _act(
        self, spec: GroupFailoverSpec, status: GroupFailoverStatus, namespace: str, name: str, uid: str, emit: EmitEvent
    ) -> None:
        group = spec.group
        try:
            allow = planning.parse_allowlist(self._allowlist())
        except ValueError as exc:
            raise FailoverRefused(
                f"the operator's {ALLOWLIST_ENV} setting is invalid ({exc}): no group may move"
            ) from None
        if not planning.group_allowed(allow, namespace, group):
            given = ", ".join(allow.get(namespace, ())) or "none"
            raise FailoverRefused(
                f"group {group} may not be moved from namespace {namespace}: the operator's failover "
                f"allowlist gives it {given} (chart value settings.failoverGroups); nothing was written"
            )
        flow, source, target = await self._clients(spec, namespace)
        if spec.action is FailoverAction.RESTORE:
            await self._restore(
                spec,
                status,
                namespace,
                {spec.source_cluster.bootstrap_servers: source, spec.target_cluster.bootstrap_servers: target},
            )
            emit("Normal", "GroupRestored", status.message or "")
            return
        back = spec.action is FailoverAction.FAILBACK
        to, to_access, plan = await self._decide(spec, flow, source, target)
        status.plan = _plan_status(plan, flow)
        moves = len(plan.moves)
        reread = "an unknown number of" if plan.reread_total is None else f"at most {plan.reread_total}"
        verb, reason = ("failed back", "FailedBack") if back else ("failed over", "FailedOver")
        if spec.dry_run:
            status.phase = FailoverPhase.PLANNED
            status.message = f"dry run: {moves} partition(s) of {group} would move; {reread} record(s) read again"
            status.conditions = set_condition(
                status.conditions, "Succeeded", None, "Planned", status.message, status.observed_generation
            )
            emit("Normal", "FailoverPlanned", status.message)
            return
        previous = await asyncio.to_thread(to.group_offsets, group)
        status.backup = await self._backup(spec, to_access, namespace, name, uid, previous)
        wanted = plan.target_offsets
        await self._write(to, group, wanted)
        read_back = await asyncio.to_thread(to.group_offsets, group)
        wrong = sorted(tp for tp, o in wanted.items() if read_back.get(tp) != o)
        if wrong:
            status.phase = FailoverPhase.FAILED
            status.message = (
                f"group {group}'s offsets read back from {to_access.bootstrap_servers} differ from those written for "
                f"{planning.named(wrong)}; its previous offsets are in ConfigMap {status.backup}"
            )
            status.conditions = set_condition(
                status.conditions, "Succeeded", False, "ReadBackDiffers", status.message, status.observed_generation
            )
            emit("Warning", "FailoverFailed", status.message)
            return
        status.written = moves
        status.phase = FailoverPhase.SUCCEEDED
        status.message = (
            f"group {group} {verb}: {moves} partition(s) written and read back; "
            f"{reread} record(s) read again; its previous offsets there in ConfigMap {status.backup}"
        )
        status.conditions = set_condition(
            status.conditions, "Succeeded", True, reason, status.message, status.observed_generation
        )
        emit("Normal", reason, status.message)

    async def preview(self, spec: GroupFailoverSpec, namespace: str) -> tuple[list[str], list[str]]:
        """What a GroupFailover of ``spec`` would write now (``connectops plan``): the changes, and
        the refusal, if any. Nothing is written; the operator's group allowlist is its own
        setting, not known here, so it is not applied."""
        if spec.action is FailoverAction.RESTORE:
            return [f"restore group {spec.group}'s offsets from ConfigMap {spec.restore_from}"], []
        try:
            flow, source, target = await self._clients(spec, namespace)
            _, to_access, plan = await self._decide(spec, flow, source, target)
        except FailoverRefused as exc:
            return [], [str(exc)]
        reread = "unknown" if plan.reread_total is None else str(plan.reread_total)
        lines = [
            f"{spec.action} group {spec.group}: {len(plan.moves)} partition(s) written on "
            f"{to_access.bootstrap_servers}, at most {reread} record(s) read again"
        ]
        lines += [
            f"  {m.topic}[{m.partition}] at {m.source_offset} -> {m.target_topic}[{m.partition}] at "
            f"{m.target_offset}" + ("" if m.reread is None else f", {m.reread} read again")
            for m in plan.moves[: planning.NAMED]
        ]
        if len(plan.moves) > planning.NAMED:
            lines.append(f"  and {len(plan.moves) - planning.NAMED} more partition(s)")
        return lines, []

    async def _clients(
        self, spec: GroupFailoverSpec, namespace: str
    ) -> tuple[planning.CheckpointFlow, GroupKafka, GroupKafka]:
        flow = await self._flow(spec, namespace)
        source = self._kafka(spec.source_cluster.bootstrap_servers, await self._config(namespace, spec.source_cluster))
        target = self._kafka(spec.target_cluster.bootstrap_servers, await self._config(namespace, spec.target_cluster))
        return flow, source, target

    async def _decide(
        self, spec: GroupFailoverSpec, flow: planning.CheckpointFlow, source: GroupKafka, target: GroupKafka
    ) -> tuple[GroupKafka, KafkaClusterAccess, planning.FailoverPlan]:
        """The cluster the group moves to (MM2's target for a failover, its source for a
        failback), checked for members, and the plan."""
        back = spec.action is FailoverAction.FAILBACK
        to, to_access = (source, spec.source_cluster) if back else (target, spec.target_cluster)
        await self._no_members(to, spec.group)
        plan = await (self._plan_back(spec, flow, source, target) if back else self._plan(spec, flow, source, target))
        return to, to_access, plan

    async def _flow(self, spec: GroupFailoverSpec, namespace: str) -> planning.CheckpointFlow:
        try:
            cluster = await self._clusters.resolve(namespace, spec.cluster_ref.name)
        except KubeObjectMissing:
            raise FailoverRefused(
                f"ConnectCluster {spec.cluster_ref.name} does not exist; nothing was written"
            ) from None
        client = cluster.client
        config = await client.get_config(spec.checkpoint_connector)
        if config is None:
            raise FailoverRefused(
                f"connector {spec.checkpoint_connector} does not exist on ConnectCluster {spec.cluster_ref.name}"
            )
        flow = planning.checkpoint_flow(spec.checkpoint_connector, config, spec.group)
        # every MirrorCheckpointConnector of the worker that writes where the group moves: the
        # flows from the source (a failover), those from the target (a failback: b -> a), both
        # (a restore: either cluster)
        sources = {
            FailoverAction.FAILOVER: {flow.source_alias},
            FailoverAction.FAILBACK: {flow.target_alias},
            FailoverAction.RESTORE: {flow.source_alias, flow.target_alias},
        }[spec.action]
        syncing = (
            [spec.checkpoint_connector] if flow.syncs_groups and spec.action is not FailoverAction.FAILBACK else []
        )
        for other in await client.list_connectors():
            if other == spec.checkpoint_connector:
                continue
            other_config = await client.get_config(other) or {}
            if (
                mm2.role_by_class(other_config.get("connector.class", "")) is mm2.Mm2Role.CHECKPOINT
                and other_config.get("source.cluster.alias") in sources
                and planning.mm2_syncs_group(other_config, spec.group)
            ):
                syncing.append(other)
        if syncing:
            raise FailoverRefused(
                f"MirrorMaker 2 syncs group {spec.group}'s offsets to the target itself "
                f"(sync.group.offsets.enabled on {', '.join(sorted(syncing))}) and would overwrite a "
                f"failover or a restore: set sync.group.offsets.enabled=false, or add {spec.group} to "
                "groups.exclude, in that connector's config, then create a new GroupFailover; nothing was written"
            )
        return flow

    async def _config(self, namespace: str, access: KafkaClusterAccess) -> dict[str, str]:
        config = dict(access.config)
        for setting, ref in sorted(access.config_from.items()):
            config[setting] = await self._kube.secret_value(namespace, ref.name, ref.key)
        return config

    @staticmethod
    async def _no_members(target: GroupKafka, group: str) -> None:
        members = await asyncio.to_thread(target.group_members, group)
        if members:
            raise FailoverRefused(
                f"group {group} has {len(members)} active member(s) on the target cluster "
                f"({', '.join(sorted(members)[:10])}): stop them first; nothing was written"
            )

    async def _plan(
        self, spec: GroupFailoverSpec, flow: planning.CheckpointFlow, source: GroupKafka, target: GroupKafka
    ) -> planning.FailoverPlan:
        committed = await asyncio.to_thread(source.group_offsets, spec.group)
        records = await asyncio.to_thread(target.read_topic, flow.checkpoints_topic)
        if records is None:
            raise FailoverRefused(
                f"the target cluster has no checkpoints topic {flow.checkpoints_topic}: MM2's "
                "MirrorCheckpointConnector has not run there; nothing was written"
            )
        checkpoints = [
            cp
            for r in records
            if r.partition == 0  # the only partition MirrorClient reads
            and (cp := planning.decode_checkpoint(r.key, r.value, r.timestamp_ms)) is not None
        ]
        holder = source if flow.offset_syncs_location == OffsetsTopicLocation.SOURCE else target
        syncs = await self._syncs(holder, flow)
        return planning.plan_failover(
            flow=flow,
            group=spec.group,
            committed=committed,
            checkpoints=checkpoints,
            syncs=syncs,
            topics=spec.topics,
            now_ms=int(time.time() * 1000),
            max_age_seconds=spec.max_checkpoint_age_seconds,
        )

    async def _plan_back(
        self, spec: GroupFailoverSpec, flow: planning.CheckpointFlow, source: GroupKafka, target: GroupKafka
    ) -> planning.FailoverPlan:
        committed = await asyncio.to_thread(target.group_offsets, spec.group)
        holder = source if flow.offset_syncs_location == OffsetsTopicLocation.SOURCE else target
        syncs = await self._syncs(holder, flow)
        ends: dict[TopicPartition, tuple[int, int]] = {}
        prefix = flow.remote_topic("")
        for topic in sorted({t[len(prefix) :] for t, _ in committed if t.startswith(prefix)}):
            try:
                marks = await asyncio.to_thread(source.watermarks, topic)
            except TopicMissing:
                continue  # refused by the plan, by partition
            ends.update({(topic, p): m for p, m in marks.items()})
        # the records of the remote topics between each sync and the group's offset, counted on
        # the target (its offsets there may skip: transaction markers; see plan_failback)
        ranges = planning.failback_ranges(flow=flow, committed=committed, syncs=syncs, topics=spec.topics)
        records: dict[TopicPartition, int] = {}
        for remote in sorted({t for t, _ in ranges}):
            counted = await asyncio.to_thread(
                target.count_records, remote, {p: r for (t, p), r in ranges.items() if t == remote}
            )
            records.update({(remote, p): n for p, n in counted.items()})
        return planning.plan_failback(
            flow=flow,
            group=spec.group,
            committed=committed,
            syncs=syncs,
            records=records,
            source_ends=ends,
            topics=spec.topics,
        )

    @staticmethod
    async def _syncs(
        holder: GroupKafka, flow: planning.CheckpointFlow
    ) -> dict[TopicPartition, list[planning.OffsetSync]]:
        syncs: dict[TopicPartition, list[planning.OffsetSync]] = {}
        for r in await asyncio.to_thread(holder.read_topic, flow.offset_syncs_topic) or []:
            sync = planning.decode_offset_sync(r.key, r.value)
            if sync is not None:
                syncs.setdefault((sync.topic, sync.partition), []).append(sync)
        return syncs

    async def _backup(
        self,
        spec: GroupFailoverSpec,
        access: KafkaClusterAccess,
        namespace: str,
        name: str,
        uid: str,
        previous: Mapping[TopicPartition, int],
    ) -> str:
        backup = planning.backup_name(name, uid)
        document = planning.backup_document(
            group=spec.group,
            bootstrap=access.bootstrap_servers,
            offsets=previous,
            failover=name,
            taken_at=utcnow_iso(),
        )
        created = await self._kube.create_config_map(
            namespace,
            backup,
            data={"backup.json": document},
            labels={f"{GROUP}/backup": "group-offsets"},
            annotations={f"{GROUP}/group-failover": name, f"{GROUP}/group-failover-uid": uid},
        )
        if not created:
            # never replaced: a retried pass keeps the copy taken before anything was written
            existing = await self._kube.config_map(namespace, backup)
            annotations = (existing.metadata.annotations if existing.metadata else None) or {}
            if annotations.get(f"{GROUP}/group-failover-uid") != uid:
                raise FailoverRefused(
                    f"ConfigMap {backup} exists and is not this failover's backup; nothing was written"
                )
        return backup

    @staticmethod
    async def _write(target: GroupKafka, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        try:
            await asyncio.to_thread(target.alter_group_offsets, group, offsets)
        except GroupActive as exc:
            # a consumer joined since the members were read: Kafka refused the whole commit
            raise FailoverRefused(f"{exc}; nothing was written") from None

    async def _restore(
        self, spec: GroupFailoverSpec, status: GroupFailoverStatus, namespace: str, clusters: Mapping[str, GroupKafka]
    ) -> None:
        source = spec.restore_from or ""
        try:
            cm = await self._kube.config_map(namespace, source)
        except KubeObjectMissing:
            raise FailoverRefused(f"backup ConfigMap {source} does not exist; nothing was written") from None
        bootstrap, offsets = planning.read_backup((cm.data or {}).get("backup.json", ""), spec.group, clusters)
        kafka = clusters[bootstrap]
        await self._no_members(kafka, spec.group)
        # Kafka (and librdkafka) delete a group's committed offsets only group-wide: the partitions
        # the move added beyond the backup go with the group, then the backup is committed
        await asyncio.to_thread(kafka.delete_group, spec.group)
        if offsets:
            await self._write(kafka, spec.group, offsets)
        back = await asyncio.to_thread(kafka.group_offsets, spec.group)
        status.backup = source
        if back != offsets:
            wrong = sorted(set(back) ^ set(offsets) | {tp for tp in offsets if back.get(tp) != offsets[tp]})
            status.phase = FailoverPhase.FAILED
            status.message = (
                f"group {spec.group}'s offsets read back differ from backup {source} for {planning.named(wrong)}"
            )
            status.conditions = set_condition(
                status.conditions, "Succeeded", False, "ReadBackDiffers", status.message, status.observed_generation
            )
            return
        status.written = len(offsets)
        status.phase = FailoverPhase.SUCCEEDED
        status.message = (
            f"group {spec.group}'s offsets on {bootstrap} restored from {source}: "
            f"{len(offsets)} partition(s), read back"
        )
        status.conditions = set_condition(
            status.conditions, "Succeeded", True, "Restored", status.message, status.observed_generation
        )

    # -- status ------------------------------------------------------------------------------------

    async def _end(
        self, status: GroupFailoverStatus, namespace: str, name: str, emit: EmitEvent, exc: FailoverRefused
    ) -> None:
        status.phase = FailoverPhase.REFUSED
        status.message = str(exc)
        status.conditions = set_condition(
            status.conditions, "Succeeded", False, "Refused", status.message, status.observed_generation
        )
        emit("Warning", "FailoverRefused", status.message)
        await self._store(status, namespace, name)

    async def _store(self, status: GroupFailoverStatus, namespace: str, name: str) -> None:
        await self._kube.patch_status(namespace, PLURAL, name, status.for_storage())


def _plan_status(plan: planning.FailoverPlan, flow: planning.CheckpointFlow) -> FailoverPlan:
    return FailoverPlan(
        partitions=len(plan.moves),
        reread_total=plan.reread_total,
        checkpoints_topic=flow.checkpoints_topic,
        offset_syncs_topic=flow.offset_syncs_topic,
        sample=[
            FailoverPartition(
                topic=m.topic,
                partition=m.partition,
                source_offset=m.source_offset,
                target_topic=m.target_topic,
                target_offset=m.target_offset,
                checkpoint_upstream=m.checkpoint_upstream,
                checkpoint_age_seconds=m.checkpoint_age_seconds,
                reread=m.reread,
            )
            for m in plan.moves[:STATUS_SAMPLE]
        ],
    )


__all__ = ["ALLOWLIST_ENV", "GroupFailoverReconciler", "GroupKafka"]
