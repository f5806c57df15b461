"""Connector reconciler: observe Connect, plan, apply, report.

Modelled on Strimzi's connector reconciler (GET, compare, PUT only on a real difference; status
written only when it changed), with Connect's own validate endpoint as the gate in front of
every write: an invalid config is reported and nothing is applied.

Why ~1,200 lines in one module: it is the Connector's whole observe-plan-apply-report cycle
(validate, act, settle, report, verbs, checks, delete) around one status model; the decisions
themselves are pure and live in planning/ (connector, verbs, interruption, plugin_versions,
secrets), what a change cost is observed and published by change_cost, so what is left here is
the order of the calls, which reads best in one place.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from connectops.adapters.connect_rest import (
    ConnectAddressRefused,
    ConnectApi,
    ConnectAuthFailed,
    ConnectConflict,
    ConnectError,
    ConnectorState,
    ConnectResponseTooLarge,
    ConnectUnavailable,
    NotKafkaConnect,
)
from connectops.adapters.kube import KubeClient, KubeError, KubeObjectMissing, Lock, SecretKeyMissing
from connectops.concurrency.backoff import Backoff
from connectops.errors import NotReadyYet, SpecInvalid, WorkerStarting
from connectops.models import API_VERSION
from connectops.models.base import epoch_of, iso_ms
from connectops.models.bounds import STATUS_MAX_BYTES, STATUS_SAMPLE
from connectops.models.checks import CheckState, LastCheck
from connectops.models.connect_cluster import Capabilities
from connectops.models.connector import (
    VERSION_KEYS,
    AutoRestartStatus,
    ConnectorSpec,
    ConnectorStatus,
    DesiredState,
    OnCreateState,
    TaskStatus,
)
from connectops.models.interruption import InterruptionCause
from connectops.planning import on_create as on_create_plan
from connectops.planning import status_bounds
from connectops.planning.checks import CheckContext, verdict_config_map
from connectops.planning.connector import (
    FAILED,
    RUNNING,
    ConnectorPlan,
    Create,
    ObservedConnector,
    RestartBook,
    RestartFailed,
    SetState,
    UpdateConfig,
    failing,
    failing_run_start,
    next_look,
    plan_connector,
    plugin_missing,
    readiness,
    ready_run_start,
    render_config,
    restart_due_at,
    restart_limit_reached,
    restarts_cleared,
)
from connectops.planning.interruption import InterruptionWatch
from connectops.planning.ownership import Claim, conflict_message, owner
from connectops.planning.plugin_versions import CONNECTOR_TYPES, version_problems
from connectops.planning.reset_holder import parse_holder
from connectops.planning.secrets import RotationBook, rotated_refs, rotation_message
from connectops.planning.verbs import RECONCILE, BadVerb, Restart, acted_on, pending_verbs, reconcile_paused
from connectops.reconcilers import change_cost, producer_metrics
from connectops.reconcilers.change_cost import StatusFeed, watch_for
from connectops.reconcilers.checks import CheckRunner, apply_check_conditions
from connectops.reconcilers.claims import ClaimRecords
from connectops.reconcilers.clusters import ClusterHandle, ClusterRegistry
from connectops.reconcilers.common import Conditions, EmitEvent, Outcome
from connectops.reconcilers.connector_hold import hold_spec
from connectops.reconcilers.connector_memo import Memos
from connectops.reconcilers.mirror_loss import MirrorLossWatch
from connectops.reconcilers.on_create import AtCreateProbe, NewConnector, OffsetsOnCreate
from connectops.redact import Redactor
from connectops.settings import Settings
from connectops.validation import describe_validation_error


@dataclass
class ConnectorObject:
    """The parts of a Connector custom object a reconcile reads."""

    namespace: str
    name: str
    uid: str
    generation: int | None
    spec: dict[str, Any]
    status: ConnectorStatus
    created: str = ""
    annotations: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_body(cls, body: Any) -> ConnectorObject:
        meta = body.get("metadata", {})
        return cls(
            namespace=meta.get("namespace", "default"),
            name=meta["name"],
            uid=meta.get("uid", ""),
            generation=meta.get("generation"),
            spec=dict(body.get("spec") or {}),
            status=_stored_status(body.get("status")),
            created=str(meta.get("creationTimestamp") or ""),
            annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
        )

    def claim(self) -> Claim | None:
        """What this object claims (None when its spec cannot be read: it claims nothing)."""
        return claim_of(self.namespace, self.name, self.uid, self.created, self.spec)


_T = TypeVar("_T")

#: how long before the next automatic restart falls due the wait after a restart ends: what is
#: left of that reconcile (its status write, under the object's lock) is done by then, so the
#: look that makes the next restart starts on time, not after it (measured at up to a second
#: late on a loaded 2-core machine without it)
RESTART_LOOK_AHEAD_SECONDS = 0.5


async def _config_and_status(client: ConnectApi, connector: str) -> tuple[dict[str, str] | None, ConnectorState | None]:
    """Both reads at once, both awaited before this returns (a TaskGroup, not gather, which left
    the other read running unawaited when one failed), and neither task ends with an exception:
    kopf re-raises, at shutdown, any task of the loop that failed, even one whose error was
    handled (CI22, CI24: a read refused by a client closed for the shutdown). The first failure
    is raised here, as itself, so the typed error mapping above still applies."""

    async def kept(call: Awaitable[_T]) -> _T | BaseException:
        try:
            return await call
        except Exception as exc:
            return exc

    async with asyncio.TaskGroup() as group:
        config = group.create_task(kept(client.get_config(connector)))
        status = group.create_task(kept(client.get_status(connector)))
    live, state = config.result(), status.result()
    if isinstance(live, BaseException):
        raise live
    if isinstance(state, BaseException):
        raise state
    return live, state


def claim_of(namespace: str, name: str, uid: str, created: str, spec: Mapping[str, Any]) -> Claim | None:
    cluster = (spec.get("clusterRef") or {}).get("name") if isinstance(spec.get("clusterRef"), dict) else None
    if not cluster:
        return None
    return Claim(namespace, name, uid, created, str(cluster))


def claimed_name(name: str, spec: Mapping[str, Any]) -> str:
    """The connector a Connector object names (the index key)."""
    return str(spec.get("connectorName") or name)


def observe(state: ConnectorState | None, live: dict[str, str] | None) -> ObservedConnector:
    """What the planner needs of Connect's answers (shared with ``connectops plan``)."""
    if state is None:
        return ObservedConnector(live_config=live, state=None)
    return ObservedConnector(
        live_config=live,
        state=state.state,
        failed_tasks=tuple(t.id for t in state.tasks if t.state == FAILED),
        task_count=len(state.tasks),
        connector_failed=state.state == FAILED,
        unsettled_tasks=tuple((t.id, t.state) for t in state.tasks if t.state not in (RUNNING, FAILED)),
    )


