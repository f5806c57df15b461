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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from connectops import failpoints, metrics
from connectops.adapters.connect_rest import ConnectError, ConnectNotFound, ConnectRejected
from connectops.adapters.kafka_offsets import (
    KafkaClientConfigInvalid,
    KafkaOffsets,
    KafkaOffsetsError,
    OffsetRecord,
)
from connectops.adapters.kube import KubeClient, KubeError, KubeObjectMissing, LockHeld
from connectops.errors import NotReadyYet, SpecInvalid
from connectops.models import GROUP
from connectops.models.base import utcnow_iso
from connectops.models.checks import CheckSpec
from connectops.models.connector import ConnectorSpec
from connectops.models.offset_reset import (
    OffsetResetSpec,
    OffsetSyncsCleanup,
    ResetAction,
)
from connectops.planning.offset_reset import (
    ConnectorKind,
    PlanError,
    Step,
    TargetConnector,
    connector_kind,
    diff_offsets,
    expected_after,
    mirror_roles,
    plan_reset,
    sink_group,
)
from connectops.reconcilers.checks import CheckRunner, apply_check_conditions
from connectops.reconcilers.clusters import ClusterHandle, ClusterRegistry
from connectops.reconcilers.common import Conditions, EmitEvent
from connectops.settings import Settings
from connectops.validation import describe_validation_error

PLURAL = "offsetresets"
TERMINAL = frozenset({"Succeeded", "Failed", "Planned"})
HISTORY_LIMIT = 30
#: a ConfigMap holds at most 1 MiB; larger backups are gzipped into binaryData
_INLINE_LIMIT = 700 * 1024


