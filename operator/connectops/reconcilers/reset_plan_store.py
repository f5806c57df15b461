"""Where a reset's plan entries live: in status when they are few, else in ConfigMaps.

An alter names up to a thousand partitions and a set-to action every partition of a sink's
topics (tens of thousands for a large sink): in status they would outgrow what one object may
hold (models.bounds.STATUS_MAX_BYTES). Status shows the counts and the first
:data:`~connectops.models.bounds.STATUS_SAMPLE` entries of each connector; the whole list goes
to ConfigMaps of the reset's own (owned by it: deleted with it), written at inspect, before the
stop, and created, never replaced (reconcilers.reset_chunks). A rerun (a retried step, an
operator restarted mid-reset) reads them back: the reset step writes exactly what was planned.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from connectops.adapters.kube import KubeClient, KubeObjectMissing
from connectops.models import API_VERSION, GROUP
from connectops.models.bounds import STATUS_SAMPLE
from connectops.models.offset_reset import KipEntry
from connectops.planning.offset_reset import PlanError
from connectops.reconcilers import reset_chunks
from connectops.reconcilers.reset_run import Run, StepFailed

UID = f"{GROUP}/offset-reset-uid"


def plan_config_map(namespace: str, name: str, uid: str) -> str:
    digest = hashlib.sha256(f"{namespace}/{name}/{uid}".encode()).hexdigest()[:12]
    return f"connectops-plan-{name[:200]}-{digest}"


def owner(run: Run) -> dict[str, Any]:
    return {"api_version": API_VERSION, "kind": "OffsetReset", "name": run.name, "uid": run.uid}


def _normal(entries: list[dict[str, Any]]) -> list[KipEntry]:
    return [{"partition": e.get("partition"), "offset": e.get("offset")} for e in entries]


def _show(run: Run, entries: dict[str, list[KipEntry]], config_map: str | None) -> None:
    plan = run.plan
    run.entries = {c: _normal(v) for c, v in entries.items()}
    plan.entry_counts = {c: len(v) for c, v in entries.items()}
    plan.entries = {c: v[:STATUS_SAMPLE] for c, v in run.entries.items()} if config_map else dict(run.entries)
    plan.entries_config_map = config_map


async def publish(kube: KubeClient, run: Run, entries: dict[str, list[KipEntry]]) -> None:
    """The plan's entries: in status when each connector has at most STATUS_SAMPLE, else in
    ConfigMaps (a PlanError, before anything is stopped, when they cannot be stored)."""
    if all(len(v) <= STATUS_SAMPLE for v in entries.values()):
        _show(run, entries, None)
        return
    name = plan_config_map(run.namespace, run.name, run.uid)
    document = json.dumps(
        {"version": 1, "offsetReset": f"{run.namespace}/{run.name}", "entries": entries}, sort_keys=True
    ).encode()
    try:
        written = await reset_chunks.write(
            kube,
            run.namespace,
            name,
            document,
            labels={f"{GROUP}/plan": "entries"},
            annotations={f"{GROUP}/offset-reset": run.name, UID: run.uid},
            owner=owner(run),
        )
    except reset_chunks.TooLarge as exc:
        total = sum(len(v) for v in entries.values())
        raise PlanError(f"the plan's {total} entries cannot be stored: {exc}; nothing was changed") from None
    if not written.created:
        # a plan stored by an earlier attempt of this reset is the one carried out
        entries = await _read(kube, run, name)
    _show(run, entries, name)


async def entries(kube: KubeClient, run: Run, connector: str) -> list[KipEntry]:
    """Every planned entry of ``connector``, from this run's inspect or read back."""
    if run.entries is None:
        name = run.plan.entries_config_map
        if name is None:
            shown = run.plan.entries_for(connector)
            counted = run.plan.entry_counts.get(connector)
            if counted is not None and counted != len(shown):
                # a sample without the ConfigMap that holds the rest: never carried out as the plan
                raise StepFailed(
                    f"the plan shows {len(shown)} of {connector}'s {counted} entries and names no ConfigMap"
                )
            return shown
        run.entries = {c: _normal(v) for c, v in (await _read(kube, run, name)).items()}
    return list(run.entries.get(connector, []))


async def _read(kube: KubeClient, run: Run, name: str) -> dict[str, list[KipEntry]]:
    try:
        cm = await kube.config_map(run.namespace, name)
        annotations = (cm.metadata.annotations if cm.metadata else None) or {}
        if annotations.get(UID) != run.uid:
            raise StepFailed(f"ConfigMap {name} is not this reset's plan")
        doc = json.loads(await reset_chunks.read(kube, run.namespace, name))
    except (KubeObjectMissing, reset_chunks.ChunksInvalid, ValueError) as exc:
        raise StepFailed(f"the plan's entries in ConfigMap {name} cannot be read: {exc}") from None
    stored = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(stored, dict):
        raise StepFailed(f"ConfigMap {name} holds no plan entries")
    return {str(c): _normal(v) for c, v in stored.items() if isinstance(v, list)}