@dataclass(frozen=True)
class _Change:
    """What every planned action of one reconcile acts with (the restart bookkeeping, which each
    action may move on, goes from one to the next beside it)."""

    connector: str
    desired: dict[str, str]
    emit: EmitEvent
    #: a resync's pass (what it corrects is drift, worded as such), not a change's
    periodic: bool
    #: the Secret keys rotated since the last pass (an UpdateConfig of only those is a rotation)
    rotation: Mapping[str, tuple[str, str]]
    #: runs the moment Connect answers a create
    created: Callable[[], Awaitable[None]]


class ConnectorReconciler:
    def __init__(
        self,
        kube: KubeClient,
        clusters: ClusterRegistry,
        settings: Settings,
        checks: CheckRunner,
        rotations: RotationBook | None = None,
    ) -> None:
        self._kube = kube
        # without a Secret watch nothing is noted, and a rotated value is drift like any other
        self._rotations = rotations or RotationBook(0.0)
        self._clusters = clusters
        self._settings = settings
        self._checks = checks
        #: what this process remembers of each Connector between passes, forgotten on delete
        self.memos = Memos()
        self._on_create = OffsetsOnCreate(kube)
        self._mirror_loss = MirrorLossWatch()
        self._claims = ClaimRecords(kube, settings.claim_namespace)

    async def reconcile(
        self,
        obj: ConnectorObject,
        emit: EmitEvent,
        *,
        periodic: bool,
        listed: Callable[[str], bool] | None = None,
        rivals: Sequence[Claim] = (),
        old_claims: Sequence[Claim] = (),
    ) -> Outcome:
        """``rivals``: the Connector objects naming the same connector; ``old_claims``: those
        naming the connector spec.offsets.from renames (none without one). ``listed``: the
        connector may be observed in its worker group's shared listing (resyncs, resumes) rather
        than with its own reads, which keeps the connectors it names (this namespace's); None:
        read afresh, as a change always does."""
        conditions = Conditions(obj.status.conditions, obj.generation, emit)
        status = ConnectorStatus(observed_generation=obj.generation)
        # a resync that reaches a spec change before the change's own handler (queued behind it)
        # applies the user's change: ConfigUpdated, not drift (the handler then finds the live
        # config already as desired). What this process acted on last counts too: the body can
        # predate the status patch of the handler just before (see ConnectorMemo.book)
        acted = max(obj.status.observed_generation or 0, self.memos.of(obj.uid).generation)
        if periodic and obj.generation is not None and acted < obj.generation:
            periodic = False
        outcome = Outcome()
        outcome.error = await self._reconcile(
            obj, emit, (periodic, listed), (rivals, old_claims), status, conditions, outcome
        )
        status.conditions = conditions.items
        if obj.generation is not None:
            self.memos.of(obj.uid).generation = obj.generation
        outcome.status = _storable(obj.status.patch(), status, conditions)
        return outcome

    async def _reconcile(
        self,
        obj: ConnectorObject,
        emit: EmitEvent,
        trigger: tuple[bool, Callable[[str], bool] | None],
        claims: tuple[Sequence[Claim], Sequence[Claim]],
        status: ConnectorStatus,
        conditions: Conditions,
        outcome: Outcome,
    ) -> BaseException | None:
        """Decide and act; what was decided goes into ``status`` and ``conditions``, when to look
        again into ``outcome``, what to retry on is returned."""
        try:
            spec = ConnectorSpec.model_validate(obj.spec)
        except ValidationError as exc:
            conditions.set(
                "Valid",
                False,
                "InvalidSpec",
                describe_validation_error(exc),
                event_on_change=True,
                warning=True,
            )
            conditions.set("Ready", False, "InvalidSpec", "spec is invalid; nothing was applied")
            return None
        spec = hold_spec(spec, obj.annotations, obj.generation, conditions)
        connector = spec.connector_name or obj.name
        status.connector_name = connector
        redactor = Redactor()
        handle: ClusterHandle | None = None
        try:
            cluster = handle = await self._clusters.resolve(obj.namespace, spec.cluster_ref.name)
            redactor.include(cluster.redactor)
            rivals, old_claims = claims
            rival = await self._owned_elsewhere(obj, connector, cluster, rivals, status)
            if rival is not None:
                message = conflict_message(connector, Claim(obj.namespace, obj.name, obj.uid, obj.created, ""), rival)
                conditions.set("Ready", False, "NameConflict", message, event_on_change=True, warning=True)
                conditions.set("Synced", False, "NameConflict", "nothing is written while another object owns it")
                return None
            secret_values = await self._secret_values(obj.namespace, spec)
            redactor.add(secret_values.values())
            refs = {k: (s.secret_key_ref.name, s.secret_key_ref.key) for k, s in spec.config_from.items()}
            now = time.monotonic()
            rotation = rotated_refs(refs, lambda secret: self._rotations.recent(obj.namespace, secret, now))
            renamed = await self._renamed_claims(spec, cluster, old_claims)
            outcome.look_at = await self._apply(
                obj,
                spec,
                connector,
                cluster,
                secret_values,
                redactor,
                conditions,
                status,
                emit,
                trigger,
                rotation,
                renamed,
            )
        except SpecInvalid as exc:
            conditions.set("Valid", False, exc.reason, str(exc), event_on_change=True, warning=True)
            conditions.set("Ready", False, exc.reason, "spec is invalid; nothing was applied")
        except (KubeObjectMissing, SecretKeyMissing) as exc:
            conditions.set("Ready", False, "ReferenceNotFound", redactor(str(exc)), event_on_change=True, warning=True)
            return exc
        except ConnectError as exc:
            starting = await _starting(handle, exc)
            if starting is not None:
                # the worker says it is starting (KIP-1017): wait and say so, without a warning
                message = redactor(f"the Connect worker is starting ({starting}); changes wait until it is ready")
                conditions.set("Ready", False, "WorkerStarting", message, event_on_change=True)
                return WorkerStarting(message)
            message = redactor(str(exc))
            conditions.set(
                "Ready",
                False,
                _reason(exc),
                message,
                event_on_change=True,
                warning=True,
            )
            return exc
        except KubeError as exc:
            conditions.set("Ready", False, "KubernetesError", str(exc))
            return exc
        except NotReadyYet as exc:
            return exc  # the conditions already say what is awaited
        return None

    async def _owned_elsewhere(
        self,
        obj: ConnectorObject,
        connector: str,
        cluster: ClusterHandle,
        rivals: Sequence[Claim],
        status: ConnectorStatus | None = None,
    ) -> Claim | None:
        """The Connector object that owns this connector, or None when this one does: the
        holder of the recorded claim (connectops.reconcilers.claims), else the oldest of the
        rivals that reach the same Kafka cluster (:meth:`same_kafka_cluster`). ``status``: where
        this object's claim is recorded, once it owns the connector."""
        ttl = self._settings.capabilities_ttl_seconds
        others = [r for r in rivals if r.uid != obj.uid]
        if not others and not self._claims.namespace:
            return None  # alone, and no claim is recorded: nothing to ask anyone
        me = Claim(obj.namespace, obj.name, obj.uid, obj.created, cluster.name)
        eldest = owner(me, await self._clusters.same_kafka_cluster(cluster, others, ttl)) if others else me
        kafka_cluster = await cluster.kafka_cluster_id(ttl)
        recorded = obj.status.claim
        found = await self._claims.owner(me, kafka_cluster, connector, eldest, recorded, contested=bool(others))
        if status is None:
            return found
        if found is not None:
            if recorded is not None:
                status.claim = None
            return found
        mine = self._claims.record(kafka_cluster, connector) if self._claims.namespace and kafka_cluster else None
        if recorded is not None and recorded != mine:
            # it names another connector (or another Kafka cluster) now: the old one is free
            await self._claims.release(me, recorded)
        status.claim = mine
        return None

    async def _renamed_claims(
        self, spec: ConnectorSpec, cluster: ClusterHandle, claims: Sequence[Claim]
    ) -> tuple[tuple[str, str], ...]:
        """The Connector objects managing the connector a rename takes over, on this Kafka cluster."""
        if spec.offsets is None or spec.offsets.from_ is None or not claims:
            return ()
        same = await self._clusters.same_kafka_cluster(cluster, list(claims), self._settings.capabilities_ttl_seconds)
        return tuple((c.namespace, c.name) for c in same)

    async def _secret_values(self, namespace: str, spec: ConnectorSpec) -> dict[str, str]:
        values = {}
        for key, source in spec.config_from.items():
            ref = source.secret_key_ref
            values[key] = await self._kube.secret_value(namespace, ref.name, ref.key)
        return values

    async def _apply(  # noqa: PLR0913 - the pass's inputs, handed down once by reconcile()
        self,
        obj: ConnectorObject,
        spec: ConnectorSpec,
        connector: str,
        cluster: ClusterHandle,
        secret_values: dict[str, str],
        redactor: Redactor,
        conditions: Conditions,
        status: ConnectorStatus,
        emit: EmitEvent,
        trigger: tuple[bool, Callable[[str], bool] | None],
        rotation: Mapping[str, tuple[str, str]],
        renamed_claims: tuple[tuple[str, str], ...] = (),
    ) -> float | None:
        """Carry out the plan; when the automatic restarts need the next look (None: the resync's)."""
        client = cluster.client
        periodic, listed = trigger
        _, caps = await cluster.capabilities(self._settings.capabilities_ttl_seconds)
        desired = render_config(spec, connector, secret_values)
        live, state, fresh = await self._observe(cluster, connector, listed)
        # The body a handler gets can predate the status patch of the handler before it (kopf
        # patches after the handler returns, outside the per-object lock): a resync timer queued
        # behind a change would count from the old book and restart a failed task a second time.
        # What this process wrote last is remembered; the status is the record across restarts.
        book_raw = self.memos.of(obj.uid).book or obj.status.auto_restart
        if _reconcile_paused(obj, conditions):
            self._report(status, state, book_raw)
            return None
        new = NewConnector(
            client,
            obj.namespace,
            obj.name,
            obj.uid,
            spec,
            connector,
            desired,
            obj.status.offsets_on_create,
            old_claims=renamed_claims,
            handed_over=obj.annotations.get(on_create_plan.HANDED_OVER),
        )
        pending = await self._on_create.pending(new, status, conditions, emit)
        if pending:
            self._report(status, state, book_raw)
            return None
        if pending is False:  # applied just now: the reset moved the connector, look again
            live, state = await _config_and_status(client, connector)
            fresh = True
        book = _book(book_raw)
        plan, live, state = await self._planned(
            obj, spec, cluster, connector, desired, caps, book, (live, state, fresh)
        )
        if _plan_held(plan, conditions):
            self._report(status, state, book_raw)
            return None

        if plan.needs_validation and not await self._validated(obj, spec, cluster, desired, redactor, conditions, emit):
            self._report(status, state, book_raw)
            return None
        conditions.set("Valid", True, "Validated", "Connect accepted the configuration")

        created = any(isinstance(a, Create) for a in plan.actions)
        if created and on_create_plan.needs_reset(spec.offsets):
            await self._on_create.create(new, caps, status, conditions, emit)
            self._report(status, state, book_raw)
            return None
        at_create = AtCreateProbe(new, caps)
        change = _Change(connector, desired, emit, periodic, rotation, at_create)
        book_raw, watch, feed = await self._act_all(plan.actions, cluster, state, book, book_raw, change)
        self.memos.of(obj.uid).book = book_raw
        conditions.set("Synced", True, "Synced", "live config matches the spec")
        await self._on_create.report(new, caps, created, at_create.read, status, conditions, emit)

        if plan.actions:
            # polls of the REST status must follow the change from its start; the status records
            # keep, so that watch can wait until the check is launched (below)
            rest_watch = watch if feed is None else None
            until = _settle_until(spec, plan, book_raw)
            state = await self._settle(client, connector, spec, rest_watch, until=until, created=created)
            change_cost.publish(rest_watch, status, emit)
            live = desired
        ready = readiness(spec, observe(state, live))
        # or seen now: the task failed again after the last restart the limit allows
        if plan.restart_limit_reached or restart_limit_reached(spec, observe(state, live), _book(book_raw)):
            conditions.set(
                "Ready",
                False,
                "RestartLimitReached",
                f"gave up after {book_raw.count} automatic restarts; restart manually or raise autoRestart.maxRestarts",
                event_on_change=True,
                warning=True,
            )
        else:
            conditions.set("Ready", ready.ready, ready.reason, ready.message)
        if self._restarts_cleared(obj.uid, spec, ready.ready, book):
            book_raw = self.memos.of(obj.uid).book = AutoRestartStatus(
                count=0, last_restart_time=book_raw.last_restart_time
            )
        self._report(status, state, book_raw)
        look = self._look(obj.uid, spec, observe(state, live), book_raw, conclusive=bool(plan.actions))
        if state is not None:
            await self._restarts(obj, spec, cluster, connector, state, book_raw, status, emit)
        await self._check(obj, spec, connector, cluster, plan.actions, conditions, status, state, emit)
        await self._mirror_loss.look(client, connector, desired, obj.annotations, obj.status, status, conditions)
        if watch is not None and feed is not None:
            # after the check is launched: the check follows the change, not the end of its watch
            await self._settle(client, connector, spec, watch, feed)
            change_cost.publish(watch, status, emit)
        return look

    def _restarts_cleared(self, uid: str, spec: ConnectorSpec, ready: bool, book: RestartBook) -> bool:
        """Records this observation in the object's run of Ready ones; whether its restart
        count starts again from 0 (planning.connector.restarts_cleared)."""
        now = time.time()
        memo = self.memos.of(uid)
        since = memo.ready_since = ready_run_start(ready, memo.ready_since, now)
        return restarts_cleared(spec, ready, book, now, since)

    def _seen(self, uid: str, book: RestartBook, observed: ObservedConnector, *, conclusive: bool) -> RestartBook:
        """Records this observation in the object's run of failing ones; the book with its start."""
        memo = self.memos.of(uid)
        since = memo.failing_since = failing_run_start(
            failing(observed), memo.failing_since, time.time(), conclusive=conclusive
        )
        return RestartBook(book.count, book.last_restart_at, since)

    def _look(
        self, uid: str, spec: ConnectorSpec, observed: ObservedConnector, book: AutoRestartStatus, *, conclusive: bool
    ) -> float | None:
        """When the automatic restarts need this connector looked at again (planning.connector.next_look)."""
        seen = self._seen(uid, _book(book), observed, conclusive=conclusive)
        return next_look(spec, observed, seen, time.time())

    async def _planned(
        self,
        obj: ConnectorObject,
        spec: ConnectorSpec,
        cluster: ClusterHandle,
        connector: str,
        desired: dict[str, str],
        caps: Capabilities,
        book: RestartBook,
        seen: tuple[dict[str, str] | None, ConnectorState | None, bool],
    ) -> tuple[ConnectorPlan, dict[str, str] | None, ConnectorState | None]:
        """The plan, and the live config and status it was made from. A listing may be up to half
        a period old: it decides only that nothing is to be done; anything to do (an action, a
        restart verb, the restart count to clear) is decided again on the connector's own reads,
        just made, and on the reset lock, read then.

        The lock is read only when there is something to decide: it can only hold back what
        would be done (a reset in this process also holds the object's lock for its whole run),
        and reading it for every Connector at every resync and start-up was a Lease GET each,
        a third of the operator's CPU when it restarted with 3,000 Connectors (py-spy). So a
        Connector with nothing to do is not told that a reset holds it; one that would act is,
        before anything is done (the reset stops a running connector: a Connector whose spec
        says running then has something to do)."""
        live, state, fresh = seen
        book = self._seen(obj.uid, book, observe(state, live), conclusive=fresh)
        plan = plan_connector(spec, desired, observe(state, live), caps, locked_by=None, restarts=book, now=time.time())
        # the restart book is reset once the connector is seen Ready: that too is a decision
        # (CI25: a listing taken while a failing task was briefly RUNNING reset it each time)
        verbs = pending_verbs(obj.annotations, self.memos.of(obj.uid).acted or obj.status.verbs)
        if not (plan.actions or book.count > 0 or verbs):
            return plan, live, state
        if not fresh:
            live, state = await _config_and_status(cluster.client, connector)
        lock = await self._reset_lock(obj.namespace, cluster, connector)
        locked_by = _holder_text(lock.holder, obj.namespace) if lock else None
        book = self._seen(obj.uid, book, observe(state, live), conclusive=True)
        plan = plan_connector(
            spec, desired, observe(state, live), caps, locked_by=locked_by, restarts=book, now=time.time()
        )
        return plan, live, state

    async def _observe(
        self, cluster: ClusterHandle, connector: str, listed: Callable[[str], bool] | None
    ) -> tuple[dict[str, str] | None, ConnectorState | None, bool]:
        """The connector's live config and status, and whether they were read just now: from
        the worker group's shared listing when ``listed`` and it shows the connector, else with
        the connector's own two reads."""
        if listed is not None:
            listing = await cluster.listing(self._settings.resync_seconds / 2, listed)
            entry = listing.get(connector) if listing is not None else None
            if entry is not None:
                return entry.config, entry.state, False
        live, state = await _config_and_status(cluster.client, connector)
        return live, state, True

    async def _validated(
        self,
        obj: ConnectorObject,
        spec: ConnectorSpec,
        cluster: ClusterHandle,
        desired: dict[str, str],
        redactor: Redactor,
        conditions: Conditions,
        emit: EmitEvent,
    ) -> bool:
        """Connect's gate before any write: the class is installed and validate finds no error.
        False: it said no, the conditions say why, and nothing may be applied."""
        plugins = await cluster.plugins(self._settings.capabilities_ttl_seconds)
        # a worker that predates plugin types in the list lists connectors only
        installed = sorted({p.class_name for p in plugins if p.type in CONNECTOR_TYPES or not p.type})
        missing = plugin_missing(spec.connector_class, installed)
        if missing is not None:
            shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
            message = (
                f"connector class {spec.connector_class} is not installed on the worker "
                f"(installed, closest first: {shown or 'none'}); re-checked every "
                f"{self._settings.capabilities_ttl_seconds:g}s and on every spec change"
            )
            # once per object and class: a resync queued behind the change handler gets the
            # body from before its status patch and would announce it a second time
            conditions.set("Valid", False, "PluginNotFound", message)
            if self.memos.of(obj.uid).missing_plugin != spec.connector_class:
                self.memos.of(obj.uid).missing_plugin = spec.connector_class
                emit("Warning", "PluginNotFound", message)
            conditions.set("Synced", False, "PluginNotFound", "nothing was applied: the class is not installed")
            conditions.set("Ready", False, "PluginNotFound", f"connector class {spec.connector_class} is not installed")
            return False
        self.memos.of(obj.uid).missing_plugin = None
        problems = version_problems(spec, plugins)
        if problems:
            message = redactor(
                "; ".join(p.message() for p in problems)
                + f"; re-checked every {self._settings.capabilities_ttl_seconds:g}s and on every spec change"
            )
            conditions.set("Valid", False, "PluginVersionNotFound", message)
            # once per object and set of pins, for the same reason as PluginNotFound above
            pins = "\x00".join(f"{p.key}={p.plugin}@{p.wanted}" for p in problems)
            if self.memos.of(obj.uid).missing_version != pins:
                self.memos.of(obj.uid).missing_version = pins
                emit("Warning", "PluginVersionNotFound", message)
            conditions.set(
                "Synced", False, "PluginVersionNotFound", "nothing was applied: no installed version matches the pin"
            )
            conditions.set(
                "Ready",
                False,
                "PluginVersionNotFound",
                ", ".join(f"{p.key}={p.wanted} matches no installed version" for p in problems),
            )
            return False
        self.memos.of(obj.uid).missing_version = None
        result = await cluster.client.validate(spec.connector_class, desired)
        if result.error_count:
            detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in sorted(result.errors.items()))
            message = redactor(detail or f"{result.error_count} configuration error(s)")
            # Connect's own verdict on a pin the plugin list could not judge (Connect has the last
            # word); it names the class key too, and skips the rest of the validation
            reason = "PluginVersionNotFound" if VERSION_KEYS & set(result.errors) else "ConfigInvalid"
            conditions.set("Valid", False, reason, message, event_on_change=True, warning=True)
            conditions.set(
                "Synced",
                False,
                reason,
                "Connect rejected the desired config; the live config is unchanged",
            )
            conditions.set("Ready", False, reason, "configuration rejected by Connect")
            return False
        return True

    async def _act_all(
        self,
        actions: Sequence[Any],
        cluster: ClusterHandle,
        state: ConnectorState | None,
        book: RestartBook,
        book_raw: AutoRestartStatus,
        change: _Change,
    ) -> tuple[AutoRestartStatus, InterruptionWatch | None, StatusFeed | None]:
        """The planned actions in order; the watch of what a config change costs, begun just
        before it (the status records are read from there). ``change.created`` runs the moment
        Connect answers a create (not a create that found the connector there already)."""
        watch: InterruptionWatch | None = None
        feed: StatusFeed | None = None
        for action in actions:
            if (began := change_cost.watch_change(action, state, change.periodic)) is not None:
                watch, feed = began, await StatusFeed.begin(cluster, change.connector)
            book_raw = await self._act(action, cluster.client, book, book_raw, change)
        if actions:
            cluster.forget_listed(change.connector)  # written to: the listing no longer says what it is
        return book_raw, watch, feed

    async def _act(
        self, action: Any, client: ConnectApi, book: RestartBook, book_raw: AutoRestartStatus, change: _Change
    ) -> AutoRestartStatus:
        """Carry out one planned action; the restart bookkeeping as it stands afterwards."""
        connector, desired, emit, periodic = change.connector, change.desired, change.emit, change.periodic
        if isinstance(action, Create):
            try:
                await client.create(connector, desired, action.initial_state)
            except ConnectConflict:
                # created concurrently (or by a previous attempt whose answer was lost)
                await client.put_config(connector, desired)
            else:
                await change.created()
            emit("Normal", "Created", f"connector {connector} created in Kafka Connect")
        elif isinstance(action, UpdateConfig):
            await client.put_config(connector, desired)
            rotated = rotation_message(change.rotation, action.changed_keys)
            if rotated is not None:
                emit("Normal", "SecretRotated", rotated)
                return book_raw
            keys = ", ".join(action.changed_keys[:20])
            reason = "DriftCorrected" if periodic else "ConfigUpdated"
            emit("Normal" if not periodic else "Warning", reason, f"config keys changed: {keys}")
        elif isinstance(action, SetState):
            await self._set_state(client, connector, action.target)
            reason = "StateDriftCorrected" if periodic else "StateChanged"
            emit(
                "Normal" if not periodic else "Warning",
                reason,
                f"{action.observed or 'new'} -> {action.target.upper()}",
            )
        elif isinstance(action, RestartFailed):
            await self._restart(client, connector, action)
            emit(
                "Warning",
                "Restarted",
                f"restarted failed {'connector and ' if action.connector_failed else ''}"
                f"tasks {list(action.failed_tasks)} (restart {book.count + 1})",
            )
            # to the millisecond: the next restart's delay counts from it, and a time cut to the
            # second would bring that restart up to a second early
            return AutoRestartStatus(count=book.count + 1, last_restart_time=iso_ms(time.time()))
        return book_raw

    async def _restarts(
        self,
        obj: ConnectorObject,
        spec: ConnectorSpec,
        cluster: ClusterHandle,
        connector: str,
        state: ConnectorState,
        book: AutoRestartStatus,
        status: ConnectorStatus,
        emit: EmitEvent,
    ) -> None:
        """The restart verbs, and what restarting running tasks cost."""
        watch, feed = await self._verbs(obj, cluster, connector, state, status, emit)
        if watch is not None:
            after = await self._settle(cluster.client, connector, spec, watch, feed)
            change_cost.publish(watch, status, emit)
            self._report(status, after, book)

    async def _verbs(
        self,
        obj: ConnectorObject,
        cluster: ClusterHandle,
        connector: str,
        state: ConnectorState,
        status: ConnectorStatus,
        emit: EmitEvent,
    ) -> tuple[InterruptionWatch | None, StatusFeed | None]:
        """Act once on each restart annotation whose value is new (see :mod:`planning.verbs`);
        the watch of what the last restart of running tasks costs, if one was made.

        The token is recorded only after Connect accepted the call: a failed call is retried
        with the reconcile, never lost, and never repeated once done.
        """
        client = cluster.client
        watch: InterruptionWatch | None = None
        feed: StatusFeed | None = None
        # The body a handler gets can predate the status patch of the handler before it (kopf
        # patches after the handler returns, outside the per-object lock): what this process
        # did last is remembered here, the status is the record across restarts.
        acted = self.memos.of(obj.uid).acted or obj.status.verbs
        for verb in pending_verbs(obj.annotations, acted):
            if isinstance(verb, BadVerb):
                emit("Warning", "BadAnnotation", f"{verb.annotation}: {verb.value[:100]!r}: {verb.why}")
            elif isinstance(verb, Restart):
                # restarting only failed tasks stops nothing that was processing
                if not verb.only_failed and (began := watch_for(state, InterruptionCause.RESTARTED)) is not None:
                    watch, feed = began, await StatusFeed.begin(cluster, connector)
                await client.restart(connector, include_tasks=True, only_failed=verb.only_failed)
                what = "the connector and its failed tasks" if verb.only_failed else "the connector and all its tasks"
                emit("Normal", "Restarted", f"{verb.annotation}={verb.value}: restarted {what}")
            else:
                running = frozenset(t.id for t in state.tasks if t.state == "RUNNING") & frozenset(verb.task_ids)
                if running and (began := watch_for(state, InterruptionCause.RESTARTED, running)) is not None:
                    watch, feed = began, await StatusFeed.begin(cluster, connector)
                for task_id in verb.task_ids:
                    await client.restart_task(connector, task_id)
                emit("Normal", "Restarted", f"{verb.annotation}={verb.value}: restarted tasks {list(verb.task_ids)}")
            acted = acted_on(acted, verb)
            self.memos.of(obj.uid).acted = acted
            cluster.forget_listed(connector)
            status.verbs = acted
        return watch, feed

    async def _check(  # noqa: PLR0913 - the pass's inputs and what it writes to
        self,
        obj: ConnectorObject,
        spec: ConnectorSpec,
        connector: str,
        cluster: ClusterHandle,
        actions: list[Any],
        conditions: Conditions,
        status: ConnectorStatus,
        state: ConnectorState | None,
        emit: EmitEvent,
        again: str | None = None,
    ) -> None:
        """After a change: launch the lag/balance check. Otherwise: follow the one in flight.
        ``again``: the trigger of a check asked for by what the last one found (restarted tasks)."""
        changes = [a for a in actions if isinstance(a, Create | UpdateConfig | SetState)]
        # A resync queued behind the change handler gets the body from before that handler's
        # status patch: following the check stored there would put the previous check back
        # over the one just launched. What this process launched last is the newer record.
        last = _newer_check(obj.status.last_check, self.memos.of(obj.uid).last_check)
        trigger = again or ""
        if again is None and changes:
            trigger = f"generation {obj.generation}: " + ", ".join(type(a).__name__ for a in changes)
        elif again is None and last is not None and await self._checks.lost(obj.namespace, last, obj.uid, spec.check):
            # queued by a process that is gone before its batch was launched: asked again
            trigger = last.trigger or f"generation {obj.generation}"
        if trigger:
            launched = await self._checks.request(
                namespace=obj.namespace,
                owner={
                    "apiVersion": API_VERSION,
                    "kind": "Connector",
                    "metadata": {"name": obj.name, "uid": obj.uid},
                },
                suffix=f"g{obj.generation}-pm" if again else f"g{obj.generation}",
                connector=connector,
                cluster=cluster.spec,
                cluster_name=cluster.name,
                check=spec.check,
                trigger=trigger,
                context=CheckContext(
                    desired_state=str(spec.state),
                    baseline_config_map=_previous_verdict(status.last_check if again else obj.status.last_check),
                ),
            )
            if launched is not None:
                status.last_check = launched
                self.memos.of(obj.uid).last_check = launched
                if launched.state == CheckState.NOT_SUBMITTED:
                    reason = "; ".join(launched.reasons)
                    conditions.set("LagHealthy", None, "CheckNotSubmitted", reason)
                    conditions.set("PartitionsBalanced", None, "CheckNotSubmitted", reason)
                return
        if last is not None:
            updated, result = await self._checks.poll(obj.namespace, last, spec.check)
            status.last_check = updated
            self.memos.of(obj.uid).last_check = updated
            if result is not None:
                apply_check_conditions(conditions, result)
                retrigger = await producer_metrics.remedy(
                    cluster.client, connector, spec, state, updated, result, conditions, emit, obj.generation
                )
                if retrigger is not None:
                    await self._check(obj, spec, connector, cluster, [], conditions, status, state, emit, retrigger)

    async def _set_state(self, client: ConnectApi, connector: str, target: DesiredState) -> None:
        if target is DesiredState.RUNNING:
            await client.resume(connector)
        elif target is DesiredState.PAUSED:
            await client.pause(connector)
        else:
            await client.stop(connector)

    async def _restart(self, client: ConnectApi, connector: str, action: RestartFailed) -> None:
        if action.use_only_failed:
            await client.restart(connector, include_tasks=True, only_failed=True)
            return
        if action.connector_failed:
            await client.restart(connector, include_tasks=False, only_failed=False)
        for task in action.failed_tasks:
            await client.restart_task(connector, task)

    async def _settle(
        self,
        client: ConnectApi,
        connector: str,
        spec: ConnectorSpec,
        watch: InterruptionWatch | None = None,
        feed: StatusFeed | None = None,
        *,
        until: float | None = None,
        created: bool = False,
    ) -> ConnectorState | None:
        """Poll until Connect reports the desired state (and, after a change that stops tasks,
        until they are back: what it cost), so Ready is right on the first status write instead
        of one resync later; or until it reports a failure that came after the change, which
        waiting cannot mend and which the automatic restarts time from when it is seen. A
        failure came after the change when the connector was just ``created``, else once the
        connector or task was seen otherwise first: Connect's status can show the failure from
        before a change for a moment after it (a task that fails in ``start()`` again after a
        restart is seen otherwise for tens of milliseconds at most, so ``until`` bounds that
        wait). Bounded: by ``settleSeconds`` and by ``until`` (a wall-clock time), and the
        timer catches slow workers."""
        deadline = time.monotonic() + self._settings.settle_seconds
        if until is not None:
            deadline = min(deadline, time.monotonic() + until - time.time())
        backoff = Backoff()
        changed = created
        while True:
            sent = time.time()
            state = await client.get_status(connector)
            watched = await change_cost.observe(watch, feed, state, sent)
            seen = observe(state, {})
            if watched and state is not None and readiness(spec, seen).ready:
                return state
            if watched and changed and failing(seen):
                return state
            changed = changed or not failing(seen)
            if time.monotonic() >= deadline:
                return state
            await backoff.wait()

    @staticmethod
    def _report(status: ConnectorStatus, state: ConnectorState | None, book: AutoRestartStatus) -> None:
        status.auto_restart = book
        if state is None:
            status.connector_state = None
            status.worker_id = None
            status.connector_version = None
            status.tasks = []
            status.tasks_omitted = None
            status.tasks_running = None
            return
        status.connector_state = state.state
        status.worker_id = state.worker_id
        status.connector_version = state.version
        shown = status_bounds.shown_tasks(state.tasks, STATUS_SAMPLE)
        status.tasks = [
            TaskStatus(id=t.id, state=t.state, worker_id=t.worker_id, version=t.version, trace=t.trace) for t in shown
        ]
        status.tasks_omitted = len(state.tasks) - len(shown) or None
        running = sum(1 for t in state.tasks if t.state == "RUNNING")
        status.tasks_running = f"{running}/{len(state.tasks)}"

    async def _reset_lock(self, namespace: str, cluster: ClusterHandle, connector: str) -> Lock | None:
        """The reset lock on this connector, whichever ConnectCluster object the reset went
        through (the lock is per Kafka cluster, see :meth:`ClusterHandle.lock_scope`); and the
        lock under the ConnectCluster's name, which resets started before lock scopes still hold.
        Locks live in the operator's lock namespace when it has one (a reset from any namespace),
        else in the namespace of the reset, which may only target this Connector from here."""
        where = self._settings.lock_namespace or namespace
        scope = await cluster.lock_scope(self._settings.capabilities_ttl_seconds)
        lock = await self._kube.lock_holder(where, scope, connector)
        if lock is None and scope != cluster.name and where == namespace:
            lock = await self._kube.lock_holder(namespace, cluster.name, connector)
        return lock

    async def delete(
        self, obj: ConnectorObject, emit: EmitEvent, *, rivals: Sequence[Claim] = (), heirs: Sequence[Claim] = ()
    ) -> None:
        """Remove the connector from Connect, then give up the object's claim on it (not before:
        a rival that took the claim over would create the connector again under this delete). A
        vanished ConnectCluster cannot be reached any more, so the finalizer is released with a
        warning instead of blocking deletion forever. ``heirs``: the Connector objects renaming
        this one's connector (spec.offsets.from), from the index."""
        self.memos.forget(obj.uid)
        self._checks.batches.withdraw(obj.uid)
        await self._delete(obj, emit, rivals, heirs)
        await self._claims.release(Claim(obj.namespace, obj.name, obj.uid, obj.created, ""), obj.status.claim)

    async def _delete(
        self, obj: ConnectorObject, emit: EmitEvent, rivals: Sequence[Claim], heirs: Sequence[Claim]
    ) -> None:
        try:
            spec = ConnectorSpec.model_validate(obj.spec)
        except ValidationError:
            return  # never applied: nothing to delete
        connector = spec.connector_name or obj.name
        try:
            cluster = await self._clusters.resolve(obj.namespace, spec.cluster_ref.name)
        except SpecInvalid as exc:
            # an invalid or disallowed ConnectCluster cannot be called: the object must still go
            emit("Warning", "ClusterInvalid", f"{exc}; connector {connector} was not deleted from Kafka Connect")
            return
        except KubeObjectMissing:
            emit(
                "Warning",
                "ClusterGone",
                f"ConnectCluster {spec.cluster_ref.name} is gone; connector {connector} was not "
                "deleted from Kafka Connect",
            )
            return
        try:
            rival = await self._owned_elsewhere(obj, connector, cluster, rivals)
        except ConnectError:
            rival = None  # the worker is unreachable: the delete below fails and is retried
        if rival is not None:
            emit("Normal", "NotDeleted", f"connector {connector} belongs to another Connector object; left in place")
            return
        lock = await self._reset_lock(obj.namespace, cluster, connector)
        if lock is not None:
            # Deleting the connector under a running reset would pull it from under the step
            # machine (and a failed reset keeps it locked for its restore): the deletion waits,
            # retried by kopf, until the reset ends or its OffsetReset object is deleted.
            raise NotReadyYet(
                f"connector {connector} is held by {_holder_text(lock.holder, obj.namespace)}; it is deleted "
                "from Kafka Connect when that reset ends (or when its OffsetReset is deleted)"
            )
        heir = await self._heir(obj, connector, cluster, heirs)
        if heir is not None:
            # a rename takes it over: deleting it here would lose the offsets it is to carry
            await self._kube.annotate(obj.namespace, "connectors", heir, {on_create_plan.HANDED_OVER: connector})
            emit(
                "Normal",
                "HandedOver",
                f"connector {connector} left in Kafka Connect for Connector {heir}, which renames it "
                "(spec.offsets.from) and deletes it once its offsets are carried over",
            )
            return
        deleted = await cluster.client.delete(connector)
        if deleted:
            emit("Normal", "Deleted", f"connector {connector} deleted from Kafka Connect")
        await self._abandoned_rename(obj, cluster, emit)

    @staticmethod
    async def _abandoned_rename(obj: ConnectorObject, cluster: ClusterHandle, emit: EmitEvent) -> None:
        """A rename deleted before it finished leaves the old connector (stopped by it, its
        offsets untouched) with no object managing it: never silently."""
        marker = obj.status.offsets_on_create
        if marker is None or marker.on_create != on_create_plan.RENAME or marker.state == OnCreateState.APPLIED:
            return
        old = marker.renamed_from
        state = await cluster.client.get_status(old) if old else None
        if old and state is not None:
            emit(
                "Warning",
                "RenameAbandoned",
                f"the rename from {old} did not finish: connector {old} is left {state.state} in Kafka Connect with "
                "its offsets untouched, and no Connector object manages it",
            )

    async def _heir(
        self, obj: ConnectorObject, connector: str, cluster: ClusterHandle, candidates: Sequence[Claim]
    ) -> str | None:
        """The Connector object of this namespace that renames this one's connector
        (spec.offsets.from) on the same Kafka cluster and has not created its own yet, if any.
        ``candidates`` come from the index (never a LIST of the namespace: deleting N Connectors
        would read N objects N times); each is read afresh, since the index may trail."""
        heirs = []
        for candidate in candidates:
            if candidate.uid == obj.uid or candidate.namespace != obj.namespace:
                continue
            try:
                other = await self._kube.custom_object(obj.namespace, "connectors", candidate.name)
            except KubeObjectMissing:
                continue
            meta = other.get("metadata") or {}
            if meta.get("uid") != candidate.uid or meta.get("deletionTimestamp"):
                continue
            spec = other.get("spec") or {}
            if on_create_plan.renamed_from(spec) != connector:
                continue
            state = ((other.get("status") or {}).get("offsetsOnCreate") or {}).get("state")
            if state == OnCreateState.APPLIED:
                continue  # that rename is over: this is a namesake
            claim = claim_of(obj.namespace, str(meta.get("name")), str(meta.get("uid")), "", spec)
            if claim is not None:
                heirs.append(claim)
        ttl = self._settings.capabilities_ttl_seconds
        for claim in heirs:
            if await self._clusters.same_kafka_cluster(cluster, [claim], ttl):
                return claim.name
        return None


