"""Pure planning for a Connector: desired spec + observed Connect state -> the steps to take.

No I/O happens here. The reconciler gathers observations (live config, status, capabilities,
the offset-reset lock, the clock) and executes what :func:`plan_connector` returns, so every
decision — when to PUT, when to resume, when a restart is due — is unit-testable with plain data.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from connectops.models.connect_cluster import Capabilities
from connectops.models.connector import CONNECTOR_VERSION_KEY, OVERRIDE_PREFIXES, ConnectorSpec, DesiredState

#: Connect's states, as in its status endpoint.
RUNNING, PAUSED, STOPPED, FAILED, UNASSIGNED, RESTARTING = (
    "RUNNING",
    "PAUSED",
    "STOPPED",
    "FAILED",
    "UNASSIGNED",
    "RESTARTING",
)

_TARGET = {
    DesiredState.RUNNING: RUNNING,
    DesiredState.PAUSED: PAUSED,
    DesiredState.STOPPED: STOPPED,
}


def parse_version(version: str) -> tuple[int, int, int]:
    """'3.6.1' / '4.3.0-SNAPSHOT' / '7.5.0-ccs' -> (3, 6, 1); unparsable parts count as 0."""
    parts: list[int] = []
    for piece in version.split("-", maxsplit=1)[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


def capabilities_for(version: str) -> Capabilities:
    """REST capabilities by Kafka version (KIP-745 3.0, KIP-875 3.5/3.6, KIP-980 3.7, KIP-891 4.1).

    Confluent Platform reports its own version (7.x = Kafka 3.x); the ``-ccs`` suffix marks it,
    CP 7.x ships Kafka 3.x and CP 8.x Kafka 4.x, minor for minor.
    """
    major, minor, patch = parse_version(version)
    if ("-ccs" in version or "-ce" in version) and major >= 7:
        major -= 4
    v = (major, minor, patch)
    return Capabilities(
        restart_only_failed=v >= (3, 0, 0),
        stop=v >= (3, 5, 0),
        alter_offsets=v >= (3, 6, 0),
        initial_state=v >= (3, 7, 0),
        plugin_versions=v >= (4, 1, 0),
    )


def render_config(spec: ConnectorSpec, name: str, secret_values: Mapping[str, str]) -> dict[str, str]:
    """The exact config map Connect should hold, as strings (Connect stores strings).

    ``secret_values`` maps config keys to values already read from Secrets.
    """
    config: dict[str, str] = {k: _to_str(v) for k, v in spec.config.items()}
    if spec.producer_overrides is not None:
        for key, text in spec.producer_overrides.as_properties().items():
            config[OVERRIDE_PREFIXES["producer"] + key] = text
    for key, raw in spec.consumer_overrides.items():
        config[OVERRIDE_PREFIXES["consumer"] + key] = _to_str(raw)
    for key, raw in spec.admin_overrides.items():
        config[OVERRIDE_PREFIXES["admin"] + key] = _to_str(raw)
    config.update(secret_values)
    if spec.converter_versions is not None:
        config.update(spec.converter_versions.as_properties())
    if spec.plugin_version is not None:
        config[CONNECTOR_VERSION_KEY] = spec.plugin_version
    config["connector.class"] = spec.connector_class
    config["tasks.max"] = str(spec.tasks_max)
    config["name"] = name
    return config


def _to_str(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def config_drift(desired: Mapping[str, str], live: Mapping[str, str]) -> list[str]:
    """Keys whose value differs (added, removed or changed), sorted. Values are never returned:
    they may be secrets, and the list ends up in Events."""
    keys = set(desired) | set(live)
    return sorted(k for k in keys if desired.get(k) != live.get(k))


# -- actions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Create:
    initial_state: str | None
    """Passed to POST /connectors when the worker supports it (3.7+)."""


@dataclass(frozen=True)
class UpdateConfig:
    changed_keys: tuple[str, ...]


@dataclass(frozen=True)
class SetState:
    target: DesiredState
    observed: str | None


@dataclass(frozen=True)
class RestartFailed:
    failed_tasks: tuple[int, ...]
    connector_failed: bool
    use_only_failed: bool
    """True: one POST restart?includeTasks=true&onlyFailed=true (3.0+). False: per-task calls."""


Action = Create | UpdateConfig | SetState | RestartFailed


@dataclass(frozen=True)
class ObservedConnector:
    live_config: Mapping[str, str] | None
    state: str | None
    failed_tasks: tuple[int, ...] = ()
    task_count: int = 0
    connector_failed: bool = False
    #: tasks on their way somewhere (UNASSIGNED, RESTARTING, …): (id, state)
    unsettled_tasks: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class RestartBook:
    count: int = 0
    last_restart_at: float | None = None
    #: when the operator first saw the connector failing, in the unbroken run of looks that saw
    #: it so (:func:`failing_run_start`); None: not seen failing (the first look that sees it
    #: counts as the first sight). The first restart of a count counts its delay from here.
    failing_since: float | None = None


@dataclass
class ConnectorPlan:
    actions: list[Action] = field(default_factory=list)
    needs_validation: bool = False
    drift: list[str] = field(default_factory=list)
    blocked_reason: str | None = None
    restart_limit_reached: bool = False
    unsupported: str | None = None


def restarts_cleared(
    spec: ConnectorSpec, ready: bool, restarts: RestartBook, now: float, ready_since: float | None
) -> bool:
    """Whether the count of automatic restarts starts again from 0: the connector is Ready, has
    been seen Ready without a break since ``ready_since``, and both that and the last restart
    are ``backoff.maxSeconds`` old (as Kubernetes clears a crash-loop backoff after 10 minutes of
    running). A task that fails in ``start()`` shows RUNNING for a moment after each restart;
    clearing the count on that moment restarted it without bound (CI25: 4 and 8 restarts where
    maxRestarts said 2), and so did one look at that moment when the restart was slow to happen
    (CI29, CI30: the moment came more than maxSeconds after the restart on a loaded machine).
    ``ready_since`` is the first of an unbroken run of Ready observations (None: not Ready at
    the last one), so one sight of the moment never clears the count: the next look sees the
    task FAILED."""
    if not ready or restarts.count == 0 or ready_since is None:
        return False
    wait = spec.auto_restart.backoff.max_seconds
    if now - ready_since < wait:
        return False
    return restarts.last_restart_at is None or now - restarts.last_restart_at >= wait


def ready_run_start(ready: bool, since: float | None, now: float) -> float | None:
    """The start of the unbroken run of Ready observations this one belongs to (None: not Ready)."""
    if not ready:
        return None
    return now if since is None else since


def restart_delay(count: int, initial: float, maximum: float) -> float:
    """The wait before the restart that follows ``count`` restarts: initial, 2*initial,
    4*initial … capped at maximum."""
    return float(min(initial * (2 ** min(count, 30)), maximum))


def failing(observed: ObservedConnector) -> bool:
    """The connector or one of its tasks is FAILED: what an automatic restart is for."""
    return observed.connector_failed or bool(observed.failed_tasks)


def failing_run_start(seen_failing: bool, since: float | None, now: float, *, conclusive: bool) -> float | None:
    """The first look of the unbroken run of looks that saw the connector failing, this one
    included (None: it is not failing). ``conclusive``: this look was read just now; one from a
    shared listing may be older than the look that began the run, so it never ends one."""
    if seen_failing:
        return now if since is None else since
    return None if conclusive else since


def restart_due_at(spec: ConnectorSpec, restarts: RestartBook, now: float) -> float:
    """When the next automatic restart falls due: ``initialSeconds`` after the failure was first
    seen, then each next one the doubled delay (capped at ``maxSeconds``) after the one before.
    So ``initialSeconds: 2, maxSeconds: 4`` restarts 2, 4 and 4 s apart; the delay is what the
    field says it is, a wait before the restart, never an immediate first one."""
    backoff = spec.auto_restart.backoff
    delay = restart_delay(restarts.count, backoff.initial_seconds, backoff.max_seconds)
    if restarts.count > 0 and restarts.last_restart_at is not None:
        return restarts.last_restart_at + delay
    return (now if restarts.failing_since is None else restarts.failing_since) + delay


def restart_limit_reached(spec: ConnectorSpec, observed: ObservedConnector, restarts: RestartBook) -> bool:
    """The connector is failing after as many automatic restarts as ``maxRestarts`` allows."""
    auto = spec.auto_restart
    if DesiredState(spec.state) is not DesiredState.RUNNING or not auto.enabled or auto.max_restarts is None:
        return False
    return failing(observed) and restarts.count >= auto.max_restarts


def next_look(spec: ConnectorSpec, observed: ObservedConnector, restarts: RestartBook, now: float) -> float | None:
    """When the operator must look at the connector again, sooner than its resync, for the
    automatic restarts to keep their pace whatever the resync period (None: nothing to keep
    pace with). ``observed`` and ``restarts`` are as the reconcile left them.

    - failing, limit not reached: when the next restart falls due (at once when it is past:
      a restart planned on an earlier look, made due meanwhile);
    - a restart made and the task not failing (yet): when the next one would fall due, so a
      task that fails again in ``start()`` is restarted on time (or, after the last restart
      the limit allows, is said to have reached it on time); past that, while the restart
      is still on its way (not Ready: RESTARTING, UNASSIGNED), every ``initialSeconds``, until
      ``maxSeconds`` after the restart. A Ready connector, or one that never failed, is the
      resync's: a failure it sees is restarted ``initialSeconds`` after it saw it.

    Bounded: each look asks for at most one next look, none once the limit is reached and
    seen, and after the last restart the unsettled looks end within ``maxSeconds``."""
    auto = spec.auto_restart
    if DesiredState(spec.state) is not DesiredState.RUNNING or not auto.enabled:
        return None
    due = restart_due_at(spec, restarts, now)
    if failing(observed):
        # at the limit this look says so (RestartLimitReached): nothing more to look for
        return None if restart_limit_reached(spec, observed, restarts) else due
    if restarts.count == 0 or restarts.last_restart_at is None:
        return None
    if due > now:
        return due
    if readiness(spec, observed).ready or now - restarts.last_restart_at >= auto.backoff.max_seconds:
        return None
    return now + auto.backoff.initial_seconds


def plan_connector(
    spec: ConnectorSpec,
    desired_config: Mapping[str, str],
    observed: ObservedConnector,
    caps: Capabilities,
    *,
    locked_by: str | None,
    restarts: RestartBook,
    now: float,
) -> ConnectorPlan:
    """Decide the steps that move Connect from ``observed`` to ``spec``.

    Rules, in order:
    - a desired state the worker cannot express (``stopped`` before 3.5), or a plugin version
      on a worker that cannot choose one (before 4.1), is refused up front;
    - an in-progress OffsetReset owns the connector: nothing is changed, not even config,
      because a resume or config write would let the connector commit offsets mid-reset;
    - config: create when missing, PUT only when the normalised config differs (both after a
      successful validation);
    - state: pause/resume/stop only when Connect's state differs from the desired one;
    - failures: restart failed connector/tasks with doubling backoff (:func:`restart_due_at`),
      only while running is desired (a paused connector's failed tasks are the user's business).
    """
    plan = ConnectorPlan()
    desired_state = DesiredState(spec.state)
    if desired_state is DesiredState.STOPPED and not caps.stop:
        plan.unsupported = "state 'stopped' needs a Kafka Connect worker 3.5 or newer (KIP-875)"
        return plan
    pins = spec.plugin_version is not None or bool(spec.converter_versions and spec.converter_versions.as_properties())
    if pins and not caps.plugin_versions:
        # an older worker takes the key as an unknown setting and runs whatever version it has
        plan.unsupported = (
            "pluginVersion and converterVersions need a Kafka Connect worker 4.1 or newer (KIP-891); "
            "an older one would ignore them"
        )
        return plan
    if locked_by:
        plan.blocked_reason = locked_by
        return plan

    if observed.live_config is None:
        plan.needs_validation = True
        initial = _TARGET[desired_state] if caps.initial_state else None
        plan.actions.append(Create(initial_state=initial))
        if initial is None and desired_state is not DesiredState.RUNNING:
            plan.actions.append(SetState(desired_state, None))
        plan.drift = ["<missing>"]
        return plan

    plan.drift = config_drift(desired_config, observed.live_config)
    if plan.drift:
        plan.needs_validation = True
        plan.actions.append(UpdateConfig(tuple(plan.drift)))

    target = _TARGET[desired_state]
    state = observed.state
    # FAILED counts as "not the target" only for paused/stopped; for running, a failure is
    # handled by restarts below rather than by a resume that would do nothing.
    transitional = state in (None, UNASSIGNED, RESTARTING)
    failed_while_running = state == FAILED and desired_state is DesiredState.RUNNING
    if state != target and not transitional and not failed_while_running:
        plan.actions.append(SetState(desired_state, state))

    # a restart not due yet is looked at again when it is: next_look, on what the reconcile leaves
    if desired_state is DesiredState.RUNNING and spec.auto_restart.enabled and failing(observed):
        if restart_limit_reached(spec, observed, restarts):
            plan.restart_limit_reached = True
        elif now >= restart_due_at(spec, restarts, now):
            plan.actions.append(
                RestartFailed(
                    failed_tasks=observed.failed_tasks,
                    connector_failed=observed.connector_failed,
                    use_only_failed=caps.restart_only_failed,
                )
            )
    return plan


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str
    message: str


def readiness(spec: ConnectorSpec, observed: ObservedConnector) -> Readiness:
    """Ready means Connect holds the desired config and state, nothing has failed, and a running
    connector's tasks are all RUNNING. A task UNASSIGNED or RESTARTING is on its way to RUNNING
    or to FAILED: counting it Ready cleared the restart count of a task that fails in start()
    (CI29-CI31: on a loaded machine the worker showed it RESTARTING for seconds after each
    automatic restart, the count was cleared, and it was restarted again and again)."""
    target = _TARGET[DesiredState(spec.state)]
    if observed.live_config is None or observed.state is None:
        return Readiness(False, "NotCreated", "connector does not exist in Kafka Connect yet")
    if observed.connector_failed:
        return Readiness(False, "ConnectorFailed", "the connector instance has FAILED")
    if observed.state != target:
        return Readiness(False, "StateMismatch", f"Connect reports {observed.state}, desired {target}")
    if target == RUNNING:
        if observed.failed_tasks:
            ids = ", ".join(str(t) for t in observed.failed_tasks)
            return Readiness(False, "TasksFailed", f"task(s) {ids} FAILED")
        if observed.task_count == 0:
            return Readiness(False, "NoTasks", "running but no task has been started yet")
        if observed.unsettled_tasks:
            shown = ", ".join(f"{i} {state}" for i, state in observed.unsettled_tasks[:10])
            return Readiness(False, "TasksNotRunning", f"task(s) not RUNNING yet: {shown}")
    return Readiness(True, target.capitalize(), f"connector is {target}")


def plugin_missing(connector_class: str, installed: Sequence[str]) -> list[str] | None:
    """None when the worker has the class; else the installed classes, closest match first.

    Connect resolves a class by its full name, its simple name, or its simple name without the
    ``Connector`` suffix (``PluginUtils.prunedName``; aliases only when unambiguous, which a
    missing class does not need to know). A missing class is permanent until the spec or the
    worker's plugins change, so the reconciler reports it instead of retrying it.
    """
    names = set()
    for cls in installed:
        simple = cls.rsplit(".", 1)[-1]
        names.update({cls, simple, simple.removesuffix("Connector")})
    if connector_class in names:
        return None
    by_simple = {cls.rsplit(".", 1)[-1].lower(): cls for cls in installed}
    wanted = connector_class.rsplit(".", 1)[-1].lower()
    close = [by_simple[s] for s in difflib.get_close_matches(wanted, list(by_simple), n=len(by_simple), cutoff=0.0)]
    return close + sorted(set(installed) - set(close))
