"""The OffsetReset step machine: lock -> inspect -> backup -> stop -> reset -> offsetSyncs ->
resume -> verify -> unlock.

Durability: before a step acts, its ``Running`` state (with the attempt count) is written to
status; after, ``Done``. Every step is idempotent, so an operator that dies anywhere re-runs at
most the step that was in flight, and the machine resumes from status on the next start. The
spec that is executed is snapshotted into status at the start: a finished (or running) reset is
immutable, and later spec edits are reported, not obeyed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import hashlib
import json
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import yaml
from pydantic import ValidationError

from connectops import failpoints, metrics
from connectops.adapters.connect_rest import ConnectError, ConnectNotFound, ConnectRebalancing, ConnectRejected
from connectops.adapters.kafka_offsets import (
    KafkaClientConfigInvalid,
    KafkaOffsets,
    KafkaOffsetsError,
    OffsetRecord,
    parse_offset_key,
)
from connectops.adapters.kube import KubeClient, KubeError, KubeObjectMissing, LockHeld
from connectops.errors import NotReadyYet, SpecInvalid
from connectops.models import GROUP
from connectops.models.base import utcnow_iso
from connectops.models.checks import CheckSpec
from connectops.models.connector import ConnectorSpec
from connectops.models.offset_reset import (
    OffsetResetSpec,
    OffsetsTopicLocation,
    OffsetSyncsCleanup,
    ResetAction,
)
from connectops.planning.offset_reset import (
    ConnectorKind,
    MirrorFlow,
    PlanError,
    Step,
    TargetConnector,
    connector_kind,
    diff_offsets,
    expected_after,
    mirror_roles,
    offset_syncs_topic,
    plan_reset,
    restore_entries,
    shares_syncs_topic,
    sink_group,
    untouched,
)
from connectops.reconcilers.checks import CheckRunner, apply_check_conditions
from connectops.reconcilers.clusters import ClusterHandle, ClusterRegistry
from connectops.reconcilers.common import Backoff, Conditions, EmitEvent
from connectops.settings import Settings
from connectops.validation import describe_validation_error

PLURAL = "offsetresets"
TERMINAL = frozenset({"Succeeded", "Failed", "Planned"})
HISTORY_LIMIT = 30
#: a ConfigMap holds at most 1 MiB; larger backups are gzipped into binaryData
_INLINE_LIMIT = 700 * 1024
#: the most a backup may inflate to (a 1 MiB ConfigMap of offsets JSON compresses ~10-20x)
_BACKUP_MAX = 64 << 20


def lock_holder(namespace: str, name: str, uid: str) -> str:
    """The Lease holder identity of one OffsetReset (the uid: a re-created namesake is another holder)."""
    return f"{GROUP}/offsetreset/{namespace}/{name}/{uid}"


def backup_name(namespace: str, name: str, uid: str) -> str:
    """A backup ConfigMap name that no other reset can have: readable prefix, then a hash of the
    full identity (two long names sharing their first 200 characters still differ)."""
    digest = hashlib.sha256(f"{namespace}/{name}/{uid}".encode()).hexdigest()[:12]
    return f"connectops-backup-{name[:200]}-{digest}"


def offsets_outcome(reset_step: dict[str, Any], action: str, backup: str | None) -> str:
    """What a failed reset did to the offsets, as far as the operator can know, from its reset step."""
    kept = f" (the old offsets are in ConfigMap {backup})" if backup else ""
    if reset_step.get("state") == "Done":
        return f"The offsets WERE changed by the {action}{kept}"
    if int(reset_step.get("attempts", 0)) > 0:
        # a change may have reached Connect with its answer lost on the way back
        return f"The offsets may have been changed: the reset step ran and did not confirm{kept}"
    return "Offsets were not changed"


def spec_hash(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


class StepFailed(Exception):
    """A step cannot succeed as asked; ``unsafe_to_resume`` keeps the connector stopped."""

    def __init__(self, message: str, *, unsafe_to_resume: bool = False) -> None:
        super().__init__(message)
        self.unsafe_to_resume = unsafe_to_resume


@dataclass
class Run:
    """One execution's working state; ``status`` mirrors what is (or is about to be) stored."""

    namespace: str
    name: str
    uid: str
    generation: int | None
    status: dict[str, Any]
    spec: OffsetResetSpec
    cluster: ClusterHandle
    emit: EmitEvent
    kafka: KafkaOffsets | None = None
    managed_states: dict[str, str] = field(default_factory=dict)

    def step(self, step: Step) -> dict[str, Any]:
        for entry in self.status["steps"]:
            if entry["name"] == step:
                return dict(entry)
        raise KeyError(step)

    def set_step(self, step: Step, **values: Any) -> None:
        self.status["steps"] = [{**e, **values} if e["name"] == step else e for e in self.status["steps"]]

    def history(self, message: str) -> None:
        entries = [*self.status.get("history", []), {"time": utcnow_iso(), "message": message}]
        self.status["history"] = entries[-HISTORY_LIMIT:]

    @property
    def plan(self) -> dict[str, Any]:
        plan: dict[str, Any] = self.status.get("plan") or {}
        return plan