def _storable(stored: Mapping[str, Any], status: ConnectorStatus, conditions: Conditions) -> dict[str, Any]:
    """The status patch, shed of its largest fields when the status it leaves would be over the
    bound: what remains, its conditions above all, is then stored and says what was left out."""
    size = status_bounds.size_of({**stored, **status.patch()})
    if size <= STATUS_MAX_BYTES:
        if conditions.get("StatusComplete") is not None:
            conditions.set("StatusComplete", True, "Fits", "the whole status is stored")
            status.conditions = conditions.items
        return status.patch()
    conditions.set(
        "StatusComplete",
        False,
        "StatusTooLarge",
        f"the status would be {size} bytes, over the {STATUS_MAX_BYTES}-byte bound: its largest fields are "
        "left out (those that are null)",
        event_on_change=True,
        warning=True,
    )
    status.conditions = conditions.items
    patch = status.patch()
    shed, _ = status_bounds.shed({**stored, **patch}, STATUS_MAX_BYTES)
    return {k: v for k, v in shed.items() if k in patch or v is None}


def _reconcile_paused(obj: ConnectorObject, conditions: Conditions) -> bool:
    """The reconcile-paused annotation: set, nothing is changed; removed, say so once."""
    if reconcile_paused(obj.annotations):
        conditions.set(
            "ReconcilePaused",
            True,
            "AnnotationSet",
            f"{RECONCILE}: paused: nothing is changed in Kafka Connect until the annotation is removed",
            event_on_change=True,
        )
        return True
    if conditions.get("ReconcilePaused") is not None:
        conditions.set("ReconcilePaused", False, "AnnotationRemoved", "reconciling", event_on_change=True)
    return False