def lock_holder(namespace: str, name: str, uid: str) -> str:
    """The Lease holder identity of one OffsetReset (the uid: a re-created namesake is another holder)."""
    return f"{GROUP}/offsetreset/{namespace}/{name}/{uid}"


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
        detail = message
        resume_error: ConnectError | None = None
        if stopped_by_us and unsafe:
            detail = (
                f"{message}. The connector(s) {', '.join(run.status['connectors'])} stay STOPPED "
                f"and locked because their offsets may be partly rewritten; the old offsets "
                f"are in ConfigMap {backup}: fix the cause and create an OffsetReset with "
                f"action restore (restoreFrom: {backup}), or delete this object to unlock"
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
        for connector in run.status["connectors"]:
            await self._kube.acquire_lock(run.namespace, run.cluster.name, connector, self._holder(run), owner)
        return f"locked {', '.join(run.status['connectors'])}"

    async def _unlock(self, run: Run) -> str:
        for connector in run.status["connectors"]:
            await self._kube.release_lock(run.namespace, run.cluster.name, connector, self._holder(run))
        return "released the lock"

    async def _inspect(self, run: Run) -> str:
        client = run.cluster.client
        version, caps = await run.cluster.capabilities(0.0)
        targets = []
        roles = mirror_roles(run.spec)
        for connector in run.status["connectors"]:
            info = await client.get_connector(connector)
            if info is None:
                raise PlanError(f"connector {connector} does not exist in Kafka Connect")
            state = await client.get_status(connector)
            managed = None
            if run.spec.connector_ref is not None:
                obj = await self._kube.custom_object(run.namespace, "connectors", run.spec.connector_ref.name)
                managed = str(obj["spec"].get("state", "running"))
            targets.append(
                TargetConnector(
                    name=connector,
                    kind=roles.get(connector)
                    or connector_kind(str(info["config"].get("connector.class", "")), info.get("type")),
                    state=state.state if state else "UNASSIGNED",
                    config=info["config"],
                    managed_state=managed,
                )
            )
        plan = plan_reset(run.spec, targets, caps, has_kafka_access=run.kafka is not None)
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
        run.status["plan"] = summary
        run.status["strategy"] = str(plan.strategy)
        run.status["connectorKind"] = ",".join(sorted({str(t.kind) for t in targets}))
        # recorded once, before anything is stopped: the truth about "before"
        run.status.setdefault("previousStates", {t.name: t.state for t in targets})
        return (
            f"{plan.strategy} {run.spec.action} of {', '.join(t.name for t in targets)} "
            f"({', '.join(str(t.kind) for t in targets)}, worker {version})"
        )

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
            if not topics:
                if target.config.get("topics"):
                    topics = [t.strip() for t in target.config["topics"].split(",") if t.strip()]
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
        name = f"connectops-backup-{run.name}-{run.uid[:8]}"[:253]
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
        await self._kube.put_config_map(
            run.namespace,
            name,
            data=data,
            binary_data=binary,
            labels={f"{GROUP}/backup": "offsets", f"{GROUP}/cluster": run.cluster.name},
            annotations={
                f"{GROUP}/offset-reset": run.name,
                f"{GROUP}/connectors": ",".join(run.status["connectors"]),
            },
        )
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
        while pending:
            state = await client.get_status(pending[0])
            if state is not None and state.state == "STOPPED" and not state.tasks:
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise NotReadyYet(f"{pending[0]} did not reach STOPPED with no tasks in {self._stop_timeout:.0f}s")
            await asyncio.sleep(0.5)
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
            await client.delete_offsets(connector)
        elif action is ResetAction.ALTER:
            await client.patch_offsets(connector, entries)
        else:
            # toEarliest/toLatest/toTimestamp: exactly these offsets, nothing else
            await client.delete_offsets(connector)
            await client.patch_offsets(connector, entries)
        await self._confirm(run, connector, expected_after(action, entries, before))

    async def _confirm(self, run: Run, connector: str, expected: list[dict[str, Any]]) -> None:
        """Read back while still stopped (after a resume the connector commits new offsets at
        once, and the comparison would mean nothing). Connect may lag its topic briefly."""
        deadline = time.monotonic() + 30
        while True:
            actual = [e for e in await run.cluster.client.get_offsets(connector) if e.get("offset") is not None]
            problems = diff_offsets(expected, actual)
            if not problems:
                return
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"{connector}: offsets after the reset differ from the plan: " + "; ".join(problems[:5]),
                    unsafe_to_resume=True,
                )
            await asyncio.sleep(1.0)

    async def _reset_tombstone(
        self, run: Run, connector: str, action: ResetAction, entries: list[dict[str, Any]]
    ) -> None:
        kafka = run.kafka
        assert kafka is not None
        cfg = run.plan["configs"][connector]
        if cfg["kind"] == "sink":
            group = cfg["group"]
            if action is ResetAction.RESET:
                await asyncio.to_thread(kafka.delete_group, group)
            else:
                wanted = {
                    (e["partition"]["kafka_topic"], int(e["partition"]["kafka_partition"])): int(
                        e["offset"]["kafka_offset"]
                    )
                    for e in entries
                }
                if action is not ResetAction.ALTER:
                    await asyncio.to_thread(kafka.delete_group, group)
                await asyncio.to_thread(kafka.alter_group_offsets, group, wanted)
            return
        records = await self._read_records(run, connector)
        if action is ResetAction.RESET:
            live = [r for r in records if r.value is not None]
            await asyncio.to_thread(kafka.write_tombstones, live)
            for topic in self._offsets_topics(run, connector):
                await asyncio.to_thread(kafka.verify_tombstones, topic, [r for r in live if r.topic == topic])
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
        await asyncio.to_thread(kafka.restore_records, rewritten)

    async def _restore(self, run: Run) -> str:
        source = run.spec.restore_from or ""
        backup = await self._read_backup(run.namespace, source)
        client = run.cluster.client
        restored = []
        for connector in run.status["connectors"]:
            saved = backup["connectors"].get(connector)
            if saved is None:
                raise StepFailed(f"backup {source} holds no offsets for {connector}")
            if run.plan["strategy"] == "rest":
                await client.delete_offsets(connector)
                entries = [e for e in saved["offsets"] if e.get("offset") is not None]
                if entries:
                    await client.patch_offsets(connector, entries)
                await self._confirm(run, connector, expected_after(ResetAction.TO_LATEST, entries, []))
            else:
                kafka = run.kafka
                assert kafka is not None
                if saved["kind"] == "sink":
                    await asyncio.to_thread(
                        kafka.alter_group_offsets,
                        saved["group"],
                        {(t, p): o for t, p, o in saved.get("groupOffsets", [])},
                    )
                else:
                    records = [_record_from_json(r) for r in saved.get("records", [])]
                    await asyncio.to_thread(kafka.restore_records, records)
            restored.append(f"{connector} ({len(saved['offsets'])} partition(s))")
        return f"restored {', '.join(restored)} from ConfigMap {source}"

    async def _read_backup(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            cm = await self._kube.config_map(namespace, name)
        except KubeError as exc:
            raise StepFailed(f"backup ConfigMap {name}: {exc}") from None
        if cm.data and "backup.json" in cm.data:
            doc: dict[str, Any] = json.loads(cm.data["backup.json"])
        elif cm.binary_data and "backup.json.gz" in cm.binary_data:
            doc = json.loads(gzip.decompress(base64.b64decode(cm.binary_data["backup.json.gz"])))
        else:
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
                await asyncio.sleep(0.5)
        return "connector(s) in their resumed state"


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