class OffsetResetExecutor:
    def __init__(
        self,
        kube: KubeClient,
        clusters: ClusterRegistry,
        settings: Settings,
        *,
        checks: CheckRunner | None = None,
        max_step_attempts: int = 8,
        stop_timeout: float = 90.0,
    ) -> None:
        self._checks = checks
        self._kube = kube
        self._clusters = clusters
        self._settings = settings
        self._max_attempts = max_step_attempts
        self._stop_timeout = stop_timeout

    # -- entry point ------------------------------------------------------------------------------

    async def run(self, body: Any, emit: EmitEvent) -> bool:
        """Run or resume the step machine. True when this call took the reset to its end (the
        caller then hands the connectors back to their Connector reconcile at once)."""
        meta = body["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        status: dict[str, Any] = json.loads(json.dumps(dict(body.get("status") or {})))
        status.pop("kopf", None)
        raw_spec = json.loads(json.dumps(dict(body.get("spec") or {})))
        conditions = Conditions(status.get("conditions"), meta.get("generation"), emit)

        if status.get("specHash"):
            if spec_hash(raw_spec) != status["specHash"]:
                conditions.set(
                    "SpecChangeIgnored",
                    True,
                    "Immutable",
                    "the spec changed after this reset started; an OffsetReset runs once as first "
                    "written: create a new OffsetReset for a new reset",
                    event_on_change=True,
                    warning=True,
                )
                await self._save(namespace, name, {"conditions": conditions.dump()})
            if status.get("phase") in TERMINAL:
                if status.get("pendingResume"):
                    await self._finish_resume(body, emit)
                    return True
                return False
            raw_spec = status["executedSpec"]
        try:
            spec = OffsetResetSpec.model_validate(raw_spec)
        except ValidationError as exc:
            message = describe_validation_error(exc)
            conditions.set("Succeeded", False, "InvalidSpec", message, event_on_change=True, warning=True)
            await self._save(
                namespace,
                name,
                {
                    "phase": "Failed",
                    "specHash": spec_hash(raw_spec),
                    "executedSpec": raw_spec,
                    "observedGeneration": meta.get("generation"),
                    "conditions": conditions.dump(),
                },
            )
            return False
        if not status.get("specHash"):
            status.update(
                {
                    "phase": "Running",
                    "specHash": spec_hash(raw_spec),
                    "executedSpec": raw_spec,
                    "observedGeneration": meta.get("generation"),
                    "steps": [{"name": str(s), "state": "Pending", "attempts": 0} for s in Step],
                }
            )
            conditions.set("Succeeded", None, "Running", "reset started")
            status["conditions"] = conditions.dump()
            await self._save(namespace, name, status)
            emit("Normal", "Started", f"offset {spec.action} started")

        try:
            cluster_name, connector = await self._target(namespace, spec)
            cluster = await self._clusters.resolve(namespace, cluster_name, max_age=0)
        except (KubeObjectMissing, SpecInvalid) as exc:
            # Nothing is locked or stopped yet. Say why on the object, then retry (kopf, with
            # back-off): the reference may appear or be fixed, as in a GitOps sync out of order.
            reason = "ReferenceNotFound" if isinstance(exc, KubeObjectMissing) else "InvalidTarget"
            conditions.set("Succeeded", None, reason, f"{exc}; retrying", event_on_change=True, warning=True)
            await self._save(namespace, name, {"phase": "Pending", "conditions": conditions.dump()})
            raise
        run = Run(namespace, name, meta["uid"], meta.get("generation"), status, spec, cluster, emit)
        run.status["phase"] = "Running"  # from Pending, if it waited for its target
        run.status.setdefault("connectors", self._connector_names(spec, connector))
        if cluster.spec.kafka is not None:
            run.kafka = KafkaOffsets(cluster.spec.kafka.bootstrap_servers, cluster.spec.kafka.config)
        await self._execute(run, body)
        return True

    async def managing_connectors(self, body: Any) -> list[str]:
        """Names of the Connector objects that manage the connectors this reset touched.

        While the reset held its lock their status said "offset reset in progress"; left alone
        they would say so until their next resync.
        """
        namespace = body["metadata"]["namespace"]
        status = body.get("status") or {}
        try:
            spec = OffsetResetSpec.model_validate(status.get("executedSpec") or body.get("spec") or {})
        except ValidationError:
            return []
        if spec.connector_ref is not None:
            return [spec.connector_ref.name]
        assert spec.cluster_ref is not None
        touched = set(status.get("connectors") or [])
        names = []
        for obj in await self._kube.custom_objects(namespace, "connectors"):
            try:
                managed = ConnectorSpec.model_validate(obj.get("spec") or {})
            except ValidationError:
                continue
            name = obj["metadata"]["name"]
            if managed.cluster_ref.name == spec.cluster_ref.name and (managed.connector_name or name) in touched:
                names.append(name)
        return names

    async def _target(self, namespace: str, spec: OffsetResetSpec) -> tuple[str, str]:
        if spec.connector_ref is not None:
            obj = await self._kube.custom_object(namespace, "connectors", spec.connector_ref.name)
            try:
                managed = ConnectorSpec.model_validate(obj["spec"])
            except ValidationError as exc:
                raise SpecInvalid(
                    f"Connector {spec.connector_ref.name} is invalid: {describe_validation_error(exc)}"
                ) from None
            return managed.cluster_ref.name, managed.connector_name or spec.connector_ref.name
        assert spec.cluster_ref is not None
        name = spec.connector_name or (spec.mirror_maker2.source_connector if spec.mirror_maker2 else "")
        return spec.cluster_ref.name, name

    @staticmethod
    def _connector_names(spec: OffsetResetSpec, connector: str) -> list[str]:
        mm2 = spec.mirror_maker2
        if mm2 is None:
            return [connector]
        names = [mm2.source_connector, mm2.checkpoint_connector, mm2.heartbeat_connector]
        return [n for n in names if n]

    async def _save(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        await self._kube.patch_status(namespace, PLURAL, name, status)

    async def release(self, body: Any) -> None:
        meta = body["metadata"]
        status = dict(body.get("status") or {})
        connectors = status.get("connectors") or []
        spec_raw = status.get("executedSpec")
        if not connectors or not spec_raw:
            return
        try:
            cluster_name, _ = await self._target(meta["namespace"], OffsetResetSpec.model_validate(spec_raw))
        except (KubeError, ValidationError):
            return
        holder = lock_holder(meta["namespace"], meta["name"], meta["uid"])
        for connector in connectors:
            await self._kube.release_lock(meta["namespace"], cluster_name, connector, holder)

    # -- the machine ------------------------------------------------------------------------------

    async def _execute(self, run: Run, body: Any) -> None:
        actions: dict[Step, Callable[[Run], Awaitable[str]]] = {
            Step.LOCK: self._lock,
            Step.INSPECT: self._inspect,
            Step.BACKUP: self._backup,
            Step.STOP: self._stop,
            Step.RESET: self._reset,
            Step.OFFSET_SYNCS: self._offset_syncs,
            Step.RESUME: self._resume,
            Step.VERIFY: self._verify,
            Step.UNLOCK: self._unlock,
        }
        for step in Step:
            state = run.step(step)["state"]
            if state in ("Done", "Skipped"):
                continue
            if run.spec.dry_run and step in (
                Step.BACKUP,
                Step.STOP,
                Step.RESET,
                Step.OFFSET_SYNCS,
                Step.RESUME,
                Step.VERIFY,
            ):
                run.set_step(step, state="Skipped", message="dry run")
                continue
            if step is Step.OFFSET_SYNCS and str(step) not in run.plan.get("steps", []):
                run.set_step(step, state="Skipped", message="no MirrorMaker 2 offset-syncs cleanup")
                continue
            attempts = int(run.step(step).get("attempts", 0)) + 1
            run.set_step(step, state="Running", attempts=attempts, startedAt=utcnow_iso())
            run.status["currentStep"] = str(step)
            await self._save(run.namespace, run.name, run.status)
            started = time.monotonic()
            try:
                message = await actions[step](run)
            except StepFailed as exc:
                await self._fail(run, step, str(exc), unsafe=exc.unsafe_to_resume)
                return
            except PlanError as exc:
                await self._fail(run, step, str(exc), unsafe=False)
                return
            except (ConnectError, KubeError, KafkaOffsetsError, NotReadyYet, Exception) as exc:
                # An unexpected exception's text is not known to be secret-free: its type only.
                known = isinstance(exc, ConnectError | KubeError | KafkaOffsetsError | NotReadyYet)
                text = run.cluster.redactor(str(exc)) if known else f"unexpected {type(exc).__name__}"
                # a request Connect or Kafka refused as such fails the same way when repeated
                permanent = isinstance(exc, ConnectRejected | KafkaClientConfigInvalid)
                if attempts >= self._max_attempts or isinstance(exc, LockHeld) or permanent:
                    await self._fail(
                        run,
                        step,
                        f"{text} (after {attempts} attempts)",
                        unsafe=step is Step.RESET and run.plan.get("strategy") == "tombstone",
                    )
                    return
                run.set_step(step, message=f"attempt {attempts} failed: {text}")
                run.history(f"{step}: attempt {attempts} failed: {text}")
                await self._save(run.namespace, run.name, run.status)
                raise
            failpoints.hit(str(step), "effects")
            elapsed = time.monotonic() - started
            metrics.RESET_STEP_SECONDS.labels(step=str(step)).observe(elapsed)
            run.set_step(step, state="Done", finishedAt=utcnow_iso(), message=message)
            run.history(f"{step}: {message} ({elapsed:.2f}s)")
            run.emit("Normal", f"Step{str(step)[0].upper()}{str(step)[1:]}", message)
            await self._save(run.namespace, run.name, run.status)
            failpoints.hit(str(step), "done")

        conditions = Conditions(run.status.get("conditions"), run.generation, run.emit)
        if run.spec.dry_run:
            run.status["phase"] = "Planned"
            conditions.set(
                "Succeeded",
                True,
                "Planned",
                "dry run: the plan is in status.plan; nothing changed",
                event_on_change=True,
            )
        else:
            run.status["phase"] = "Succeeded"
            conditions.set("Succeeded", True, "Completed", f"offset {run.spec.action} completed", event_on_change=True)
            await self._launch_check(run, body, conditions)
        run.status["currentStep"] = None
        run.status["conditions"] = conditions.dump()
        await self._save(run.namespace, run.name, run.status)
        metrics.RESETS.labels(
            action=str(run.spec.action), strategy=str(run.status.get("strategy")), phase=run.status["phase"]
        ).inc()

    async def _check_spec(self, run_namespace: str, spec: OffsetResetSpec) -> CheckSpec:
        if spec.connector_ref is None:
            return CheckSpec()
        obj = await self._kube.custom_object(run_namespace, "connectors", spec.connector_ref.name)
        return ConnectorSpec.model_validate(obj["spec"]).check

    async def _launch_check(self, run: Run, body: Any, conditions: Conditions) -> None:
        """The finished reset is a change like any other: check lag and balance afterwards."""
        if self._checks is None:
            return
        launched = await self._checks.launch(
            namespace=run.namespace,
            owner={
                "apiVersion": body.get("apiVersion", f"{GROUP}/v1alpha1"),
                "kind": "OffsetReset",
                "metadata": {"name": run.name, "uid": run.uid},
            },
            suffix="reset",
            connector=run.status["connectors"][0],
            cluster=run.cluster.spec,
            check=await self._check_spec(run.namespace, run.spec),
            trigger=f"offset {run.spec.action} completed",
        )
        if launched is not None:
            run.status["lastCheck"] = launched

    async def follow_check(self, body: Any, emit: EmitEvent) -> None:
        """Poll the post-reset check until it has a verdict, then publish it (timer-driven)."""
        if self._checks is None:
            return
        meta = body["metadata"]
        status = dict(body.get("status") or {})
        last = status.get("lastCheck")
        if not last or status.get("phase") != "Succeeded":
            return
        spec = OffsetResetSpec.model_validate(status.get("executedSpec") or body.get("spec"))
        updated, result = await self._checks.poll(
            meta["namespace"], dict(last), await self._check_spec(meta["namespace"], spec)
        )
        patch: dict[str, Any] = {}
        if updated != last:
            patch["lastCheck"] = updated
        if result is not None:
            conditions = Conditions(status.get("conditions"), meta.get("generation"), emit)
            apply_check_conditions(conditions, result)
            patch["conditions"] = conditions.dump()
        if patch:
            await self._save(meta["namespace"], meta["name"], patch)

    async def _fail(self, run: Run, step: Step, message: str, *, unsafe: bool) -> None:
        """End in Failed. The connector is resumed unless that would be unsafe (offsets partly
        rewritten); then it stays STOPPED, locked, and the condition says so and where the backup is.

        If resuming fails too, the reset is Failed with ``pendingResume`` set and this raises: the
        handler retries, and every later run retries the resume until it works (a connector the
        operator stopped is never left stopped without someone still working on it).
        """
        run.set_step(step, state="Failed", finishedAt=utcnow_iso(), message=message)
        run.history(f"{step}: failed: {message}")
        stopped_by_us = run.step(Step.STOP)["state"] in ("Running", "Done")
        backup = (run.status.get("backup") or {}).get("configMap")
        # past the first call that may have changed offsets, resuming would run the connector on
        # half-applied offsets: it stays stopped and locked until a restore or a person decides
        unsafe = unsafe or (step in (Step.RESET, Step.OFFSET_SYNCS) and self._changed(run))
        detail = message
        resume_error: ConnectError | None = None
        if stopped_by_us and unsafe:
            run.status["restoreManifest"] = self._restore_manifest(run, backup) if backup else None
            detail = (
                f"{message}. The connector(s) {', '.join(run.status['connectors'])} stay STOPPED "
                f"and locked because their offsets may be partly rewritten; the old offsets "
                f"are in ConfigMap {backup}. To put them back, apply the OffsetReset in "
                f"status.restoreManifest (kubectl get offsetreset {run.name} -n {run.namespace} "
                f"-o jsonpath='{{.status.restoreManifest}}' | kubectl apply -f -): it takes over this "
                "reset's lock. Deleting this object unlocks the connector(s) as they are"
            )
        elif stopped_by_us:
            offsets = offsets_outcome(run.step(Step.RESET), str(run.spec.action), backup)
            try:
                await self._resume(run)
                detail = f"{message}. {offsets}; the connector(s) were resumed"
            except ConnectError as exc:
                resume_error = exc
                run.status["pendingResume"] = True
                detail = (
                    f"{message}. {offsets}. Resuming failed too ({run.cluster.redactor(str(exc))}): the "
                    "connector(s) are STOPPED until the operator's retries of the resume get through"
                )
            # Unlocked either way: a Connector object managing the connector may then resume it too.
            with contextlib.suppress(KubeError):
                await self._unlock(run)
        else:
            with contextlib.suppress(KubeError):
                await self._unlock(run)
        conditions = Conditions(run.status.get("conditions"), run.generation, run.emit)
        conditions.set(
            "Succeeded",
            False,
            f"{str(step)[0].upper()}{str(step)[1:]}Failed",
            detail,
            event_on_change=True,
            warning=True,
        )
        run.status.update({"phase": "Failed", "currentStep": None, "conditions": conditions.dump()})
        await self._save(run.namespace, run.name, run.status)
        metrics.RESETS.labels(
            action=str(run.spec.action), strategy=str(run.status.get("strategy")), phase="Failed"
        ).inc()
        if resume_error is not None:
            raise resume_error

    def _restore_manifest(self, run: Run, backup: str) -> str:
        """The OffsetReset that puts this reset's backup back, ready for kubectl apply."""
        spec: dict[str, Any] = {"action": "restore", "restoreFrom": backup, "strategy": run.status.get("strategy")}
        executed = run.spec
        if executed.connector_ref is not None:
            spec["connectorRef"] = {"name": executed.connector_ref.name}
        else:
            assert executed.cluster_ref is not None
            spec["clusterRef"] = {"name": executed.cluster_ref.name}
            if executed.connector_name:
                spec["connectorName"] = executed.connector_name
            if executed.mirror_maker2 is not None:
                mm2 = executed.mirror_maker2.model_dump(by_alias=True, exclude_none=True, mode="json")
                # the offset-syncs topic was handled (or not) by the failed reset: leave it
                spec["mirrorMaker2"] = {**mm2, "offsetSyncs": "keep"}
            # unmanaged connectors: back to the state they had before the failed reset
            first: dict[str, Any] = next(iter(run.plan.get("connectors") or []), {})
            spec["resume"] = first.get("resumeTo", "running")
        name = f"{run.name[:200]}-restore-{run.uid[:8]}"
        manifest = {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": "OffsetReset",
            "metadata": {"name": name, "namespace": run.namespace},
            "spec": spec,
        }
        return yaml.safe_dump(manifest, sort_keys=False)

    async def _finish_resume(self, body: Any, emit: EmitEvent) -> None:
        """Retry the resume of a Failed reset whose own resume failed (see ``_fail``)."""
        meta = body["metadata"]
        status: dict[str, Any] = json.loads(json.dumps(dict(body.get("status") or {})))
        status.pop("kopf", None)
        spec = OffsetResetSpec.model_validate(status["executedSpec"])
        cluster_name, _ = await self._target(meta["namespace"], spec)
        cluster = await self._clusters.resolve(meta["namespace"], cluster_name, max_age=0)
        run = Run(meta["namespace"], meta["name"], meta["uid"], meta.get("generation"), status, spec, cluster, emit)
        said = await self._resume(run)
        run.history(f"resumed after the failure: {said}")
        run.status["pendingResume"] = None
        previous: dict[str, Any] = next(
            (c for c in run.status.get("conditions") or [] if c.get("type") == "Succeeded"), {}
        )
        text = str(previous.get("message", ""))
        cut = text.find(" Resuming failed too")
        conditions = Conditions(run.status.get("conditions"), run.generation, emit)
        conditions.set(
            "Succeeded",
            False,
            str(previous.get("reason", "Failed")),
            (text[:cut] if cut >= 0 else text) + " The connector(s) were resumed afterwards.",
        )
        run.status["conditions"] = conditions.dump()
        emit("Normal", "Resumed", f"connector(s) resumed after the failed reset: {said}")
        await self._save(run.namespace, run.name, run.status)

    # -- steps ------------------------------------------------------------------------------------

    def _holder(self, run: Run) -> str:
        return lock_holder(run.namespace, run.name, run.uid)

    async def _lock(self, run: Run) -> str:
        owner = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "OffsetReset", "name": run.name, "uid": run.uid}
        said = f"locked {', '.join(run.status['connectors'])}"
        for connector in run.status["connectors"]:
            try:
                await self._kube.acquire_lock(run.namespace, run.cluster.name, connector, self._holder(run), owner)
            except LockHeld as held:
                if not await self._restores_failed_reset(run, held.holder):
                    raise
                await self._kube.transfer_lock(
                    run.namespace, run.cluster.name, connector, held.holder, self._holder(run), owner
                )
                said = f"took over the lock of the failed reset whose backup this restores ({held.holder})"
        return said

    async def _restores_failed_reset(self, run: Run, holder: str) -> bool:
        """A restore of a failed reset's own backup may take that reset's lock: the connector then
        stays locked (and stopped) from the failure until its offsets are back."""
        if run.spec.action != ResetAction.RESTORE:
            return False
        prefix = f"{GROUP}/offsetreset/{run.namespace}/"
        if not holder.startswith(prefix):
            return False
        name, _, uid = holder[len(prefix) :].rpartition("/")
        try:
            obj = await self._kube.custom_object(run.namespace, PLURAL, name)
        except KubeObjectMissing:
            return False
        status = obj.get("status") or {}
        return (
            obj["metadata"].get("uid") == uid
            and status.get("phase") == "Failed"
            and (status.get("backup") or {}).get("configMap") == run.spec.restore_from
        )

    async def _unlock(self, run: Run) -> str:
        for connector in run.status["connectors"]:
            await self._kube.release_lock(run.namespace, run.cluster.name, connector, self._holder(run))
        return "released the lock"

    async def _inspect(self, run: Run) -> str:
        client = run.cluster.client
        version, caps = await run.cluster.capabilities(0.0)
        targets = []
        roles = mirror_roles(run.spec)
        managed = await self._managed_specs(run)
        for connector in run.status["connectors"]:
            info = await client.get_connector(connector)
            if info is None:
                raise PlanError(f"connector {connector} does not exist in Kafka Connect")
            state = await client.get_status(connector)
            owner = managed.get(connector)
            targets.append(
                TargetConnector(
                    name=connector,
                    kind=roles.get(connector)
                    or connector_kind(str(info["config"].get("connector.class", "")), info.get("type")),
                    state=state.state if state else "UNASSIGNED",
                    config=info["config"],
                    managed_state=str(owner[1].state) if owner else None,
                    offsets_external=bool(owner and owner[1].offsets_managed_externally),
                )
            )
        flows = await self._other_flows(run, {name: owner[0] for name, owner in managed.items()})
        plan = plan_reset(run.spec, targets, caps, has_kafka_access=run.kafka is not None, other_flows=flows)
        summary = plan.summary()
        summary["workerVersion"] = version
        summary["configs"] = {
            t.name: {
                "kind": str(t.kind),
                "group": sink_group(t.name, t.config) if t.kind is ConnectorKind.SINK else None,
                "offsetsTopic": t.config.get("offsets.storage.topic"),
            }
            for t in targets
        }
        summary["entries"] = {k: [e.model_dump(mode="json") for e in v] for k, v in plan.entries.items()}
        if run.spec.action in (ResetAction.TO_EARLIEST, ResetAction.TO_LATEST, ResetAction.TO_TIMESTAMP):
            summary["entries"] = await self._sink_target_offsets(run, targets)
        # what the offsets are now, for the plan (and the dry run) to show
        current = {}
        for target in targets:
            current[target.name] = await self._current_offsets(run, target.name)
        summary["current"] = {k: v[:50] for k, v in current.items()}
        summary["currentCounts"] = {k: len(v) for k, v in current.items()}
        if run.spec.action in (ResetAction.TO_EARLIEST, ResetAction.TO_LATEST, ResetAction.TO_TIMESTAMP):
            summary["scope"] = {
                t.name: self._scope(run, t, summary["entries"].get(t.name, []), current[t.name]) for t in targets
            }
        run.status["plan"] = summary
        if run.spec.action == ResetAction.RESTORE:
            # before anything is stopped: a backup that is not this connector's own is refused here
            await self._check_backup(run, await self._read_backup(run.namespace, run.spec.restore_from or ""))
        run.status["strategy"] = str(plan.strategy)
        run.status["connectorKind"] = ",".join(sorted({str(t.kind) for t in targets}))
        # recorded once, before anything is stopped: the truth about "before"
        run.status.setdefault("previousStates", {t.name: t.state for t in targets})
        return (
            f"{plan.strategy} {run.spec.action} of {', '.join(t.name for t in targets)} "
            f"({', '.join(str(t.kind) for t in targets)}, worker {version})"
        )

    @staticmethod
    def _scope(
        run: Run, target: TargetConnector, entries: list[dict[str, Any]], current: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """What a set-to action touches and what it leaves alone, for the plan (and the dry run)."""
        topics = sorted({str(e["partition"]["kafka_topic"]) for e in entries})
        kept = untouched(entries, current)
        return {
            "topics": topics,
            "allTopics": not run.spec.topics,
            "partitions": len(entries),
            "untouchedPartitions": len(kept),
            "untouchedTopics": sorted({str(e["partition"].get("kafka_topic")) for e in kept}),
            "description": (
                f"{'every topic the connector reads' if not run.spec.topics else 'only the topics named'}: "
                f"{', '.join(topics) or 'none'}; {len(kept)} other committed partition offset(s) stay as they are"
            ),
        }

    async def _managed_specs(self, run: Run) -> dict[str, tuple[str, ConnectorSpec]]:
        """Connector objects of this namespace on the reset's ConnectCluster, by connector name."""
        out: dict[str, tuple[str, ConnectorSpec]] = {}
        for obj in await self._kube.custom_objects(run.namespace, "connectors"):
            try:
                spec = ConnectorSpec.model_validate(obj.get("spec") or {})
            except ValidationError:
                continue
            name = str(obj["metadata"]["name"])
            if spec.cluster_ref.name == run.cluster.name:
                out[spec.connector_name or name] = (name, spec)
        return out

    async def _other_flows(self, run: Run, managed_by: dict[str, str]) -> list[MirrorFlow]:
        """MirrorSourceConnectors on the worker, outside this reset, that use the offset-syncs topic
        it would clean up. Class names are matched loosely ("MirrorSource" in the simple name, so
        forks and wrappers count): a false match only asks the user to choose explicitly."""
        mm2 = run.spec.mirror_maker2
        if mm2 is None or OffsetSyncsCleanup(mm2.offset_syncs) in (OffsetSyncsCleanup.KEEP, OffsetSyncsCleanup.NONE):
            return []
        location = OffsetsTopicLocation(mm2.offset_syncs_topic_location)
        topic = offset_syncs_topic(
            mm2.source_alias, mm2.target_alias, location, mm2.separator, mm2.internal_topic_separator_enabled
        )
        access = mm2.source_cluster if location is OffsetsTopicLocation.SOURCE else mm2.target_cluster
        kafka = access or run.cluster.spec.kafka
        bootstrap = kafka.bootstrap_servers if kafka is not None else ""
        ours = set(run.status["connectors"])
        flows = []
        for name in await run.cluster.client.list_connectors():
            if name in ours:
                continue
            info = await run.cluster.client.get_connector(name)
            if info is None:
                continue
            config = {str(k): str(v) for k, v in (info.get("config") or {}).items()}
            if "MirrorSource" not in config.get("connector.class", "").rsplit(".", 1)[-1]:
                continue
            if shares_syncs_topic(config, topic, bootstrap):
                flows.append(MirrorFlow(name, managed_by.get(name)))
        return flows

    async def _current_offsets(self, run: Run, connector: str) -> list[dict[str, Any]]:
        try:
            return await run.cluster.client.get_offsets(connector)
        except ConnectNotFound:
            return []

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
                spec = _timestamp_ms(run.spec.timestamp or "")
            offsets = await asyncio.to_thread(kafka.list_offsets, partitions, spec)
            out[target.name] = [
                {"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}
                for (t, p), o in sorted(offsets.items())
            ]
        return out

    async def _backup(self, run: Run) -> str:
        """Save the current offsets where a user can restore them: a ConfigMap that is not owned
        by the OffsetReset, so deleting the reset keeps the backup."""
        client = run.cluster.client
        connectors: dict[str, Any] = {}
        total = 0
        for connector in run.status["connectors"]:
            cfg = run.plan["configs"][connector]
            entry: dict[str, Any] = {"kind": cfg["kind"], "offsets": await client.get_offsets(connector)}
            total += len(entry["offsets"])
            if run.plan["strategy"] == "tombstone" and run.kafka is not None:
                if cfg["kind"] == "sink":
                    entry["group"] = cfg["group"]
                    offsets = await asyncio.to_thread(run.kafka.group_offsets, cfg["group"])
                    entry["groupOffsets"] = [[t, p, o] for (t, p), o in sorted(offsets.items())]
                else:
                    records = await self._read_records(run, connector)
                    entry["records"] = [_record_json(r) for r in records if r.value is not None]
            connectors[connector] = entry
        name = backup_name(run.namespace, run.name, run.uid)
        document = json.dumps(
            {
                "version": 1,
                "cluster": run.cluster.name,
                "offsetReset": f"{run.namespace}/{run.name}",
                "takenAt": utcnow_iso(),
                "connectors": connectors,
            },
            sort_keys=True,
        )
        data: dict[str, str] | None = {"backup.json": document}
        binary: dict[str, str] | None = None
        if len(document) > _INLINE_LIMIT:
            data = None
            binary = {"backup.json.gz": base64.b64encode(gzip.compress(document.encode())).decode()}
        created = await self._kube.create_config_map(
            run.namespace,
            name,
            data=data,
            binary_data=binary,
            labels={f"{GROUP}/backup": "offsets", f"{GROUP}/cluster": run.cluster.name},
            annotations={
                f"{GROUP}/offset-reset": run.name,
                f"{GROUP}/offset-reset-uid": run.uid,
                f"{GROUP}/connectors": ",".join(run.status["connectors"]),
            },
        )
        if not created:
            # Never overwritten: the first copy is the one taken before anything changed (a
            # retried step or a second operator process would otherwise replace it with later
            # offsets). It must be this reset's own, though.
            existing = await self._kube.config_map(run.namespace, name)
            annotations = (existing.metadata.annotations if existing.metadata else None) or {}
            if annotations.get(f"{GROUP}/offset-reset-uid") != run.uid:
                raise StepFailed(f"ConfigMap {name} exists and is not this reset's backup; nothing was changed")
            run.status["backup"] = run.status.get("backup") or {"configMap": name, "offsets": total}
            return f"kept the backup already taken by this reset in ConfigMap {name}"
        run.status["backup"] = {"configMap": name, "offsets": total, "takenAt": utcnow_iso()}
        return f"saved {total} partition offset(s) to ConfigMap {name}"

    def _offsets_topics(self, run: Run, connector: str) -> list[str]:
        topics = [run.cluster.spec.topics.offsets]
        extra = run.plan["configs"][connector].get("offsetsTopic")
        if extra and extra not in topics:
            topics.append(extra)
        return topics

    async def _read_records(self, run: Run, connector: str) -> list[OffsetRecord]:
        assert run.kafka is not None
        records: list[OffsetRecord] = []
        for topic in self._offsets_topics(run, connector):
            records.extend(await asyncio.to_thread(run.kafka.read_connector_offsets, topic, {connector}))
        return records

    async def _stop(self, run: Run) -> str:
        client = run.cluster.client
        for connector in run.status["connectors"]:
            await client.stop(connector)
        deadline = time.monotonic() + self._stop_timeout
        pending = list(run.status["connectors"])
        backoff = Backoff()
        while pending:
            state = await client.get_status(pending[0])
            if state is not None and state.state == "STOPPED" and not state.tasks:
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise NotReadyYet(f"{pending[0]} did not reach STOPPED with no tasks in {self._stop_timeout:.0f}s")
            await backoff.wait()
        return f"stopped {', '.join(run.status['connectors'])} (STOPPED, no tasks)"

    async def _reset(self, run: Run) -> str:
        action = ResetAction(run.spec.action)
        if action is ResetAction.RESTORE:
            return await self._restore(run)
        done = []
        for connector in run.status["connectors"]:
            entries = run.plan.get("entries", {}).get(connector, [])
            if action is not ResetAction.RESET and not entries:
                continue
            if run.plan["strategy"] == "rest":
                await self._reset_rest(run, connector, action, entries)
            else:
                await self._reset_tombstone(run, connector, action, entries)
            done.append(connector)
        return f"{action} applied to {', '.join(done) or 'nothing'} ({run.plan['strategy']})"

    async def _reset_rest(self, run: Run, connector: str, action: ResetAction, entries: list[dict[str, Any]]) -> None:
        client = run.cluster.client
        before = await client.get_offsets(connector)
        if action is ResetAction.RESET:
            await self._change(run, connector, "DELETE offsets", 0, lambda: client.delete_offsets(connector))
        else:
            # alter and the set-to actions: one PATCH naming exactly the partitions asked for;
            # every other partition keeps its offset (no DELETE first: it would clear them all)
            await self._change(
                run, connector, "PATCH offsets", len(entries), lambda: client.patch_offsets(connector, entries)
            )
        await self._confirm(run, connector, expected_after(action, entries, before))

    async def _change(
        self, run: Run, connector: str, call: str, partitions: int, act: Callable[[], Awaitable[Any]]
    ) -> Any:
        """Make one offsets-changing call, recorded in status before it is sent (so a crash or a lost
        answer still counts as "may have changed") and after it returns, with Connect's answer."""
        changes: list[dict[str, Any]] = run.status.setdefault("changes", [])
        entry: dict[str, Any] = {"connector": connector, "call": call, "partitions": partitions, "state": "Started"}
        changes.append(entry)
        await self._save(run.namespace, run.name, {"changes": changes})
        try:
            result = await act()
        except ConnectError as exc:
            # Refused means Connect checked the request and did nothing (a 4xx, a rebalance). A
            # 5xx or no answer at all may come after some offsets were written (a source's
            # offsets are several records, written without a transaction): it stays Started.
            if isinstance(exc, ConnectRejected | ConnectRebalancing) or (exc.status or 0) in range(400, 500):
                entry["state"] = "Refused"
                await self._save(run.namespace, run.name, {"changes": changes})
            raise
        entry["state"] = "Done"
        if isinstance(result, str) and result:
            entry["message"] = run.cluster.redactor(result)[:1000]
            entry["confirmedByConnector"] = _confirmation(result)
            if entry["confirmedByConnector"] is False:
                self._external_offsets_condition(run)
        await self._save(run.namespace, run.name, {"changes": changes, "conditions": run.status.get("conditions")})
        return result

    @staticmethod
    def _external_offsets_condition(run: Run) -> None:
        unconfirmed = [c for c in run.status.get("changes", []) if c.get("confirmedByConnector") is False]
        message = "; ".join(f"{c['connector']}: {c.get('message', '')}" for c in unconfirmed)
        conditions = Conditions(run.status.get("conditions"), run.generation, run.emit)
        conditions.set(
            "OffsetsExternallyManaged", True, "NotConfirmedByConnector", message, event_on_change=True, warning=True
        )
        run.status["conditions"] = conditions.dump()

    @staticmethod
    def _changed(run: Run) -> bool:
        """Whether any offsets call may have taken effect (Done, or Started with no answer)."""
        return any(c.get("state") in ("Started", "Done") for c in run.status.get("changes", []))

    async def _confirm(self, run: Run, connector: str, expected: list[dict[str, Any]]) -> None:
        """Read back while still stopped (after a resume the connector commits new offsets at
        once, and the comparison would mean nothing): from Connect's GET /offsets and, where the
        cluster gives Kafka access, from the broker itself (the sink's group, or the records in
        the offsets topics). ``expected`` describes the whole connector, so a partition the reset
        was not asked to touch and that moved is caught too. Connect may lag its topic briefly."""
        deadline = time.monotonic() + 30
        backoff = Backoff()
        while True:
            actual = [e for e in await run.cluster.client.get_offsets(connector) if e.get("offset") is not None]
            problems = [f"Connect: {p}" for p in diff_offsets(expected, actual)]
            if not problems:
                broker = await self._broker_offsets(run, connector)
                problems = [f"Kafka: {p}" for p in diff_offsets(expected, broker or [])] if broker is not None else []
            if not problems:
                return
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"{connector}: offsets after the reset differ from the plan: " + "; ".join(problems[:5]),
                    unsafe_to_resume=True,
                )
            await backoff.wait()

    async def _broker_offsets(self, run: Run, connector: str) -> list[dict[str, Any]] | None:
        """The connector's offsets as Kafka holds them; None without Kafka access."""
        if run.kafka is None:
            return None
        cfg = run.plan["configs"][connector]
        if cfg["kind"] == "sink":
            group = await asyncio.to_thread(run.kafka.group_offsets, cfg["group"])
            return [
                {"partition": {"kafka_topic": t, "kafka_partition": p}, "offset": {"kafka_offset": o}}
                for (t, p), o in sorted(group.items())
            ]
        latest: dict[bytes, OffsetRecord] = {}
        # the connector-specific topic comes last: Connect reads it in preference to the worker's
        for record in await self._read_records(run, connector):
            latest[record.key] = record
        return [
            {"partition": r.partition_map, "offset": r.source_offset()}
            for r in latest.values()
            if r.value is not None and r.partition_map is not None
        ]

    async def _reset_tombstone(
        self, run: Run, connector: str, action: ResetAction, entries: list[dict[str, Any]]
    ) -> None:
        kafka = run.kafka
        assert kafka is not None
        cfg = run.plan["configs"][connector]
        before = await self._broker_offsets(run, connector) or []
        if cfg["kind"] == "sink":
            group = cfg["group"]
            if action is ResetAction.RESET:
                await self._change(
                    run, connector, "delete group", 0, lambda: asyncio.to_thread(kafka.delete_group, group)
                )
            else:
                # alter and set-to: commit only the named partitions; the group's other offsets stay
                wanted = {
                    (e["partition"]["kafka_topic"], int(e["partition"]["kafka_partition"])): int(
                        e["offset"]["kafka_offset"]
                    )
                    for e in entries
                }
                await self._change(
                    run,
                    connector,
                    "commit group offsets",
                    len(wanted),
                    lambda: asyncio.to_thread(kafka.alter_group_offsets, group, wanted),
                )
            await self._confirm(run, connector, expected_after(action, entries, before))
            return
        records = await self._read_records(run, connector)
        if action is ResetAction.RESET:
            live = [r for r in records if r.value is not None]
            await self._change(
                run, connector, "tombstones", len(live), lambda: asyncio.to_thread(kafka.write_tombstones, live)
            )
            for topic in self._offsets_topics(run, connector):
                await asyncio.to_thread(kafka.verify_tombstones, topic, [r for r in live if r.topic == topic])
            await self._confirm(run, connector, [])
            return
        # alter by rewriting existing keys' values (the key bytes must be Connect's own)
        by_partition = {json.dumps(r.partition_map, sort_keys=True): r for r in records}
        rewritten = []
        for entry in entries:
            rec = by_partition.get(json.dumps(entry["partition"], sort_keys=True))
            if rec is None:
                raise StepFailed(
                    f"{connector}: partition {entry['partition']} has no record in the offsets topic; "
                    "strategy tombstone can only alter existing partitions (Connect's key bytes "
                    "cannot be reproduced safely); use strategy rest"
                )
            value = None if entry["offset"] is None else json.dumps(entry["offset"], separators=(",", ":")).encode()
            rewritten.append(
                OffsetRecord(
                    topic=rec.topic,
                    partition=rec.partition,
                    offset=-1,
                    key=rec.key,
                    value=value,
                    connector=rec.connector,
                    partition_map=rec.partition_map,
                )
            )
        await self._change(
            run,
            connector,
            "offsets records",
            len(rewritten),
            lambda: asyncio.to_thread(kafka.restore_records, rewritten),
        )
        await self._confirm(run, connector, expected_after(action, entries, before))

    async def _restore(self, run: Run) -> str:
        source = run.spec.restore_from or ""
        backup = await self._read_backup(run.namespace, source)
        client = run.cluster.client
        restored = []
        for connector in run.status["connectors"]:
            saved = backup["connectors"].get(connector)
            if saved is None:
                raise StepFailed(f"backup {source} holds no offsets for {connector}")
            entries = [e for e in saved["offsets"] if e.get("offset") is not None]
            if run.plan["strategy"] == "rest":
                patch = restore_entries(entries, await client.get_offsets(connector))
                if patch:
                    await self._change(
                        run, connector, "PATCH offsets", len(patch), _call(client.patch_offsets, connector, patch)
                    )
            elif saved["kind"] == "sink":
                await self._restore_group(run, connector, saved)
            else:
                await self._restore_records(run, connector, saved)
            await self._confirm(run, connector, expected_after(ResetAction.RESTORE, entries, []))
            restored.append(f"{connector} ({len(entries)} partition(s))")
        return f"restored {', '.join(restored)} from ConfigMap {source}"

    async def _restore_group(self, run: Run, connector: str, saved: dict[str, Any]) -> None:
        """A sink's group back to the saved offsets. Only the connector's own group is written,
        whatever group the backup names."""
        kafka = run.kafka
        assert kafka is not None
        group = run.plan["configs"][connector]["group"]
        wanted = {(str(t), int(p)): int(o) for t, p, o in saved.get("groupOffsets", [])}
        extra = set(await asyncio.to_thread(kafka.group_offsets, group)) - set(wanted)
        if extra:
            # the admin API cannot delete one partition's offset: clearing the group first is the
            # only way back, and a failure between the two calls keeps the connector stopped
            await self._change(run, connector, "delete group", 0, lambda: asyncio.to_thread(kafka.delete_group, group))
        await self._change(
            run,
            connector,
            "commit group offsets",
            len(wanted),
            lambda: asyncio.to_thread(kafka.alter_group_offsets, group, wanted),
        )

    async def _restore_records(self, run: Run, connector: str, saved: dict[str, Any]) -> None:
        """A source's offsets records back as saved, plus tombstones for keys that exist now and
        did not then. Only records keyed by this connector, into its own offsets topics."""
        kafka = run.kafka
        assert kafka is not None
        topics = set(self._offsets_topics(run, connector))
        records = [_record_from_json(r) for r in saved.get("records", [])]
        foreign = [r for r in records if r.topic not in topics or _key_connector(r.key) != connector]
        if foreign:
            raise StepFailed(
                f"backup {run.spec.restore_from} holds {len(foreign)} record(s) for {connector} that are not "
                "its own offsets (another connector's key, or another topic); nothing was restored"
            )
        keys = {r.key for r in records}
        stale = [r for r in await self._read_records(run, connector) if r.value is not None and r.key not in keys]
        if records:
            await self._change(
                run,
                connector,
                "offsets records",
                len(records),
                lambda: asyncio.to_thread(kafka.restore_records, records),
            )
        if stale:
            await self._change(
                run, connector, "tombstones", len(stale), lambda: asyncio.to_thread(kafka.write_tombstones, stale)
            )

    async def _check_backup(self, run: Run, doc: dict[str, Any]) -> None:
        """A backup is a ConfigMap anyone who may write ConfigMaps in the namespace could have
        written: restore only what belongs to the target connectors. Source records must carry
        the connector's own key, for its own offsets topics; a sink's group offsets are always
        written to the sink's own group, whatever group the file names."""
        source = run.spec.restore_from
        saved_all = doc.get("connectors")
        if not isinstance(saved_all, dict):
            raise PlanError(f"ConfigMap {source} is not a connectops offsets backup (no connectors)")
        for connector in run.status["connectors"]:
            saved = saved_all.get(connector)
            if not isinstance(saved, dict) or not isinstance(saved.get("offsets"), list):
                raise PlanError(f"backup {source} holds no offsets for {connector}")
            if run.plan["strategy"] != "tombstone" or run.plan["configs"][connector]["kind"] == "sink":
                continue
            topics = set(self._offsets_topics(run, connector))
            try:
                records = [_record_from_json(r) for r in saved.get("records", [])]
            except (KeyError, TypeError, ValueError):
                raise PlanError(f"backup {source}: unreadable records for {connector}") from None
            foreign = [r for r in records if r.topic not in topics or _key_connector(r.key) != connector]
            if foreign:
                raise PlanError(
                    f"backup {source} holds {len(foreign)} record(s) under {connector} that are not its own "
                    "offsets (another connector's key, or a topic that is not its offsets topic); nothing was restored"
                )

    async def _read_backup(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            cm = await self._kube.config_map(namespace, name)
        except KubeError as exc:
            raise StepFailed(f"backup ConfigMap {name}: {exc}") from None
        try:
            if cm.data and "backup.json" in cm.data:
                doc = json.loads(cm.data["backup.json"])
            elif cm.binary_data and "backup.json.gz" in cm.binary_data:
                # a user may write this ConfigMap: inflate with a cap (a gzip bomb would not stop)
                inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                text = inflate.decompress(base64.b64decode(cm.binary_data["backup.json.gz"]), _BACKUP_MAX)
                if inflate.unconsumed_tail:
                    raise StepFailed(f"ConfigMap {name}: the backup is larger than {_BACKUP_MAX >> 20} MiB inflated")
                doc = json.loads(text)
            else:
                raise StepFailed(f"ConfigMap {name} is not a connectops offsets backup")
        except (ValueError, zlib.error):
            raise StepFailed(f"ConfigMap {name} is not a readable connectops offsets backup") from None
        if not isinstance(doc, dict):
            raise StepFailed(f"ConfigMap {name} is not a connectops offsets backup")
        return doc

    async def _offset_syncs(self, run: Run) -> str:
        mm2 = run.spec.mirror_maker2
        assert mm2 is not None
        topic = run.plan["offsetSyncsTopic"]
        access = mm2.source_cluster if run.plan["offsetSyncsCluster"] == "source" else mm2.target_cluster
        if access is not None:
            kafka = KafkaOffsets(access.bootstrap_servers, access.config)
        elif run.kafka is not None:
            kafka = run.kafka
        else:
            raise StepFailed(f"no Kafka access for the {run.plan['offsetSyncsCluster']} cluster holding {topic}")
        if OffsetSyncsCleanup(mm2.offset_syncs) is OffsetSyncsCleanup.DELETE:
            await asyncio.to_thread(kafka.delete_topic, topic)
            return f"deleted offset-syncs topic {topic}"
        await asyncio.to_thread(kafka.truncate_topic, topic)
        return f"truncated offset-syncs topic {topic}"

    async def _resume(self, run: Run) -> str:
        client = run.cluster.client
        plan_connectors = {c["name"]: c for c in run.plan.get("connectors", [])}
        said = []
        for connector in run.status["connectors"]:
            target = plan_connectors.get(connector, {}).get("resumeTo", "running")
            if target == "running":
                await client.resume(connector)
            elif target == "paused":
                await client.pause(connector)
            said.append(f"{connector} -> {target}")
        return "; ".join(said)

    async def _verify(self, run: Run) -> str:
        """The connectors reached the state they were returned to (running with tasks, etc.)."""
        client = run.cluster.client
        plan_connectors = {c["name"]: c for c in run.plan.get("connectors", [])}
        deadline = time.monotonic() + 60
        for connector in run.status["connectors"]:
            want = plan_connectors.get(connector, {}).get("resumeTo", "running").upper()
            backoff = Backoff()
            while True:
                state = await client.get_status(connector)
                ok = (
                    state is not None
                    and state.state == want
                    and (want != "RUNNING" or (state.tasks and all(t.state == "RUNNING" for t in state.tasks)))
                )
                if ok:
                    break
                if time.monotonic() > deadline:
                    raise NotReadyYet(f"{connector} is {state.state if state else 'missing'}, expected {want}")
                await backoff.wait()
        return "connector(s) in their resumed state"


def _call(fn: Callable[..., Awaitable[Any]], *args: Any) -> Callable[[], Awaitable[Any]]:
    """A call bound to its arguments now (a lambda in a loop would see the loop's last values)."""
    return lambda: fn(*args)


def _key_connector(key: bytes) -> str | None:
    parsed = parse_offset_key(key)
    return parsed[0] if parsed else None


def _confirmation(message: str) -> bool | None:
    """Whether Connect's answer to a PATCH/DELETE of offsets says the connector confirmed the change
    (its alterOffsets returned true) or that only the framework-managed offsets changed."""
    if "framework-managed offsets" in message:
        return False
    if message.startswith("The offsets for this connector have been"):
        return True
    return None


def _timestamp_ms(text: str) -> int:
    if text.isdigit():
        return int(text)
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _record_json(record: OffsetRecord) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "partition": record.partition,
        "key": base64.b64encode(record.key).decode(),
        "value": base64.b64encode(record.value).decode() if record.value is not None else None,
    }


def _record_from_json(item: dict[str, Any]) -> OffsetRecord:
    return OffsetRecord(
        topic=item["topic"],
        partition=int(item["partition"]),
        offset=-1,
        key=base64.b64decode(item["key"]),
        value=base64.b64decode(item["value"]) if item.get("value") is not None else None,
        connector=None,
        partition_map=None,
    )