def _book(book: AutoRestartStatus) -> RestartBook:
    """The restart bookkeeping as stored, as the planner takes it."""
    return RestartBook(count=book.count, last_restart_at=epoch_of(book.last_restart_time))


def _settle_until(spec: ConnectorSpec, plan: ConnectorPlan, book: AutoRestartStatus) -> float | None:
    """After an automatic restart, the wait for the connector to settle ends before the next
    restart falls due: the look that restart needs is the next reconcile (None: no restart)."""
    if not any(isinstance(a, RestartFailed) for a in plan.actions):
        return None
    return restart_due_at(spec, _book(book), time.time()) - RESTART_LOOK_AHEAD_SECONDS


def _plan_held(plan: ConnectorPlan, conditions: Conditions) -> bool:
    """The plan cannot be carried out now: the worker cannot do what the spec asks, or a reset
    holds the connector. The conditions say which."""
    if plan.unsupported:
        conditions.set("Valid", False, "Unsupported", plan.unsupported, event_on_change=True, warning=True)
        conditions.set("Ready", False, "Unsupported", plan.unsupported)
        return True
    if plan.blocked_reason:
        conditions.set(
            "Synced",
            False,
            "OffsetResetInProgress",
            f"{plan.blocked_reason} holds this connector; changes wait until it finishes",
            event_on_change=True,
        )
        conditions.set("Ready", False, "OffsetResetInProgress", f"offset reset {plan.blocked_reason} in progress")
        return True
    return False


