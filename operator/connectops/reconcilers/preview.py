"""``connectops plan`` online: ask the API server and Connect what applying would change.

Read-only by construction: it calls only GETs and Connect's validate endpoint (which changes
nothing), with the user's own credentials (their kubeconfig reads the Secrets and the
ConnectCluster, exactly as far as their rights go). The decisions are the reconcilers' pure
functions (:mod:`connectops.planning.preview`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from connectops.adapters.addresses import api_server_endpoints
from connectops.adapters.connect_rest import ConnectError
from connectops.adapters.kafka import KafkaOffsetsError
from connectops.adapters.kube import KubeClient, KubeError, KubeObjectMissing, SecretKeyMissing
from connectops.errors import SpecInvalid
from connectops.models.connector import ConnectorSpec
from connectops.models.group_failover import GroupFailoverSpec
from connectops.models.offset_reset import OffsetResetSpec, ResetAction, ResetPhase
from connectops.planning.connector import RestartBook, plan_connector, render_config
from connectops.planning.preview import SPECS, Document, ObjectPlan, connector_changes, reset_moves, validate
from connectops.reconcilers.clusters import ClusterHandle, ClusterRegistry
from connectops.reconcilers.connector import observe
from connectops.reconcilers.group_failover import GroupFailoverReconciler
from connectops.settings import Settings

PLURALS = {
    "ConnectCluster": "connectclusters",
    "Connector": "connectors",
    "OffsetReset": "offsetresets",
    "GroupFailover": "groupfailovers",
}


def _normalised(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with its defaults filled in, as the API server stores it (its schema defaults
    what a manifest leaves out: a missing field is not a change)."""
    try:
        dumped: dict[str, Any] = SPECS[kind].model_validate(spec).model_dump(by_alias=True, mode="json")
    except ValidationError:
        return spec
    return dumped


