"""The inspect step of an OffsetReset: what is there before anything is stopped.

It reads each connector's config and state, the Connector objects that manage them (their
desired state, and whether they declare offsets kept outside Kafka), for MirrorMaker 2 the other
flows sharing the offset-syncs topic, and for set-to actions the target offsets (ListOffsets),
then asks the planner (pure) for the plan it publishes in ``status.plan``. A restore checks its
backup here, before anything is stopped: every refusal that does not need the offsets is made
here. The connectors' offsets are not read here, except by a dry run: a running connector's
committed offsets trail its position until its tasks stop (they commit every flush interval
and as they stop), so the reset reads them after the stop (:func:`publish_current`, called by
the backup step), and a dry run, which never stops, says that its figures are as of the last
commit.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import ValidationError

from connectops.adapters.connect_rest import ConnectNotFound
from connectops.adapters.kube import KubeClient
from connectops.concurrency.gather import both, each, unwrap
from connectops.models.bounds import STATUS_SAMPLE
from connectops.models.connector import ConnectorSpec
from connectops.models.offset_reset import PlanConfig, PlanScope, ResetAction, ResetPlanStatus, timestamp_ms
from connectops.planning.offset_reset import (
    ConnectorKind,
    PlanError,
    TargetConnector,
    connector_kind,
    mirror_roles,
    plan_reset,
    sink_group,
    untouched,
)
from connectops.reconcilers import reset_mm2, reset_offsets_from, reset_plan_store
from connectops.reconcilers.common import each_object
from connectops.reconcilers.reset_backup import BackupStore
from connectops.reconcilers.reset_run import Run


class Inspector:
    def __init__(self, kube: KubeClient, backups: BackupStore) -> None:
        self._kube = kube
        self._backups = backups

    async def inspect(self, run: Run) -> str:
        """What is there before anything changes: the connectors, their kinds and offsets, and the plan."""
        client = run.cluster.client
        # Every read that does not depend on another runs at once: the reset's connector is
        # running, and every millisecond here is added to the time before it stops. Measured
        # one after another they took ~110 ms, most of it the Kafka client's first connection
        # (with SASL, its authentication); at once, the slowest of them.
        dry_run = run.spec.dry_run
        server, specs, reads, offsets, topic_present, backup_writable = await asyncio.gather(
            run.cluster.capabilities(0.0),
            self._managed_specs(run),
            each(both(client.get_connector(c), client.get_status(c)) for c in run.connectors),
            # a dry run shows the offsets read now; a reset reads them after the stop, and
            # counts them now to refuse, before the stop, a backup that could not be stored
            each(current_offsets(run, c) for c in run.connectors),
            self._offsets_topic_present(run),
            _done() if dry_run else self._backups.check_writable(run),
            return_exceptions=True,
        )
        (version, caps), managed, per_connector = unwrap(server), unwrap(specs), unwrap(reads)
        unwrap(backup_writable)
        targets = []
        roles = mirror_roles(run.spec)
        read_now = dict(zip(run.connectors, unwrap(offsets), strict=True))
        for connector, (info, state) in zip(run.connectors, per_connector, strict=True):
            if info is None:
                raise PlanError(f"connector {connector} does not exist in Kafka Connect")
            owner = managed.get(connector)
            targets.append(
                TargetConnector(
                    name=connector,
                    # the class first, else the stored offsets' shape: the rule the check applies
                    kind=roles.get(connector)
                    or connector_kind(
                        str(info["config"].get("connector.class", "")), info.get("type"), read_now[connector]
                    ),
                    state=state.state if state else "UNASSIGNED",
                    config=info["config"],
                    managed_state=str(owner[1].state) if owner else None,
                    offsets_external=bool(owner and owner[1].offsets_managed_externally),
                )
            )
        self._offsets_topic_exists(run, targets, topic_present)
        flows = await reset_mm2.other_flows(run, {name: owner[0] for name, owner in managed.items()})
        spec, read_from = run.spec, ""
        if spec.offsets_from:
            loaded = await reset_offsets_from.load(self._kube, run.namespace, spec.offsets_from, len(spec.offsets))
            spec = spec.model_copy(update={"offsets": [*spec.offsets, *loaded.entries]})
            read_from = f"; alter entries read from ConfigMap {', '.join(loaded.read)}"
        plan = plan_reset(spec, targets, caps, has_kafka_access=run.kafka is not None, other_flows=flows)
        published = ResetPlanStatus.model_validate(plan.summary())
        published.worker_version = version
        for entry in published.connectors:
            owner = managed.get(entry.name)
            if owner is not None:
                entry.managed_by, entry.managed_generation = owner[0], owner[2]
        published.configs = {
            t.name: PlanConfig(
                kind=str(t.kind),
                group=sink_group(t.name, t.config) if t.kind is ConnectorKind.SINK else None,
                offsets_topic=t.config.get("offsets.storage.topic"),
            )
            for t in targets
        }
        entries = {k: [e.model_dump(mode="json") for e in v] for k, v in plan.entries.items()}
        if is_set_to(run):
            entries = await self._sink_target_offsets(run, targets)
        run.status.plan = published
        # before anything is stopped: a plan or a backup that could not be stored is refused here
        await reset_plan_store.publish(self._kube, run, entries)
        if dry_run:
            # the connector runs on: as of its last commit (the dry run's outcome says so)
            publish_current(run, read_now, as_of="lastCommit")
        else:
            self._backups.check_storable(run, read_now)
        if run.spec.action == ResetAction.RESTORE:
            # before anything is stopped: a backup that is not this connector's own is refused here
            self._backups.check(run, await self._backups.read(run.namespace, run.spec.restore_from or ""))
        run.status.strategy = str(plan.strategy)
        run.status.connector_kind = ",".join(sorted({str(t.kind) for t in targets}))
        # recorded once, before anything is stopped: the truth about "before"
        if not run.status.previous_states:
            run.status.previous_states = {t.name: t.state for t in targets}
        return (
            f"{plan.strategy} {run.spec.action} of {', '.join(t.name for t in targets)} "
            f"({', '.join(str(t.kind) for t in targets)}, worker {version}){read_from}"
        )

    @staticmethod
    async def _offsets_topic_present(run: Run) -> bool | None:
        """Whether the workers' offsets topic exists; None without Kafka access. Asked before
        the connectors' kinds are known, beside the other reads: only a source's reset uses the
        answer, and the question opens the Kafka connection every later step reuses."""
        if run.kafka is None:
            return None
        return await asyncio.to_thread(run.kafka.topic_exists, run.cluster.spec.topics.offsets)

    @staticmethod
    def _offsets_topic_exists(run: Run, targets: list[TargetConnector], present: bool | BaseException | None) -> None:
        """With Kafka access, a source's offsets are read back from the worker's offsets topic
        (ConnectCluster spec.topics.offsets): one that is not there (a ConnectCluster that names
        the wrong topic) is refused here, before anything is stopped, rather than after a change.
        ``present`` is ``_offsets_topic_present``'s answer, or what it raised: raised for a sink
        too, because every reset with Kafka access reads the broker back after its change, and
        a Kafka that does not answer now is better found before the connector stops."""
        if isinstance(present, BaseException):
            raise present
        if present is None or all(t.kind is ConnectorKind.SINK for t in targets):
            return
        topic = run.cluster.spec.topics.offsets
        if not present:
            raise PlanError(
                f"the workers' offsets topic {topic!r} (ConnectCluster {run.cluster.name} spec.topics.offsets) "
                "does not exist on its Kafka cluster: set spec.topics.offsets to the workers' "
                "offset.storage.topic; nothing was changed"
            )

    async def _managed_specs(self, run: Run) -> dict[str, tuple[str, ConnectorSpec, int | None]]:
        """Connector objects of this namespace on the reset's ConnectCluster, by connector name:
        the object's name, its spec and its generation."""
        out: dict[str, tuple[str, ConnectorSpec, int | None]] = {}
        async for obj in each_object(self._kube.custom_object_pages("connectors", run.namespace)):
            try:
                spec = ConnectorSpec.model_validate(obj.get("spec") or {})
            except ValidationError:
                continue
            name = str(obj["metadata"]["name"])
            if spec.cluster_ref.name == run.cluster.name:
                generation = obj["metadata"].get("generation")
                out[spec.connector_name or name] = (name, spec, generation if isinstance(generation, int) else None)
        return out

    async def _sink_target_offsets(self, run: Run, targets: list[TargetConnector]) -> dict[str, list[dict[str, Any]]]:
        """toEarliest / toLatest / toTimestamp: ListOffsets on the sink's topics, as PATCH entries."""
        if run.kafka is None:
            raise PlanError(f"action {run.spec.action} needs spec.kafka on the ConnectCluster (ListOffsets)")
        kafka = run.kafka
        out: dict[str, list[dict[str, Any]]] = {}
        for target in targets:
            topics = list(run.spec.topics)
            reads = [t.strip() for t in str(target.config.get("topics") or "").split(",") if t.strip()]
            foreign = sorted(set(topics) - set(reads)) if reads else []
            if foreign:
                raise PlanError(
                    f"{target.name} does not read topic(s) {', '.join(foreign)} (it reads {', '.join(reads)})"
                )
            if not topics:
                if reads:
                    topics = reads
                elif target.config.get("topics.regex"):
                    topics = await asyncio.to_thread(kafka.topics_matching, target.config["topics.regex"])
            partitions = await asyncio.to_thread(kafka.partitions_for, topics)
            if run.spec.action == ResetAction.TO_EARLIEST:
                spec: str | int = "earliest"
            elif run.spec.action == ResetAction.TO_LATEST:
                spec = "latest"
            else:
                spec = timestamp_ms(run.spec.timestamp or "")
            offsets = await asyncio.to_thread(kafka.list_offsets, partitions, spec)
            out[target.name] = [
                {"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}
                for (t, p), o in sorted(offsets.items())
            ]
        return out


async def _done() -> None:
    return None


def is_set_to(run: Run) -> bool:
    return run.spec.action in (ResetAction.TO_EARLIEST, ResetAction.TO_LATEST, ResetAction.TO_TIMESTAMP)


async def current_offsets(run: Run, connector: str) -> list[dict[str, Any]]:
    """The connector's offsets as Connect reports them now (none for a connector Connect does not
    know yet: inspect refuses that one with its own words)."""
    try:
        return await run.cluster.client.get_offsets(connector)
    except ConnectNotFound:
        return []


def publish_current(run: Run, current: dict[str, list[dict[str, Any]]], *, as_of: str) -> None:
    """What the offsets were before the change, in the plan: ``as_of`` ``stop`` (read after the
    connector stopped: what the backup holds) or ``lastCommit`` (a dry run: the connector runs).
    A set-to action's scope (what it leaves alone) is counted from the same read."""
    plan = run.plan
    plan.current = {k: v[:STATUS_SAMPLE] for k, v in current.items()}
    plan.current_counts = {k: len(v) for k, v in current.items()}
    plan.current_as_of = as_of
    if is_set_to(run):
        # the whole entries: inspect holds them, a rerun read them back (the backup step does)
        planned = run.entries if run.entries is not None else {c: plan.entries_for(c) for c in run.connectors}
        plan.scope = {c: _scope(run, planned.get(c, []), current.get(c, [])) for c in run.connectors}


def _scope(run: Run, entries: list[dict[str, Any]], current: list[dict[str, Any]]) -> PlanScope:
    """What a set-to action touches and what it leaves alone, for the plan (and the dry run)."""
    topics = sorted({str(e["partition"]["kafka_topic"]) for e in entries})
    kept = untouched(entries, current)
    kept_topics = sorted({str(e["partition"].get("kafka_topic")) for e in kept})
    more = len(topics) - STATUS_SAMPLE
    return PlanScope(
        # bounded: a sink may read hundreds of topics (the description counts them all)
        topics=topics[:STATUS_SAMPLE],
        all_topics=not run.spec.topics,
        partitions=len(entries),
        untouched_partitions=len(kept),
        untouched_topics=kept_topics[:STATUS_SAMPLE],
        description=(
            f"{'every topic the connector reads' if not run.spec.topics else 'only the topics named'}: "
            f"{', '.join(topics[:STATUS_SAMPLE]) or 'none'}{f' and {more} more' if more > 0 else ''}; "
            f"{len(kept)} other committed partition offset(s) stay as they are"
        ),
    )