def _holder_text(holder: str, viewer: str) -> str:
    """``connectops.io/offsetreset/<ns>/<name>/<uid>`` -> ``OffsetReset <ns>/<name>``, as shown in
    namespace ``viewer``: another tenant's reset is not named (locks are shared across namespaces)."""
    parsed = parse_holder(holder)
    if parsed is None:
        return "another holder"
    namespace, name, _ = parsed
    return f"OffsetReset {namespace}/{name}" if namespace == viewer else "an OffsetReset in another namespace"


async def _starting(handle: ClusterHandle | None, exc: ConnectError) -> str | None:
    """The worker's message when an unavailable worker says it is starting, else None."""
    if handle is None or not isinstance(exc, ConnectUnavailable):
        return None
    try:
        health = await handle.client.health()
    except ConnectError:
        return None
    return (health.message or "GET /health: starting") if health.status == "starting" else None


def _reason(exc: ConnectError) -> str:
    """A reason that says what to fix: the URL's target, the answer's size or the credentials are
    the user's to change; everything else is Connect being unavailable or refusing."""
    if isinstance(exc, NotKafkaConnect | ConnectResponseTooLarge | ConnectAuthFailed | ConnectAddressRefused):
        return exc.reason
    return "ConnectUnavailable" if exc.retryable else "ConnectError"


def _newer_check(stored: LastCheck | None, remembered: LastCheck | None) -> LastCheck | None:
    """The later-launched of the stored check and the one this process remembers (the stored one
    when they are the same application: it may carry a state read by another process)."""
    if remembered is None or (stored is not None and stored.application == remembered.application):
        return stored
    if stored is None:
        return remembered
    mine, theirs = epoch_of(remembered.started_at), epoch_of(stored.started_at)
    return remembered if mine is not None and (theirs is None or mine >= theirs) else stored


def _previous_verdict(last: LastCheck | None) -> str | None:
    """The verdict ConfigMap of the last completed check: the "before" of the next one."""
    if last is not None and last.state == "COMPLETED":
        return last.verdict_config_map or verdict_config_map(last.application)
    return None


def _stored_status(stored: Any) -> ConnectorStatus:
    """The status as stored; what this version cannot read is rewritten by this reconcile."""
    return ConnectorStatus.salvage(stored if isinstance(stored, Mapping) else None)