class Previewer:
    def __init__(self, kube: KubeClient, settings: Settings) -> None:
        self._kube = kube
        self._settings = settings
        # the operator's refusals, the API server's own address included: the plan says what it would
        self._clusters = ClusterRegistry(kube, settings, api_servers=api_server_endpoints())

    async def aclose(self) -> None:
        await self._clusters.aclose()

    async def plan(self, docs: Sequence[Document]) -> list[ObjectPlan]:
        in_files = {(d.namespace, d.kind, d.name): d for d in docs}
        plans = []
        for doc in docs:
            spec, plan = validate(doc)
            if spec is not None:
                try:
                    await self._object(doc, plan)
                    if isinstance(spec, ConnectorSpec):
                        await self._connector(doc, spec, plan)
                    elif isinstance(spec, OffsetResetSpec):
                        await self._reset(doc, spec, plan, in_files)
                    elif isinstance(spec, GroupFailoverSpec):
                        changes, refused = await GroupFailoverReconciler(self._kube, self._clusters).preview(
                            spec, doc.namespace
                        )
                        plan.changes.extend(changes)
                        plan.errors.extend(refused)
                except (KubeError, ConnectError, SpecInvalid, KafkaOffsetsError) as exc:
                    plan.errors.append(str(exc))
            plans.append(plan)
        return plans

    async def _object(self, doc: Document, plan: ObjectPlan) -> None:
        """The object itself: created, or its spec changed (what kubectl diff would say)."""
        try:
            live = await self._kube.custom_object(doc.namespace, PLURALS[doc.kind], doc.name)
        except KubeObjectMissing:
            plan.changes.append(f"create the {doc.kind} object")
            return
        old, new = _normalised(doc.kind, live.get("spec") or {}), _normalised(doc.kind, doc.spec)
        if old != new:
            keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            plan.changes.append(f"change the {doc.kind} object's spec: {', '.join(keys)}")

    async def _cluster(self, namespace: str, name: str, plan: ObjectPlan) -> ClusterHandle | None:
        try:
            return await self._clusters.resolve(namespace, name)
        except KubeObjectMissing:
            plan.notes.append(
                f"ConnectCluster {namespace}/{name} is not in the cluster yet: what Connect would do is not known"
            )
            return None

    async def _connector(self, doc: Document, spec: ConnectorSpec, plan: ObjectPlan) -> None:
        cluster = await self._cluster(doc.namespace, spec.cluster_ref.name, plan)
        if cluster is None:
            return
        name = spec.connector_name or doc.name
        secrets: dict[str, str] = {}
        for key, source in spec.config_from.items():
            ref = source.secret_key_ref
            try:
                secrets[key] = await self._kube.secret_value(doc.namespace, ref.name, ref.key)
            except (KubeObjectMissing, SecretKeyMissing) as exc:
                plan.errors.append(f"configFrom {key}: {exc}")
        if plan.errors:
            return
        desired = render_config(spec, name, secrets)
        client = cluster.client
        _, caps = await cluster.capabilities(self._settings.capabilities_ttl_seconds)
        live = await client.get_config(name)
        state = await client.get_status(name)
        observed = observe(state, live)
        # a failure as if seen long ago: the preview says what the operator does about it, not
        # when (its first restart comes initialSeconds after the operator sees it)
        seen = RestartBook(0, None, failing_since=0.0)
        decided = plan_connector(spec, desired, observed, caps, locked_by=None, restarts=seen, now=time.time())
        if decided.unsupported:
            plan.errors.append(decided.unsupported)
            return
        if decided.needs_validation:
            result = await client.validate(spec.connector_class, desired)
            for key, messages in sorted(result.errors.items()):
                plan.errors.append(f"Connect refuses {key}: {' '.join(messages)}"[:500])
            if result.error_count and not result.errors:
                plan.errors.append(f"Connect refuses the config ({result.error_count} error(s))")
        plan.changes.extend(
            connector_changes(name, desired, live, decided.actions, frozenset(secrets), offsets=spec.offsets)
        )

    async def _reset(
        self, doc: Document, spec: OffsetResetSpec, plan: ObjectPlan, in_files: dict[tuple[str, str, str], Document]
    ) -> None:
        try:
            live = await self._kube.custom_object(doc.namespace, "offsetresets", doc.name)
            phase = (live.get("status") or {}).get("phase")
            if phase in (ResetPhase.SUCCEEDED, ResetPhase.FAILED, ResetPhase.RUNNING):
                plan.changes.clear()
                plan.notes.append(f"this reset already ran ({phase}); a reset is immutable: nothing more happens")
                return
        except KubeObjectMissing:
            pass
        target = await self._reset_target(doc, spec, in_files, plan)
        if target is None:
            return
        connector, cluster = target
        before = await cluster.client.get_offsets(connector)
        action = ResetAction(spec.action)
        if action in (ResetAction.RESET, ResetAction.ALTER):
            requested = [e.model_dump(mode="json", exclude_none=False) for e in spec.offsets]
            moves, kept = reset_moves(action, requested, before)
            plan.changes.append(f"stop {connector}, {action} its offsets, resume it; {len(moves)} partition(s) move:")
            plan.changes.extend(f"  - {m}" for m in moves[:50])
            if len(moves) > 50:
                plan.changes.append(f"  - … and {len(moves) - 50} more")
            plan.notes.append(f"{kept} partition(s) keep their offset; a backup is taken first")
            if spec.offsets_from:
                plan.notes.append(
                    f"the entries of the {len(spec.offsets_from)} ConfigMap(s) in offsetsFrom are not shown here: "
                    "the reset reads them at inspect (its dryRun shows every partition)"
                )
        else:
            plan.changes.append(f"stop {connector}, {action} its offsets, resume it")
            plan.notes.append(
                f"{len(before)} partition offset(s) now; where {action} puts them is read from the broker "
                "when the reset runs (its dryRun shows it)"
            )

    async def _reset_target(
        self,
        doc: Document,
        spec: OffsetResetSpec,
        in_files: dict[tuple[str, str, str], Document],
        plan: ObjectPlan,
    ) -> tuple[str, ClusterHandle] | None:
        if spec.connector_ref is not None:
            ref = spec.connector_ref.name
            source: dict[str, Any] | None = None
            if (doc.namespace, "Connector", ref) in in_files:
                source = in_files[(doc.namespace, "Connector", ref)].spec
            else:
                try:
                    source = (await self._kube.custom_object(doc.namespace, "connectors", ref)).get("spec") or {}
                except KubeObjectMissing:
                    plan.errors.append(f"connectorRef {ref}: no Connector {doc.namespace}/{ref}")
                    return None
            try:
                connector_spec = ConnectorSpec.model_validate(source)
            except ValidationError:
                plan.errors.append(f"connectorRef {ref}: that Connector's spec is invalid")
                return None
            name, cluster_name = connector_spec.connector_name or ref, connector_spec.cluster_ref.name
        elif spec.connector_name is not None and spec.cluster_ref is not None:
            name, cluster_name = spec.connector_name, spec.cluster_ref.name
        else:
            plan.changes.append("reset the MirrorMaker 2 flow's connectors")
            plan.notes.append("a MirrorMaker 2 reset spans several connectors: its dryRun shows every partition")
            return None
        cluster = await self._cluster(doc.namespace, cluster_name, plan)
        return None if cluster is None else (name, cluster)
