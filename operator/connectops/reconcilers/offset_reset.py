"""The OffsetReset step machine: lock -> inspect -> stop -> backup -> reset -> offsetSyncs ->
resume -> verify -> unlock.

The backup follows the stop: a running connector's committed offsets trail its position by up
to the flush interval, and its tasks commit that position as they stop; read after the stop,
the backup (and the plan's current offsets, and the read-back's untouched partitions) describe
the real "before". A reset an earlier operator version started in the old order (backup, then
stop) resumes in this one, its backup taken again after the stop when no offsets call was made
yet (:func:`upgrade_steps`).

Durability: before a step acts, its ``Running`` state (with the attempt count) is written to
status; after, ``Done``, in the same write as the next step's ``Running`` (the last step's, with
the outcome): one write per step boundary, as each costs the pipeline downtime while the
connector is stopped. Every step is idempotent, so an operator that dies anywhere re-runs at
most the step that was in flight, and the machine resumes from status on the next start. The
spec that is executed is snapshotted into status at the start: a finished (or running) reset is
immutable, and later spec edits are reported, not obeyed.

Where things live: this module is the driver, the stop/resume/verify steps and the failure path
(kept together, about 1100 lines, because the failure path decides between resuming and staying
stopped with those same steps, and reads the offsets back to decide it; verify also measures
what the reset cost, from the same polls);
``reset_lock`` takes and releases the lock, ``reset_inspect`` plans, ``reset_backup`` keeps
backups, ``reset_rest`` / ``reset_tombstone`` / ``reset_consumer_group`` change offsets (one module
per strategy), ``reset_changes`` records every change and reads it back, ``reset_mm2`` handles the
offset-syncs topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import yaml
from pydantic import ValidationError

from connectops import failpoints, metrics
from connectops.adapters.connect_rest import ConnectError, ConnectOffsetsInvalid, ConnectRejected
from connectops.adapters.kafka import KafkaClientConfigInvalid, KafkaOffsets, KafkaOffsetsError
from connectops.adapters.kube import (
    KubeClient,
    KubeError,
    KubeForbidden,
    KubeObjectMissing,
    LockHeld,
    SecretKeyMissing,
)
from connectops.concurrency.backoff import Backoff
from connectops.concurrency.gather import both
from connectops.errors import NotReadyYet, ReferenceInvalid, SpecInvalid
from connectops.failures import ConnectopsError
from connectops.models import API_VERSION
from connectops.models.base import epoch_of, iso_ms
from connectops.models.checks import CheckSpec
from connectops.models.connector import ConnectorSpec, DesiredState
from connectops.models.interruption import InterruptionCause
from connectops.models.offset_reset import (
    FINAL_PHASES,
    OffsetResetSpec,
    OffsetResetStatus,
    OffsetsTopicLocation,
    ResetAction,
    ResetPhase,
    ResetStrategy,
    ResumePolicy,
    StepState,
    StepStatus,
)
from connectops.planning.checks import CheckContext
from connectops.planning.interruption import InterruptionWatch
from connectops.planning.offset_reset import (
    DEFAULT_FLUSH_INTERVAL_MS,
    ConnectorKind,
    PlanError,
    Step,
    backup_predates_stop,
    diff_offsets,
    dry_run_caveat,
    expected_after,
    step_rank,
)
from connectops.planning.ownership import Claim
from connectops.planning.reset_deadlines import (
    INTERRUPTIBLE,
    STEP_DEADLINE_SECONDS,
    deadline_message,
    seconds_left,
)
from connectops.planning.reset_holder import lock_holder
from connectops.planning.resume_hold import ResumeHold, needs_hold, resume_target
from connectops.reconcilers import reset_consumer_group, reset_mm2, reset_plan_store, reset_rest, reset_tombstone
from connectops.reconcilers.checks import CheckRunner, apply_check_conditions
from connectops.reconcilers.clusters import ClusterHandle, ClusterRegistry
from connectops.reconcilers.common import Conditions, EmitEvent, each_object
from connectops.reconcilers.reset_backup import BackupStore
from connectops.reconcilers.reset_changes import OffsetChanges, changed
from connectops.reconcilers.reset_inspect import Inspector, publish_current
from connectops.reconcilers.reset_lock import ResetLocks
from connectops.reconcilers.reset_run import (
    PLURAL,
    KafkaFactory,
    Run,
    StepFailed,
    Strategy,
    backup_name,
    offsets_outcome,
    spec_hash,
)
from connectops.redact import Redactor
from connectops.settings import Settings
from connectops.validation import describe_validation_error

__all__ = ["PLURAL", "OffsetResetExecutor", "backup_name", "lock_holder", "offsets_outcome", "spec_hash"]

#: The stop and resume waits poll Connect's status every 25 ms for their first 15 s, then back
#: off to one poll a second: the connector processes nothing while they run, so each poll
#: interval of slack is downtime of the pipeline (half an interval on average: a 100 ms cap cost
#: ~50 ms per wait, a 1 s cap up to 1 s, measured in benchmarks/reset_bench.py against a 50 ms
#: observer), and Connect's stop and start take seconds (the graceful task shutdown is 5 s by
#: default). A status read costs the worker ~2 ms, so the ~300 reads of a usual reset are cheap
#: next to what each 25 ms of slack costs the pipeline. A reset holds one connector; its polls
#: go through the same bounded Connect lanes as every other call.
DOWNTIME_POLL = 0.025
DOWNTIME_POLL_HOLD = 15.0

#: Steps whose start is not written on its own: it rides on the next write. A step's start must
#: be durable before the step acts only when a rerun could not tell that it acted, and the step
#: before it must have its outcome written when a rerun could not tell it again. The backup's
#: ConfigMap is named after the reset and never overwritten, so a rerun finds it; the reset step
#: writes every offsets call before sending it (OffsetChanges.change), and that write carries
#: the step's start (and the stop's completion and the backup's, which the backup step follows:
#: the backup is in its ConfigMap before that write, and named in it); verify changes nothing;
#: inspect only reads. What they follow is reproducible: a lock this reset holds is taken again
#: with the same outcome ("locked ..."), a second inspect makes the same plan, a stopped
#: connector stops again (and is backed up again: the ConfigMap found), a running one resumes
#: again. The exception is a lock taken over from another holder: that outcome ("took over the
#: lock left by ...") a rerun, now the holder, could not tell again, so inspect's start, which
#: carries it, is then written at once (:func:`start_rides_on_next_write`). After a crash in one
#: of them, the status shows the step before as Running, and that step runs again. What must
#: precede the Lease, the stop, each offsets call, the resume and the unlock is still written
#: before them. Each saved write is one API round trip on the reset's critical path (~10-30 ms
#: on the test servers).
UNWRITTEN_STARTS = frozenset({Step.INSPECT, Step.BACKUP, Step.RESET, Step.VERIFY})


def start_rides_on_next_write(run: Run, step: Step) -> bool:
    """Whether ``step``'s start (and the completion of the step before it) may wait for the
    next write (see UNWRITTEN_STARTS)."""
    if step is Step.INSPECT and run.took_over_lock:
        return False
    return step in UNWRITTEN_STARTS


def upgrade_steps(status: OffsetResetStatus) -> bool:
    """A stored status as this version runs it; True when it changed.

    An operator version before this one ran the backup before the stop: its steps are listed in
    that order, and its backup may trail the position the stop commits. The machine runs the
    steps by name in this version's order whatever the list's order, so the list is only put in
    that order; a backup taken before the stop (Done, not read after the stop) is taken again
    after it while no offsets call has been made (the connector is stopped by then, or is
    stopped first: the stop comes before the backup now). With an offsets call made, the backup
    there is stays the one a restore uses."""
    ordered = sorted(status.steps, key=lambda s: step_rank(s.name))
    changed_order = [s.name for s in ordered] != [s.name for s in status.steps]
    status.steps = ordered
    states = {s.name: s.state for s in status.steps}
    backup = status.backup
    if not backup_predates_stop(
        states,
        backup_read_after_stop=bool(backup is not None and backup.read_after_stop),
        changed=bool(status.changes),
    ):
        return changed_order
    status.set_step(
        str(Step.BACKUP),
        state=StepState.PENDING,
        finished_at=None,
        message=(
            f"the backup in ConfigMap {backup.config_map if backup else '?'} was taken before the stop by an "
            "earlier operator version and may trail the connector's position: taken again after the stop"
        ),
    )
    return True


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
        kafka_factory: KafkaFactory = KafkaOffsets,
        step_deadlines: Mapping[Step, float] = STEP_DEADLINE_SECONDS,
    ) -> None:
        """``kafka_factory`` builds the Kafka access of a ConnectCluster with ``spec.kafka``
        (tests pass one that returns an in-memory double); ``step_deadlines``: how long each
        step may take over all its attempts (:mod:`planning.reset_deadlines`)."""
        self._deadlines = step_deadlines
        self._checks = checks
        self._kafka_factory = kafka_factory
        self._kube = kube
        self._clusters = clusters
        self._settings = settings
        self._max_attempts = max_step_attempts
        self._stop_timeout = stop_timeout
        self._changes = OffsetChanges(kube)
        self._backups = BackupStore(kube, self._changes)
        self._inspector = Inspector(kube, self._backups)
        self._locks = ResetLocks(kube)

    # -- entry point ------------------------------------------------------------------------------

    async def run(self, body: Any, emit: EmitEvent, claims: Mapping[str, Iterable[Claim]] | None = None) -> bool:
        """Run or resume the step machine. True when this call took the reset to its end (the
        caller then hands the connectors back to their Connector reconcile at once).

        ``claims``: every Connector object by the connector it names (the handlers' index), so
        a reset never starts on a connector another namespace's Connector object manages."""
        meta = body["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        status = OffsetResetStatus.from_storage(body.get("status"))
        raw_spec = json.loads(json.dumps(dict(body.get("spec") or {})))
        conditions = Conditions(status.conditions, meta.get("generation"), emit)

        if status.spec_hash:
            if spec_hash(raw_spec) != status.spec_hash:
                await self._ignore_spec_change(namespace, name, status, conditions)
            if status.phase in FINAL_PHASES:
                if status.pending_resume:
                    await self._finish_resume(body, emit)
                    return True
                return False
            raw_spec = status.executed_spec or {}
            # written with the next write: until then a rerun would decide the same again
            upgraded = upgrade_steps(status)
        else:
            upgraded = False
        try:
            spec = OffsetResetSpec.model_validate(raw_spec)
        except ValidationError as exc:
            message = describe_validation_error(exc)
            conditions.set("Succeeded", False, "InvalidSpec", message, event_on_change=True, warning=True)
            status.phase = ResetPhase.FAILED
            status.spec_hash = spec_hash(raw_spec)
            status.executed_spec = raw_spec
            status.observed_generation = meta.get("generation")
            status.conditions = conditions.items
            await self._save(
                namespace, name, status, "phase", "spec_hash", "executed_spec", "observed_generation", "conditions"
            )
            return False
        # A new reset's acceptance (its spec, its steps) is written with the first thing that
        # happens next: the lock step's start, or why it waits or refused. Nothing is changed
        # before then, so a crash in between leaves a reset that starts afresh.
        fresh = not status.spec_hash
        if fresh:
            status.phase = ResetPhase.RUNNING
            status.spec_hash = spec_hash(raw_spec)
            status.executed_spec = raw_spec
            status.observed_generation = meta.get("generation")
            status.steps = [StepStatus(name=str(s)) for s in Step]
            conditions.set("Succeeded", None, "Running", "reset started")
            status.conditions = conditions.items
            emit("Normal", "Started", f"offset {spec.action} started")

        (connector, cluster, (mirror_config, secrets)), elsewhere = await self._targets(
            namespace, name, spec, status, conditions, claims, fresh=fresh
        )
        if elsewhere:
            # nothing is locked or stopped yet: refuse for good (retrying cannot change who owns it)
            message = (
                f"connector {', '.join(elsewhere)} is managed by a Connector object in another namespace: "
                "only that namespace may reset, pause or resume it; nothing was changed"
            )
            conditions.set("Succeeded", False, "ManagedElsewhere", message, event_on_change=True, warning=True)
            status.phase = ResetPhase.FAILED
            status.conditions = conditions.items
            # a fresh status is written whole
            await self._save(namespace, name, status, *(() if fresh else ("phase", "conditions")))
            return False
        run = Run(
            namespace,
            name,
            meta["uid"],
            meta.get("generation"),
            status,
            spec,
            cluster,
            emit,
            mirror_kafka_config=mirror_config,
            redactor=Redactor(secrets),
        )
        run.status.phase = ResetPhase.RUNNING  # from Pending, if it waited for its target
        run.unsaved = fresh or upgraded
        if not run.status.connectors:
            run.status.connectors = self._connector_names(spec, connector)
        if cluster.spec.kafka is not None:
            run.kafka = self._kafka_factory(cluster.spec.kafka.bootstrap_servers, cluster.kafka_config)
        run.kafka_factory = self._kafka_factory
        await self._execute(run, body)
        return True

    async def _targets(
        self,
        namespace: str,
        name: str,
        spec: OffsetResetSpec,
        status: OffsetResetStatus,
        conditions: Conditions,
        claims: Mapping[str, Iterable[Claim]] | None,
        *,
        fresh: bool,
    ) -> tuple[tuple[str, ClusterHandle, tuple[dict[str, dict[str, str]], list[str]]], list[str]]:
        """The references (see :meth:`_references`) and, before any step ran, the connectors a
        Connector object of another namespace manages. A new reset (``fresh``: nothing of it
        written yet) whose reads fail is written whole before kopf retries: the object says what
        it is doing meanwhile, as if its acceptance had been written first."""
        said = False
        try:
            try:
                references = await self._references(namespace, spec)
            except (KubeObjectMissing, SecretKeyMissing, SpecInvalid) as exc:
                error = await self._wait_for_reference(namespace, name, status, conditions, exc, whole=fresh)
                said = True
                raise error from None
            connector, cluster, _ = references
            not_started = all(step.state == StepState.PENDING for step in status.steps)
            elsewhere = (
                await self._managed_elsewhere(namespace, spec, connector, cluster, claims) if not_started else []
            )
        except BaseException:
            if fresh and not said:
                await self._save(namespace, name, status)
            raise
        return references, elsewhere

    async def _ignore_spec_change(
        self, namespace: str, name: str, status: OffsetResetStatus, conditions: Conditions
    ) -> None:
        conditions.set(
            "SpecChangeIgnored",
            True,
            "Immutable",
            "the spec changed after this reset started; an OffsetReset runs once as first "
            "written: create a new OffsetReset for a new reset",
            event_on_change=True,
            warning=True,
        )
        status.conditions = conditions.items
        await self._save(namespace, name, status, "conditions")

    async def _managed_elsewhere(
        self,
        namespace: str,
        spec: OffsetResetSpec,
        connector: str,
        cluster: ClusterHandle,
        claims: Mapping[str, Iterable[Claim]] | None,
    ) -> list[str]:
        """The connectors this reset would touch that a Connector object of another namespace
        manages on the same Kafka cluster (an alias ConnectCluster reaches them too)."""
        if claims is None:
            return []
        found = []
        for name in self._connector_names(spec, connector):
            foreign = [c for c in claims.get(name, ()) if c.namespace != namespace]
            if foreign and await self._clusters.same_kafka_cluster(
                cluster, foreign, self._settings.capabilities_ttl_seconds
            ):
                found.append(name)
        return found

    async def managing_connectors(self, body: Any) -> list[str]:
        """Names of the Connector objects that manage the connectors this reset touched.

        While the reset held its lock their status said "offset reset in progress"; left alone
        they would say so until their next resync.
        """
        namespace = body["metadata"]["namespace"]
        status = OffsetResetStatus.from_storage(body.get("status"))
        try:
            spec = OffsetResetSpec.model_validate(status.executed_spec or body.get("spec") or {})
        except ValidationError:
            return []
        if spec.connector_ref is not None:
            return [spec.connector_ref.name]
        assert spec.cluster_ref is not None
        touched = set(status.connectors)
        names = []
        async for obj in each_object(self._kube.custom_object_pages("connectors", namespace)):
            try:
                managed = ConnectorSpec.model_validate(obj.get("spec") or {})
            except ValidationError:
                continue
            name = obj["metadata"]["name"]
            if managed.cluster_ref.name == spec.cluster_ref.name and (managed.connector_name or name) in touched:
                names.append(name)
        return names

    async def _wait_for_reference(
        self,
        namespace: str,
        name: str,
        status: OffsetResetStatus,
        conditions: Conditions,
        exc: ConnectopsError,
        *,
        whole: bool,
    ) -> ConnectopsError:
        """Nothing is locked or stopped yet. Say why on the object; the caller raises what this
        returns, so kopf retries with back-off: the reference may appear or be fixed, as in a
        GitOps sync out of order."""
        reason = ReferenceInvalid.reason if isinstance(exc, SpecInvalid) else "ReferenceNotFound"
        conditions.set("Succeeded", None, reason, f"{exc}; retrying", event_on_change=True, warning=True)
        status.phase = ResetPhase.PENDING
        status.conditions = conditions.items
        # ``whole``: nothing of this reset is written yet, its acceptance goes with this
        await self._save(namespace, name, status, *(() if whole else ("phase", "conditions")))
        # the invalid object is another one: a kopf-permanent failure would never look again
        return ReferenceInvalid(str(exc)) if isinstance(exc, SpecInvalid) else exc

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

    async def _references(
        self, namespace: str, spec: OffsetResetSpec
    ) -> tuple[str, ClusterHandle, tuple[dict[str, dict[str, str]], list[str]]]:
        """Everything the reset reads from the API before it may change anything: the connector
        and its ConnectCluster, and MirrorMaker 2's Kafka credentials (a missing Secret must stop
        the reset before its lock, not at the offsetSyncs step after the offsets changed)."""
        cluster_name, connector = await self._target(namespace, spec)
        cluster = await self._clusters.resolve(namespace, cluster_name, max_age=0)
        return connector, cluster, await self._mirror_kafka_config(namespace, spec)

    async def _mirror_kafka_config(
        self, namespace: str, spec: OffsetResetSpec
    ) -> tuple[dict[str, dict[str, str]], list[str]]:
        """MirrorMaker 2's client settings by cluster (``source``, ``target``): ``config`` with
        ``configFrom`` read from Secrets of the reset's own namespace; and the values read, to
        be masked (sasl.password, ssl.key.password) wherever a text could carry them."""
        mm2 = spec.mirror_maker2
        configs: dict[str, dict[str, str]] = {}
        secrets: list[str] = []
        if mm2 is None:
            return configs, secrets
        for location, access in (
            (OffsetsTopicLocation.SOURCE, mm2.source_cluster),
            (OffsetsTopicLocation.TARGET, mm2.target_cluster),
        ):
            if access is None:
                continue
            config = dict(access.config)
            for setting, ref in sorted(access.config_from.items()):
                config[setting] = await self._kube.secret_value(namespace, ref.name, ref.key)
                secrets.append(config[setting])
            configs[str(location)] = config
        return configs, secrets

    @staticmethod
    def _connector_names(spec: OffsetResetSpec, connector: str) -> list[str]:
        mm2 = spec.mirror_maker2
        if mm2 is None:
            return [connector]
        names = [mm2.source_connector, mm2.checkpoint_connector, mm2.heartbeat_connector]
        return [n for n in names if n]

    async def _save(self, namespace: str, name: str, status: OffsetResetStatus, *fields: str) -> None:
        await self._changes.save(namespace, name, status, *fields)

    async def _store(self, run: Run) -> None:
        await self._changes.store(run)

    async def release(self, body: Any) -> None:
        meta = body["metadata"]
        status = OffsetResetStatus.from_storage(body.get("status"))
        connectors = status.connectors
        spec_raw = status.executed_spec
        if not connectors or not spec_raw:
            return
        try:
            cluster_name, _ = await self._target(meta["namespace"], OffsetResetSpec.model_validate(spec_raw))
        except (KubeError, ValidationError):
            return
        scope = status.lock_scope or cluster_name  # no scope: taken before scopes existed
        await self._locks.release(meta, status, scope, deleting=True)

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
        step = self._begin_next(run, None)
        if step is None:
            await self._succeed(run, body)
            return
        if step is Step.LOCK and not run.status.lock_scope:
            # written with the lock step's start just below, one write fewer; if Connect does
            # not answer now, the step asks again (and writes it) before it creates the Lease
            with contextlib.suppress(ConnectError):
                await self._scope_lock(run)
        await self._store(run)
        while step is not None:
            attempts = run.step(step).attempts
            started = time.monotonic()
            try:
                message = await self._within_deadline(run, step, actions[step])
            except StepFailed as exc:
                await self._fail(run, step, str(exc), unsafe=exc.unsafe_to_resume)
                return
            except PlanError as exc:
                await self._fail(run, step, str(exc), unsafe=False)
                return
            except (ConnectError, KubeError, KafkaOffsetsError, NotReadyYet, Exception) as exc:
                # An unexpected exception's text is not known to be secret-free: its type only.
                known = isinstance(exc, ConnectError | KubeError | KafkaOffsetsError | NotReadyYet)
                text = run.redactor(str(exc)) if known else f"unexpected {type(exc).__name__}"
                # a request Connect or Kafka refused as such fails the same way when repeated
                permanent = isinstance(exc, ConnectRejected | KafkaClientConfigInvalid | KubeForbidden)
                if attempts >= self._max_attempts or isinstance(exc, LockHeld) or permanent:
                    if isinstance(exc, ConnectOffsetsInvalid):
                        said = (
                            f"{text} (Connect refused these offsets as invalid: the same request "
                            "cannot succeed, so it was not retried)"
                        )
                    else:
                        said = f"{text} (after {attempts} attempts)"
                    await self._fail(
                        run,
                        step,
                        said,
                        # the Kafka-side strategies' writes are all recorded: unsafe once one may have landed
                        unsafe=step is Step.RESET and run.plan.strategy == ResetStrategy.TOMBSTONE and changed(run),
                    )
                    return
                run.set_step(step, message=f"attempt {attempts} failed: {text}")
                run.history(f"{step}: attempt {attempts} failed: {text}")
                await self._store(run)
                raise
            failpoints.hit(str(step), "effects")
            elapsed = time.monotonic() - started
            metrics.RESET_STEP_SECONDS.labels(step=str(step)).observe(elapsed)
            run.set_step(step, state=StepState.DONE, finished_at=iso_ms(time.time()), message=message)
            run.history(f"{step}: {message} ({elapsed:.2f}s)")
            run.emit("Normal", f"Step{str(step)[0].upper()}{str(step)[1:]}", message)
            finished = step
            step = self._begin_next(run, step)
            if step is None:
                # the last step's completion is written with the outcome, below
                await self._succeed(run, body)
            elif start_rides_on_next_write(run, step):
                run.unsaved = True
            else:
                await self._store(run)
            failpoints.hit(str(finished), "done")

    async def _within_deadline(self, run: Run, step: Step, action: Callable[[Run], Awaitable[str]]) -> str:
        """One attempt of ``step``, within what is left of the step's deadline
        (:mod:`planning.reset_deadlines`); past it, StepFailed with the reason (the failure
        path then resumes the connectors or keeps them stopped, as for any failed step)."""
        entry = run.step(step)
        seconds = self._deadlines.get(step, STEP_DEADLINE_SECONDS[step])
        left = seconds_left(step, epoch_of(entry.first_started_at), time.time(), self._deadlines)
        # the message of the attempt before this one: what kept the step from finishing
        failed_before = f"attempt {entry.attempts - 1} failed: "
        retried = (entry.message or "").startswith(failed_before)
        last = (entry.message or "").removeprefix(failed_before) if retried else None
        # A step that changes offsets is not given up for time an operator spent down (a crash
        # mid-attempt leaves no failed attempt): run again, it finishes what it began; given up,
        # it would leave the connector stopped. Past its deadline, a failed attempt is not retried.
        if left <= 0 and (step in INTERRUPTIBLE or retried):
            raise StepFailed(deadline_message(step, seconds, entry.attempts - 1, last))
        if step not in INTERRUPTIBLE:
            return await action(run)
        timer = asyncio.timeout(max(left, 0.0))
        try:
            async with timer:
                return await action(run)
        except TimeoutError:
            if not timer.expired():
                raise
            raise StepFailed(deadline_message(step, seconds, entry.attempts, last)) from None

    def _begin_next(self, run: Run, after: Step | None) -> Step | None:
        """Marks the step after ``after`` that is to run as Running (its attempt counted, its
        start time set) and returns it; the steps passed over on the way are Skipped. Nothing is
        written: the caller's next store carries the start together with the previous step's
        completion, one status write per step boundary instead of two. A step's Running state
        is still durable before it acts, which is all resumption needs ("may have begun")."""
        order = list(Step)
        for step in order[order.index(after) + 1 :] if after is not None else order:
            state = run.step(step).state
            if state in (StepState.DONE, StepState.SKIPPED):
                continue
            if run.spec.dry_run and step in (
                Step.BACKUP,
                Step.STOP,
                Step.RESET,
                Step.OFFSET_SYNCS,
                Step.RESUME,
                Step.VERIFY,
            ):
                run.set_step(step, state=StepState.SKIPPED, message="dry run")
                continue
            if step is Step.OFFSET_SYNCS and str(step) not in run.plan.steps:
                run.set_step(step, state=StepState.SKIPPED, message="no MirrorMaker 2 offset-syncs cleanup")
                continue
            now = iso_ms(time.time())
            run.set_step(
                step,
                state=StepState.RUNNING,
                attempts=run.step(step).attempts + 1,
                started_at=now,
                first_started_at=run.step(step).first_started_at or now,
            )
            run.status.current_step = str(step)
            if step is Step.STOP and run.status.stopped_at is None:
                # written before the stop call: a rerun of the step (the connector already
                # stopped) must not move the start of what the reset costs
                run.status.stopped_at = iso_ms(time.time())
            return step
        return None

    async def _succeed(self, run: Run, body: Any) -> None:
        """Every step is Done: the outcome, with the last step's completion, in one write."""
        conditions = Conditions(run.status.conditions, run.generation, run.emit)
        if run.spec.dry_run:
            run.status.phase = ResetPhase.PLANNED
            metrics_spec = run.cluster.spec.worker_metrics
            interval = metrics_spec.offset_flush_interval_ms if metrics_spec else DEFAULT_FLUSH_INTERVAL_MS
            conditions.set(
                "Succeeded",
                True,
                "Planned",
                f"dry run: the plan is in status.plan; nothing changed; {dry_run_caveat(interval)}",
                event_on_change=True,
            )
        else:
            run.status.phase = ResetPhase.SUCCEEDED
            resumed = run.step(Step.RESUME).message or ""
            # a held or overridden resume state is part of the outcome: what the connector does next
            extra = f"; {resumed}" if "(held:" in resumed or "spec changed during the reset" in resumed else ""
            conditions.set(
                "Succeeded", True, "Completed", f"offset {run.spec.action} completed{extra}", event_on_change=True
            )
            await self._launch_check(run, body, conditions)
        run.status.current_step = None
        run.status.conditions = conditions.items
        await self._store(run)
        metrics.RESETS.labels(
            action=str(run.spec.action), strategy=str(run.status.strategy), phase=str(run.status.phase)
        ).inc()

    async def _connector_spec(self, run_namespace: str, spec: OffsetResetSpec) -> ConnectorSpec | None:
        if spec.connector_ref is None:
            return None
        obj = await self._kube.custom_object(run_namespace, "connectors", spec.connector_ref.name)
        return ConnectorSpec.model_validate(obj["spec"])

    async def _launch_check(self, run: Run, body: Any, conditions: Conditions) -> None:
        """The finished reset is a change like any other: check lag and balance afterwards."""
        if self._checks is None:
            return
        if run.check_connector_read:
            connector_spec = run.check_connector
        else:
            connector_spec = await self._connector_spec(run.namespace, run.spec)
        launched = await self._checks.launch(
            namespace=run.namespace,
            owner={
                "apiVersion": body.get("apiVersion", API_VERSION),
                "kind": "OffsetReset",
                "metadata": {"name": run.name, "uid": run.uid},
            },
            suffix="reset",
            connector=run.connectors[0],
            cluster=run.cluster.spec,
            check=CheckSpec() if connector_spec is None else connector_spec.check,
            trigger=f"offset {run.spec.action} completed",
            # the lag right after a rewinding reset is what was asked for: judged as catching up
            context=CheckContext(
                desired_state=_state_after(run.spec, connector_spec), after_reset=str(run.spec.action)
            ),
        )
        if launched is not None:
            run.status.last_check = launched

    async def follow_check(self, body: Any, emit: EmitEvent) -> None:
        """Poll the post-reset check until it has a verdict, then publish it (timer-driven)."""
        if self._checks is None:
            return
        meta = body["metadata"]
        status = OffsetResetStatus.from_storage(body.get("status"))
        last = status.last_check
        if last is None or status.phase != ResetPhase.SUCCEEDED:
            return
        spec = OffsetResetSpec.model_validate(status.executed_spec or body.get("spec"))
        connector_spec = await self._connector_spec(meta["namespace"], spec)
        updated, result = await self._checks.poll(
            meta["namespace"], last, CheckSpec() if connector_spec is None else connector_spec.check
        )
        changed_fields = []
        if updated != last:
            status.last_check = updated
            changed_fields.append("last_check")
        if result is not None:
            conditions = Conditions(status.conditions, meta.get("generation"), emit)
            apply_check_conditions(conditions, result)
            status.conditions = conditions.items
            changed_fields.append("conditions")
        if changed_fields:
            await self._save(meta["namespace"], meta["name"], status, *changed_fields)

    async def _fail(self, run: Run, step: Step, message: str, *, unsafe: bool) -> None:
        """End in Failed. The connector is resumed unless that would be unsafe (offsets partly
        rewritten); then it stays STOPPED, locked, and the condition says so and where the backup is.
        After a failed reset step that made an offsets call, the offsets are read back and
        compared with the backup: equal, nothing was changed, whatever the answers were (the
        connector is resumed); different, it stays stopped, even if every call was refused.

        If resuming fails too, the reset is Failed with ``pendingResume`` set and this raises: the
        handler retries, and every later run retries the resume until it works (a connector the
        operator stopped is never left stopped without someone still working on it).
        """
        # read before the failed step is marked: a failure AT the stop step (PUT /stop sent, the
        # connector never shown STOPPED in time) has stopped it too
        stopped_by_us = run.step(Step.STOP).state in (StepState.RUNNING, StepState.DONE)
        run.set_step(step, state=StepState.FAILED, finished_at=iso_ms(time.time()), message=message)
        run.history(f"{step}: failed: {message}")
        backup = run.status.backup_config_map
        # past the first call that may have changed offsets, resuming would run the connector on
        # half-applied offsets: it stays stopped and locked until a restore or a person decides
        unsafe = unsafe or (step in (Step.RESET, Step.OFFSET_SYNCS) and changed(run))
        # What Connect and Kafka hold decides, not what the answers suggested: a 5xx or a lost
        # answer may have changed nothing, a refusal may come after a partial write. Only for
        # the reset step: after it, a change is what was asked for (offsetSyncs follows a done
        # reset), so "as backed up" would not mean "nothing was changed".
        as_backed_up = None
        if stopped_by_us and step is Step.RESET and run.status.changes:
            as_backed_up = await self._offsets_as_backed_up(run)
            if as_backed_up is not None:
                unsafe = not as_backed_up
        detail = message
        resume_error: ConnectError | None = None
        if stopped_by_us and unsafe:
            run.status.restore_manifest = self._restore_manifest(run, backup) if backup else None
            why = (
                "their offsets read back differ from the backup: they may be partly rewritten"
                if as_backed_up is False
                else "their offsets may be partly rewritten"
            )
            detail = (
                f"{message}. The connector(s) {', '.join(run.connectors)} stay STOPPED "
                f"and locked because {why}; the old offsets "
                f"are in ConfigMap {backup}. To put them back, apply the OffsetReset in "
                f"status.restoreManifest (kubectl get offsetreset {run.name} -n {run.namespace} "
                f"-o jsonpath='{{.status.restoreManifest}}' | kubectl apply -f -): it takes over this "
                "reset's lock. Deleting this object unlocks the connector(s) as they are"
            )
        elif stopped_by_us:
            if as_backed_up:
                source = "Connect and Kafka" if run.kafka is not None else "Connect"
                offsets = (
                    f"Nothing was changed: the offsets read back from {source} after the failure equal "
                    f"the backup in ConfigMap {backup}"
                )
            else:
                offsets = offsets_outcome(run.step(Step.RESET), str(run.spec.action), backup, changed=changed(run))
            try:
                await self._resume(run, hold=False)
                detail = f"{message}. {offsets}; the connector(s) were resumed"
            except ConnectError as exc:
                resume_error = exc
                run.status.pending_resume = True
                detail = (
                    f"{message}. {offsets}. Resuming failed too ({run.redactor(str(exc))}): the "
                    "connector(s) are STOPPED until the operator's retries of the resume get through"
                )
            # Unlocked either way: a Connector object managing the connector may then resume it too.
            with contextlib.suppress(KubeError):
                await self._unlock(run)
        else:
            with contextlib.suppress(KubeError):
                await self._unlock(run)
        conditions = Conditions(run.status.conditions, run.generation, run.emit)
        conditions.set(
            "Succeeded",
            False,
            f"{str(step)[0].upper()}{str(step)[1:]}Failed",
            detail,
            event_on_change=True,
            warning=True,
        )
        run.status.phase = ResetPhase.FAILED
        run.status.current_step = None
        run.status.conditions = conditions.items
        await self._store(run)
        metrics.RESETS.labels(
            action=str(run.spec.action), strategy=str(run.status.strategy), phase=ResetPhase.FAILED
        ).inc()
        if resume_error is not None:
            raise resume_error

    async def _offsets_as_backed_up(self, run: Run) -> bool | None:
        """Whether every connector's offsets, read back now from Connect's GET /offsets and,
        with Kafka access, from Kafka itself, equal its backup: None when that cannot be told
        (no backup yet, a read that fails, a backup that is not readable)."""
        name = run.status.backup_config_map
        if name is None:
            return None
        try:
            saved_all: dict[str, Any] = {}
            if not all(c in run.offsets_read for c in run.connectors):
                saved_all = (await self._backups.read(run.namespace, name))["connectors"]
            for connector in run.connectors:
                saved = run.offsets_read.get(connector)
                if saved is None:
                    saved = saved_all[connector]["offsets"]
                kept = [e for e in saved if e.get("offset") is not None]
                held, broker = await both(
                    run.cluster.client.get_offsets(connector), self._changes.broker_offsets(run, connector)
                )
                if diff_offsets(kept, [e for e in held if e.get("offset") is not None]):
                    return False
                if broker is not None and diff_offsets(kept, broker):
                    return False
        except (ConnectError, KubeError, KafkaOffsetsError, StepFailed, KeyError, TypeError, AttributeError):
            return None
        return True

    def _restore_manifest(self, run: Run, backup: str) -> str:
        """The OffsetReset that puts this reset's backup back, ready for kubectl apply."""
        spec: dict[str, Any] = {"action": "restore", "restoreFrom": backup, "strategy": run.status.strategy}
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
            first = next(iter(run.plan.connectors), None)
            spec["resume"] = first.resume_to if first is not None else "running"
        name = f"{run.name[:200]}-restore-{run.uid[:8]}"
        manifest = {
            "apiVersion": API_VERSION,
            "kind": "OffsetReset",
            "metadata": {"name": name, "namespace": run.namespace},
            "spec": spec,
        }
        return yaml.safe_dump(manifest, sort_keys=False)

    async def _finish_resume(self, body: Any, emit: EmitEvent) -> None:
        """Retry the resume of a Failed reset whose own resume failed (see ``_fail``)."""
        meta = body["metadata"]
        status = OffsetResetStatus.from_storage(body.get("status"))
        spec = OffsetResetSpec.model_validate(status.executed_spec or {})
        cluster_name, _ = await self._target(meta["namespace"], spec)
        cluster = await self._clusters.resolve(meta["namespace"], cluster_name, max_age=0)
        run = Run(meta["namespace"], meta["name"], meta["uid"], meta.get("generation"), status, spec, cluster, emit)
        said = await self._resume(run, hold=False)
        run.history(f"resumed after the failure: {said}")
        run.status.pending_resume = None
        conditions = Conditions(run.status.conditions, run.generation, emit)
        previous = conditions.get("Succeeded")
        text = previous.message if previous is not None else ""
        cut = text.find(" Resuming failed too")
        conditions.set(
            "Succeeded",
            False,
            previous.reason if previous is not None else "Failed",
            (text[:cut] if cut >= 0 else text) + " The connector(s) were resumed afterwards.",
        )
        run.status.conditions = conditions.items
        emit("Normal", "Resumed", f"connector(s) resumed after the failed reset: {said}")
        await self._store(run)

    # -- steps ------------------------------------------------------------------------------------

    async def _scope_lock(self, run: Run) -> None:
        run.status.lock_scope = await run.cluster.lock_scope(self._settings.capabilities_ttl_seconds)
        run.status.lock_namespace = self._settings.lock_namespace or run.namespace

    async def _lock(self, run: Run) -> str:
        if not run.status.lock_scope:
            await self._scope_lock(run)
            # recorded before the Lease exists: unlock and deletion release this very name
            await self._store(run)
        return await self._locks.take(run)

    async def _unlock(self, run: Run) -> str:
        meta = {"namespace": run.namespace, "name": run.name, "uid": run.uid}
        release = self._locks.release(
            meta, run.status, run.status.lock_scope or run.cluster.name, versions=run.lease_versions
        )
        if self._checks is None or run.spec.dry_run:
            await release
        else:
            # the check launched with the outcome reads the Connector's spec: beside the
            # release, not after it, where it would be one more round trip before Succeeded
            await asyncio.gather(release, self._read_check_connector(run))
        return "released the lock"

    async def _read_check_connector(self, run: Run) -> None:
        """The Connector's spec for the post-reset check, read ahead. A read that fails here
        does not fail the unlock: the outcome's own read (:meth:`_launch_check`) is made then,
        and its failure is handled as it always was."""
        try:
            run.check_connector = await self._connector_spec(run.namespace, run.spec)
        except Exception:  # read again, and reported if it fails again, with the outcome
            return
        run.check_connector_read = True

    async def _inspect(self, run: Run) -> str:
        return await self._inspector.inspect(run)

    async def _stop(self, run: Run) -> str:
        client = run.cluster.client
        # run.status.stopped_at was written with this step's start (_begin_next)
        for connector in run.connectors:
            await client.stop(connector)
        deadline = time.monotonic() + self._stop_timeout
        pending = run.connectors
        backoff = Backoff(DOWNTIME_POLL, hold=DOWNTIME_POLL_HOLD)
        while pending:
            state = await client.get_status(pending[0])
            if state is not None and state.state == "STOPPED" and not state.tasks:
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise NotReadyYet(f"{pending[0]} did not reach STOPPED with no tasks in {self._stop_timeout:.0f}s")
            await backoff.wait()
        run.stopped_here = True
        return f"stopped {', '.join(run.connectors)} (STOPPED, no tasks)"

    def _strategy(self, run: Run, connector: str) -> Strategy:
        """The module that changes this connector's offsets (one per strategy; see their docstrings)."""
        if run.plan.strategy == ResetStrategy.REST:
            return reset_rest
        return reset_consumer_group if run.kind(connector) == ConnectorKind.SINK else reset_tombstone

    async def _reset(self, run: Run) -> str:
        action = ResetAction(run.spec.action)
        if action is ResetAction.RESTORE:
            return await self._restore(run)
        done = []
        for connector in run.connectors:
            entries = await reset_plan_store.entries(self._kube, run, connector)
            if action is not ResetAction.RESET and not entries:
                continue
            await self._strategy(run, connector).reset(self._changes, run, connector, action, entries)
            done.append(connector)
        return f"{action} applied to {', '.join(done) or 'nothing'} ({run.plan.strategy})"

    async def _restore(self, run: Run) -> str:
        source = run.spec.restore_from or ""
        backup = await self._backups.read(run.namespace, source)
        self._backups.check(run, backup)
        restored = []
        for connector in run.connectors:
            saved = backup["connectors"][connector]
            entries = [e for e in saved["offsets"] if e.get("offset") is not None]
            await self._strategy(run, connector).restore(self._changes, run, connector, saved)
            await self._changes.confirm(run, connector, expected_after(ResetAction.RESTORE, entries, []))
            restored.append(f"{connector} ({len(entries)} partition(s))")
        return f"restored {', '.join(restored)} from ConfigMap {source}"

    async def _backup(self, run: Run) -> str:
        """Read the stopped connectors' offsets (their final commit included) into the backup
        and the plan. A run that did not stop them itself (a retried backup, a reset resumed
        from status) first sees them STOPPED with no tasks: a read of a connector that runs
        again would not be "before"."""
        if not run.stopped_here:
            for connector in run.connectors:
                state = await run.cluster.client.get_status(connector)
                if state is None or state.state != "STOPPED" or state.tasks:
                    shown = "missing" if state is None else f"{state.state} with {len(state.tasks)} task(s)"
                    raise NotReadyYet(f"{connector} is {shown}, not STOPPED with no tasks: not backed up")
        said = await self._backups.take(run)
        if run.plan.entries_config_map is not None:
            # a set-to action's scope counts the whole plan: read back by a rerun
            await reset_plan_store.entries(self._kube, run, run.connectors[0])
        publish_current(run, run.offsets_read, as_of="stop")
        return said

    async def _offset_syncs(self, run: Run) -> str:
        return await reset_mm2.clean_offset_syncs(run)

    async def _resume(self, run: Run, *, hold: bool = True) -> str:
        """Return the connectors to their planned state. ``hold=False`` (after a failure): a
        resume state the Connector's spec does not say is not held, its spec applies again."""
        client = run.cluster.client
        said = []
        for connector in run.connectors:
            target, note = await self._resume_target(run, connector) if hold else (run.plan.resume_to(connector), "")
            if target == DesiredState.RUNNING:
                await client.resume(connector)
            elif target == DesiredState.PAUSED:
                await client.pause(connector)
            said.append(f"{connector} -> {target}{note}")
        return "; ".join(said)

    async def _resume_target(self, run: Run, connector: str) -> tuple[str, str]:
        """The state the connector returns to, and what the reset says about it beyond the state.

        A connector its Connector object manages is read again here: a spec changed while the
        reset ran wins over the reset's plan; a resume state the spec does not say is held on
        the object (:mod:`planning.resume_hold`) before the connector is left in it, so that
        what the reset reports is what the connector does after the unlock."""
        planned = run.plan.resume_to(connector)
        entry = next((c for c in run.plan.connectors if c.name == connector), None)
        if entry is None or entry.managed_by is None:
            return planned, ""
        obj = await self._kube.custom_object(run.namespace, "connectors", entry.managed_by)
        generation = obj.get("metadata", {}).get("generation")
        try:
            state_now: str | None = str(ConnectorSpec.model_validate(obj.get("spec") or {}).state)
        except ValidationError:
            state_now = None
        target, as_planned = resume_target(planned, entry.managed_generation, generation, state_now)
        if not as_planned:
            entry.resume_to = target
            return target, (
                f" (Connector {entry.managed_by}'s spec changed during the reset, generation "
                f"{entry.managed_generation} -> {generation}: its spec.state {target} wins over resume: {planned})"
            )
        if isinstance(generation, int) and needs_hold(str(run.spec.resume), state_now):
            hold = ResumeHold(reset=run.name, generation=generation, state=target)
            await self._kube.annotate(run.namespace, "connectors", entry.managed_by, hold.annotation())
            return target, (
                f" (held: Connector {entry.managed_by} keeps it {target} until its spec changes; "
                f"its spec.state is {state_now})"
            )
        return target, ""

    async def _verify(self, run: Run) -> str:
        """The connectors reached the state they were returned to (running with tasks, etc.);
        and what the reset cost each one (:mod:`planning.interruption`)."""
        client = run.cluster.client
        deadline = time.monotonic() + 60
        stopped = epoch_of(run.status.stopped_at)
        resumed = epoch_of(run.status.step(Step.RESUME).started_at)
        costs = []
        for connector in run.connectors:
            want = run.plan.resume_to(connector).upper()
            watch = None
            if stopped is not None:
                # tasks cannot run before the resume call: the first poll's error bound starts there
                watch = InterruptionWatch(
                    cause=InterruptionCause.OFFSET_RESET,
                    connector=connector,
                    started=stopped,
                    already_stopped=True,
                    down_until=resumed,
                )
            backoff = Backoff(DOWNTIME_POLL, hold=DOWNTIME_POLL_HOLD)
            while True:
                sent = time.time()
                state = await client.get_status(connector)
                if watch is not None and state is not None:
                    watch.observe(time.time(), state.state, [(t.id, t.state) for t in state.tasks], sent=sent)
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
            if watch is not None:
                cost = watch.result(not_resumed=None if want == "RUNNING" else want)
                if cost.seconds is not None:
                    metrics.INTERRUPTION_SECONDS.labels(cause=cost.cause).observe(cost.seconds)
                costs.append(cost)
        run.status.interruptions = costs
        said = "; ".join(f"{c.connector}: {c.message}" for c in costs)
        return "connector(s) in their resumed state" + (f" ({said})" if said else "")


def _state_after(spec: OffsetResetSpec, connector: ConnectorSpec | None) -> str:
    """The state the reset leaves the connector in: its ``resume`` policy, else the Connector's spec."""
    if spec.resume != ResumePolicy.DESIRED:
        return str(spec.resume)
    return "running" if connector is None else str(connector.state)
