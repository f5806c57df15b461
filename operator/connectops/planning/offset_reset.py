"""Pure planning for an OffsetReset: which connectors, which strategy, which steps, and whether
the requested offsets make sense for each connector kind. No I/O.

The step order is fixed and the heart of the product's safety:
``lock -> inspect -> stop -> backup -> reset -> offsetSyncs -> resume -> verify -> unlock``.
A reset never runs while a connector runs (tombstones or REST writes would be overwritten at
its next offset commit), and nothing is changed before a backup exists. The backup comes after
the stop because Connect commits a connector's offsets every ``offset.flush.interval.ms`` (60 s
by default) and once more as each task stops: only once the connector is STOPPED with no tasks
do its offsets stop moving, so only then does a read describe "before" (the backup, the plan's
current offsets, the partitions the read-back expects untouched). The stop changes no offsets
(it makes the connector commit the position it reached), and the backup's ConfigMap is written
before the first offsets call. Whatever can be refused without the offsets (the plan, the
request's shape, a restore's backup) is refused at inspect, before the stop.

Why ~550 lines in one module: the plan, the validation of entries per connector kind, MM2's
offset-syncs rules and the expected-after arithmetic the read-back compares with are one set of
decisions about the same offsets; the tests in tests/unit/test_planning_offset_reset.py read
them as one table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from connectops.models.connect_cluster import Capabilities
from connectops.models.offset_reset import (
    SINK_ONLY_ACTIONS,
    MirrorMaker2,
    OffsetEntry,
    OffsetResetSpec,
    OffsetsTopicLocation,
    OffsetSyncsCleanup,
    ResetAction,
    ResetStrategy,
    ResumePolicy,
    StepState,
)
from connectops_rules import connect
from connectops_rules.mm2 import SINK_TYPE, Mm2Role, mm2_role, partition_role


class ConnectorKind(StrEnum):
    SOURCE = "source"
    SINK = "sink"
    MIRROR_SOURCE = "mirror-source"
    MIRROR_CHECKPOINT = "mirror-checkpoint"
    MIRROR_HEARTBEAT = "mirror-heartbeat"


MIRROR_KINDS = frozenset({ConnectorKind.MIRROR_SOURCE, ConnectorKind.MIRROR_CHECKPOINT, ConnectorKind.MIRROR_HEARTBEAT})
#: MirrorMaker 2's roles (connectops_rules.mm2, the rule the check job applies too) as reset kinds
_MM2_KINDS = {
    Mm2Role.SOURCE: ConnectorKind.MIRROR_SOURCE,
    Mm2Role.CHECKPOINT: ConnectorKind.MIRROR_CHECKPOINT,
    Mm2Role.HEARTBEAT: ConnectorKind.MIRROR_HEARTBEAT,
}


class Step(StrEnum):
    """The steps, in the order they run (a status written by an operator that ran the backup
    before the stop is run in this order too: :func:`backup_predates_stop`)."""

    LOCK = "lock"
    INSPECT = "inspect"
    STOP = "stop"
    BACKUP = "backup"
    RESET = "reset"
    OFFSET_SYNCS = "offsetSyncs"
    RESUME = "resume"
    VERIFY = "verify"
    UNLOCK = "unlock"


ALL_STEPS: tuple[Step, ...] = tuple(Step)
#: steps after which the connector may be stopped by us: a failure from here on must either
#: resume it or say loudly why it stays stopped
STOPPED_STEPS = frozenset({Step.STOP, Step.BACKUP, Step.RESET, Step.OFFSET_SYNCS})
#: Connect's default offset.flush.interval.ms: how far a running connector's committed offsets
#: may trail its position when the ConnectCluster does not say
DEFAULT_FLUSH_INTERVAL_MS = 60_000


def step_rank(name: str) -> int:
    """Where a step of that name runs (unknown names last): the order a stored step list is
    shown in, whatever order the operator that wrote it used."""
    order = [str(s) for s in ALL_STEPS]
    return order.index(name) if name in order else len(order)


def backup_predates_stop(states: Mapping[str, str], *, backup_read_after_stop: bool, changed: bool) -> bool:
    """Whether a stored backup was taken before the connector stopped (by an operator version
    that backed up first) and can still be taken again, after the stop, before anything changes.

    ``states``: step name -> state as stored; ``backup_read_after_stop``: the stored backup says
    it was read after the stop; ``changed``: an offsets call was made (its backup then stays the
    one there is: offsets read now would no longer be "before")."""
    if states.get(str(Step.BACKUP)) != StepState.DONE or backup_read_after_stop or changed:
        return False
    return states.get(str(Step.RESET)) in (None, StepState.PENDING, StepState.RUNNING)


def dry_run_caveat(flush_interval_ms: int) -> str:
    """What a dry run's figures mean: it does not stop the connector, which commits its offsets
    every flush interval (and at its stop), so they may trail its position by up to that long."""
    interval = _seconds(flush_interval_ms)
    return (
        "its offsets are as the connector last committed them: the connector keeps running, so they "
        f"may trail its position by up to the flush interval (offset.flush.interval.ms, {interval}); "
        "a reset reads them after stopping the connector"
    )


def _seconds(ms: int) -> str:
    return f"{ms // 1000} s" if ms % 1000 == 0 else f"{ms / 1000:g} s"


class PlanError(ValueError):
    """The request cannot be carried out as asked (wrong kind, unsupported worker, bad offsets)."""


def connector_kind(
    connector_class: str, rest_type: str | None, stored: Sequence[Mapping[str, Any]] | None = None
) -> ConnectorKind:
    """Kind from the class, else from the ``stored`` offsets' shape when given (MM2 connectors
    are sources to Connect, but reset differently): ``connectops_rules.mm2.mm2_role``.

    In a ``mirrorMaker2`` reset the spec names each connector's role, which wins over this guess
    (MM2 forks and wrappers use other class names)."""
    role = mm2_role(connector_class, rest_type, stored)
    if role is not None:
        return _MM2_KINDS[role]
    return ConnectorKind.SINK if rest_type == SINK_TYPE else ConnectorKind.SOURCE


def mirror_roles(spec: OffsetResetSpec) -> dict[str, ConnectorKind]:
    """connector name -> kind, as the spec's mirrorMaker2 block declares them."""
    mm2 = spec.mirror_maker2
    if mm2 is None:
        return {}
    roles = {mm2.source_connector: ConnectorKind.MIRROR_SOURCE}
    if mm2.checkpoint_connector:
        roles[mm2.checkpoint_connector] = ConnectorKind.MIRROR_CHECKPOINT
    if mm2.heartbeat_connector:
        roles[mm2.heartbeat_connector] = ConnectorKind.MIRROR_HEARTBEAT
    return roles


def sink_group(connector: str, config: Mapping[str, str]) -> str:
    """Connect's sink consumer group: ``connect-<name>`` unless overridden (connectops_rules.connect)."""
    return connect.sink_group(connector, config)


def offset_syncs_topic(
    source_alias: str,
    target_alias: str,
    location: OffsetsTopicLocation,
    separator: str = ".",
    internal_separator_enabled: bool = True,
) -> str:
    """MM2's offset-syncs topic name (DefaultReplicationPolicy.offsetSyncsTopic).

    The alias is the *other* cluster's: TARGET alias when the topic lives on the source cluster
    (KIP-716 default), SOURCE alias when it lives on the target. With the internal-topic
    separator disabled, internal topics keep the default ".".
    """
    sep = separator if internal_separator_enabled else "."
    alias = target_alias if location is OffsetsTopicLocation.SOURCE else source_alias
    return f"mm2-offset-syncs{sep}{alias}{sep}internal"


# -- validation of requested offsets --------------------------------------------------------------


def _is_nonneg_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def entry_kind(entry: OffsetEntry) -> ConnectorKind | None:
    """Which MM2 connector a partition map belongs to, by its keys (None: not an MM2 shape)."""
    role = partition_role(entry.partition)
    return None if role is None else _MM2_KINDS[role]


def validate_entries(kind: ConnectorKind, entries: Sequence[OffsetEntry]) -> list[str]:
    """Problems with ``entries`` for a connector of ``kind`` (empty list: fine).

    Mirrors what Connect and MM2 would reject, so a bad request fails in planning, before any
    connector is stopped.
    """
    problems: list[str] = []
    for i, entry in enumerate(entries):
        p, o = entry.partition, entry.offset
        where = f"offsets[{i}]"
        if kind is ConnectorKind.SINK:
            if not isinstance(p.get("kafka_topic"), str) or not _is_nonneg_int(p.get("kafka_partition")):
                problems.append(f"{where}: a sink partition is {{kafka_topic: str, kafka_partition: int}}")
            if o is not None and (set(o) != {"kafka_offset"} or not _is_nonneg_int(o["kafka_offset"])):
                problems.append(f"{where}: a sink offset is {{kafka_offset: int >= 0}} or null")
        elif kind is ConnectorKind.MIRROR_SOURCE:
            if entry_kind(entry) is not ConnectorKind.MIRROR_SOURCE or not _is_nonneg_int(p.get("partition")):
                problems.append(f"{where}: a MirrorSource partition is {{cluster, topic, partition: int}}")
            if o is not None and (set(o) != {"offset"} or not _is_nonneg_int(o["offset"])):
                problems.append(f"{where}: a MirrorSource offset is {{offset: int >= 0}} or null")
        elif kind in (ConnectorKind.MIRROR_CHECKPOINT, ConnectorKind.MIRROR_HEARTBEAT):
            if entry_kind(entry) is not kind:
                problems.append(f"{where}: partition keys do not match a {kind} connector")
            if o is not None and o != {"offset": 0}:
                problems.append(f"{where}: {kind} offsets may only be reset (null) or set to {{offset: 0}}")
        elif not p:
            problems.append(f"{where}: empty partition map")
    return problems


def duplicate_partitions(entries: Sequence[OffsetEntry]) -> list[str]:
    """Partitions named more than once (their maps, in JSON, the first few): Connect applies
    one of them and drops the others silently, so which offset wins would be an accident."""
    seen: set[str] = set()
    twice: list[str] = []
    for entry in entries:
        key = json.dumps(entry.partition, sort_keys=True, separators=(",", ":"))
        if key in seen and key not in twice:
            twice.append(key)
        seen.add(key)
    return twice


# -- the plan -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetConnector:
    name: str
    kind: ConnectorKind
    state: str
    """Connect's state when inspected (RUNNING, PAUSED, STOPPED, FAILED…)."""
    config: Mapping[str, str]
    managed_state: str | None = None
    """The Connector object's spec.state, when the connector is managed by one."""
    offsets_external: bool = False
    """The Connector object declares that the connector keeps its position outside Kafka too."""


@dataclass(frozen=True)
class MirrorFlow:
    """Another MirrorSourceConnector on the worker that uses the same offset-syncs topic."""

    connector: str
    managed_by: str | None = None
    """The Connector object managing it in the reset's own namespace (other namespaces' are not named)."""


@dataclass
class ResetPlan:
    strategy: ResetStrategy
    connectors: list[TargetConnector]
    steps: list[Step]
    resume_to: dict[str, str]
    """connector -> running | paused | stopped after the reset."""
    entries: dict[str, list[OffsetEntry]] = field(default_factory=dict)
    """alter: connector -> its entries (MM2 entries are routed by partition shape)."""
    offset_syncs_topic: str | None = None
    offset_syncs_cleanup: OffsetSyncsCleanup = OffsetSyncsCleanup.NONE
    offset_syncs_on: str | None = None
    """'source' or 'target': which cluster holds the offset-syncs topic."""
    other_flows: list[MirrorFlow] = field(default_factory=list)
    """Flows the reset does not name that share the offset-syncs topic."""
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            **({"warnings": list(self.warnings)} if self.warnings else {}),
            "strategy": str(self.strategy),
            "steps": [str(s) for s in self.steps],
            "connectors": [
                {"name": c.name, "kind": str(c.kind), "state": c.state, "resumeTo": self.resume_to[c.name]}
                for c in self.connectors
            ],
            **(
                {
                    "offsetSyncsTopic": self.offset_syncs_topic,
                    "offsetSyncsCleanup": str(self.offset_syncs_cleanup),
                    "offsetSyncsCluster": self.offset_syncs_on,
                    "offsetSyncsOtherFlows": _describe_flows(self.other_flows),
                }
                if self.offset_syncs_topic
                else {}
            ),
        }


_STATE_NAMES = {"RUNNING": "running", "PAUSED": "paused", "STOPPED": "stopped"}


def resume_state(policy: ResumePolicy, target: TargetConnector) -> str:
    """The state a connector returns to; ``desired`` follows its Connector object, else the state
    it had before the reset (a FAILED or unassigned connector goes back to running)."""
    if policy is not ResumePolicy.DESIRED:
        return str(policy)
    if target.managed_state:
        return target.managed_state
    return _STATE_NAMES.get(target.state, "running")


def resolve_strategy(requested: ResetStrategy, caps: Capabilities, has_kafka_access: bool) -> ResetStrategy:
    if not caps.stop:
        raise PlanError(
            "the worker is older than Kafka 3.5 and cannot stop a connector (KIP-875); a reset "
            "written while a connector runs is overwritten, so connectops refuses it"
        )
    if requested is ResetStrategy.REST and not caps.alter_offsets:
        raise PlanError("strategy rest needs offsets PATCH/DELETE (Kafka Connect 3.6+)")
    if requested is ResetStrategy.AUTO:
        requested = ResetStrategy.REST if caps.alter_offsets else ResetStrategy.TOMBSTONE
    if requested is ResetStrategy.TOMBSTONE and not has_kafka_access:
        raise PlanError("strategy tombstone needs spec.kafka on the ConnectCluster")
    return requested


def plan_reset(
    spec: OffsetResetSpec,
    connectors: Sequence[TargetConnector],
    caps: Capabilities,
    *,
    has_kafka_access: bool,
    other_flows: Sequence[MirrorFlow] = (),
) -> ResetPlan:
    """Validate the request against what was inspected and lay out the steps.

    ``other_flows``: MirrorSourceConnectors on the worker, not part of this reset, whose
    offset-syncs topic is the one this reset would clean up (see :func:`mirror_source_syncs`)."""
    strategy = resolve_strategy(ResetStrategy(spec.strategy), caps, has_kafka_access)
    action = ResetAction(spec.action)
    entries: dict[str, list[OffsetEntry]] = {}
    for target in connectors:
        if action in SINK_ONLY_ACTIONS and target.kind is not ConnectorKind.SINK:
            raise PlanError(f"action {action} applies to sink connectors; {target.name} is a {target.kind}")
    warnings = _external_offsets_warnings(spec, connectors)
    if action is ResetAction.ALTER:
        if twice := duplicate_partitions(spec.offsets):
            shown = ", ".join(twice[:3]) + (f" and {len(twice) - 3} more" if len(twice) > 3 else "")
            raise PlanError(
                f"{len(twice)} partition(s) named more than once in the alter: {shown}; nothing was changed"
            )
        entries = _route_entries(spec.offsets, connectors)
        for target in connectors:
            problems = validate_entries(target.kind, entries.get(target.name, []))
            if problems:
                raise PlanError(f"{target.name}: " + "; ".join(problems))
        warnings += _foreign_alias_warnings(entries, connectors)
        if strategy is ResetStrategy.TOMBSTONE:
            for target in connectors:
                if target.kind is ConnectorKind.SINK and any(e.offset is None for e in entries.get(target.name, [])):
                    raise PlanError(
                        "with strategy tombstone a sink's single partition offset cannot be "
                        "removed (the admin API alters group offsets; it has no per-partition "
                        "delete); use strategy rest or set an explicit offset"
                    )
    steps = list(ALL_STEPS)
    mm2 = spec.mirror_maker2
    syncs_topic = None
    cleanup = OffsetSyncsCleanup.KEEP
    syncs_on = None
    flows: list[MirrorFlow] = []
    requested = OffsetSyncsCleanup(mm2.offset_syncs) if mm2 is not None else OffsetSyncsCleanup.KEEP
    if (
        mm2 is not None
        and requested not in (OffsetSyncsCleanup.KEEP, OffsetSyncsCleanup.NONE)
        and action in (ResetAction.RESET, ResetAction.ALTER, ResetAction.RESTORE)
    ):
        location = OffsetsTopicLocation(mm2.offset_syncs_topic_location)
        syncs_topic = offset_syncs_topic(
            mm2.source_alias,
            mm2.target_alias,
            location,
            mm2.separator,
            mm2.internal_topic_separator_enabled,
        )
        _check_syncs_topic(mm2, syncs_topic, connectors)
        flows = list(other_flows)
        cleanup = _syncs_cleanup(requested, syncs_topic, flows)
        syncs_on = str(location)
    else:
        steps.remove(Step.OFFSET_SYNCS)
    policy = ResumePolicy(spec.resume)
    return ResetPlan(
        strategy=strategy,
        connectors=list(connectors),
        steps=steps,
        resume_to={c.name: resume_state(policy, c) for c in connectors},
        entries=entries,
        offset_syncs_topic=syncs_topic,
        offset_syncs_cleanup=cleanup,
        offset_syncs_on=syncs_on,
        other_flows=flows,
        warnings=warnings,
    )


def _external_offsets_warnings(spec: OffsetResetSpec, connectors: Sequence[TargetConnector]) -> list[str]:
    """A connector that keeps its position outside Kafka too is reset only when the user says they
    know (Connect changes its own copy; the connector may then resume from the other one)."""
    external = [t.name for t in connectors if t.offsets_external]
    if not external:
        return []
    text = (
        f"{', '.join(external)} declares offsetsManagedExternally: this reset changes only the offsets "
        "Kafka Connect manages; the position the connector keeps elsewhere must be changed by hand"
    )
    if not spec.acknowledge_external_offsets and not spec.dry_run:
        raise PlanError(f"{text}. Set acknowledgeExternalOffsets: true to reset it anyway")
    return [text]


def _syncs_cleanup(requested: OffsetSyncsCleanup, topic: str, flows: Sequence[MirrorFlow]) -> OffsetSyncsCleanup:
    if requested is not OffsetSyncsCleanup.AUTO:
        return requested
    if not flows:
        return OffsetSyncsCleanup.DELETE
    raise PlanError(
        f"the offset-syncs topic {topic} is also used by {len(flows)} other MirrorSourceConnector flow(s) "
        f"on this worker ({_describe_flows(flows)}): deleting it restarts their offset translation, keeping "
        "it leaves syncs from before the reset, which MM2's checkpoint task may translate with until new "
        "ones arrive. Choose explicitly: "
        "mirrorMaker2.offsetSyncs: delete (accepting the impact on those flows) or keep (accepting stale syncs)"
    )


def _describe_flows(flows: Sequence[MirrorFlow]) -> str:
    if not flows:
        return "none"
    named = sorted(f"{f.connector} (Connector {f.managed_by})" for f in flows if f.managed_by)
    unnamed = len(flows) - len(named)
    parts = named + ([f"{unnamed} not managed in this namespace"] if unnamed else [])
    return ", ".join(parts)


#: MirrorConnectorConfig's defaults (connect-mirror), used when a connector's config omits them
_MM2_DEFAULTS = {
    "source.cluster.alias": "source",
    "target.cluster.alias": "target",
    "offset-syncs.topic.location": "source",
    "replication.policy.separator": ".",
    "replication.policy.internal.topic.separator.enabled": "true",
}


def mirror_source_syncs(config: Mapping[str, str]) -> tuple[str, frozenset[str]]:
    """The offset-syncs topic a MirrorSourceConnector with ``config`` writes, and the bootstrap
    servers of the cluster holding it (empty when the config does not say)."""

    def get(key: str) -> str:
        return str(config.get(key) or _MM2_DEFAULTS[key])

    location = OffsetsTopicLocation(get("offset-syncs.topic.location").lower())
    topic = offset_syncs_topic(
        get("source.cluster.alias"),
        get("target.cluster.alias"),
        location,
        get("replication.policy.separator"),
        get("replication.policy.internal.topic.separator.enabled").lower() != "false",
    )
    return topic, _servers(config.get(f"{location}.cluster.bootstrap.servers", ""))


def _servers(text: str) -> frozenset[str]:
    return frozenset(s.strip().lower() for s in text.split(",") if s.strip())


def shares_syncs_topic(config: Mapping[str, str], topic: str, bootstrap: str) -> bool:
    """Whether a MirrorSourceConnector with ``config`` uses ``topic`` on the cluster at
    ``bootstrap``. Unknown bootstraps count as the same cluster: a false "shared" only asks the
    user to choose; a false "not shared" would delete another flow's syncs."""
    their_topic, their_servers = mirror_source_syncs(config)
    ours = _servers(bootstrap)
    return their_topic == topic and (not ours or not their_servers or bool(ours & their_servers))


def _route_entries(
    entries: Sequence[OffsetEntry], connectors: Sequence[TargetConnector]
) -> dict[str, list[OffsetEntry]]:
    """One connector: all entries are its own. MM2: each entry goes to the connector whose kind
    its partition shape belongs to; an entry that fits none of them is an error."""
    if len(connectors) == 1:
        return {connectors[0].name: list(entries)}
    by_kind = {c.kind: c.name for c in connectors}
    routed: dict[str, list[OffsetEntry]] = {}
    for i, entry in enumerate(entries):
        kind = entry_kind(entry)
        if kind is None or kind not in by_kind:
            raise PlanError(
                f"offsets[{i}]: partition {sorted(entry.partition)} matches none of {sorted(str(k) for k in by_kind)}"
            )
        routed.setdefault(by_kind[kind], []).append(entry)
    return routed


def expected_after(
    action: ResetAction, requested: Sequence[Mapping[str, Any]], before: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Every partition offset the connector should report after the reset (for read-back).

    ``requested`` and ``before`` are KIP-875 entries ({partition, offset}); a null offset removes
    its partition. The result describes the whole connector, not only what was asked: reset ->
    nothing; restore -> exactly ``requested`` (the backup); alter and the set-to actions ->
    ``before`` with ``requested`` applied, so a partition that was not named must keep its offset.
    """
    if action is ResetAction.RESET:
        return []
    result: dict[str, dict[str, Any]] = {}
    if action is not ResetAction.RESTORE:
        result = {_key(e["partition"]): dict(e) for e in before if e.get("offset") is not None}
    for entry in requested:
        if entry.get("offset") is None:
            result.pop(_key(entry["partition"]), None)
        else:
            result[_key(entry["partition"])] = {"partition": entry["partition"], "offset": entry["offset"]}
    return sorted(result.values(), key=lambda e: _key(e["partition"]))


def restore_call(
    saved: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    """The one REST call that brings a connector from ``current`` back to ``saved``:
    ``("patch", entries)`` (see :func:`restore_entries`), ``("delete", [])`` when the backup holds
    no offsets and the connector holds some (Connect refuses a PATCH without offsets; restoring
    "nothing" is clearing every partition), or ``("none", [])`` when there is nothing to change."""
    kept = [e for e in saved if e.get("offset") is not None]
    if not kept:
        held = [e for e in current if e.get("offset") is not None]
        return ("delete", []) if held else ("none", [])
    return "patch", restore_entries(kept, current)


def restore_entries(saved: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One PATCH that brings a connector from ``current`` back to ``saved``: the saved offsets,
    and null for every partition that has an offset now but had none then. One call instead of
    DELETE-then-PATCH, so there is no moment where the connector has no offsets at all."""
    kept = [{"partition": e["partition"], "offset": e["offset"]} for e in saved if e.get("offset") is not None]
    known = {_key(e["partition"]) for e in kept}
    cleared = [
        {"partition": e["partition"], "offset": None}
        for e in current
        if e.get("offset") is not None and _key(e["partition"]) not in known
    ]
    return kept + cleared


def untouched(entries: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The partitions of ``current`` that ``entries`` do not name: what the reset must leave alone."""
    named = {_key(e["partition"]) for e in entries}
    return [dict(e) for e in current if _key(e["partition"]) not in named]


def _key(partition: Mapping[str, Any]) -> str:
    return repr(sorted(partition.items()))


def diff_offsets(expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]) -> list[str]:
    """Human-readable differences between two KIP-875 offset lists (empty: equal)."""
    exp = {_key(e["partition"]): e.get("offset") for e in expected}
    act = {_key(e["partition"]): e.get("offset") for e in actual}
    problems = []
    for key in sorted(set(exp) | set(act)):
        if exp.get(key) != act.get(key):
            problems.append(f"{key}: expected {exp.get(key)}, found {act.get(key)}")
    return problems


def _foreign_alias_warnings(
    entries: Mapping[str, Sequence[OffsetEntry]], connectors: Sequence[TargetConnector]
) -> list[str]:
    """MirrorSourceTask loads only the offsets stored under its own ``source.cluster.alias``: an
    entry under another alias is stored (and listed by GET /offsets) but never used. That is how
    offsets are seeded before an alias change, so it is said, not refused."""
    out = []
    for target in connectors:
        if target.kind is not ConnectorKind.MIRROR_SOURCE:
            continue
        alias = str(target.config.get("source.cluster.alias") or _MM2_DEFAULTS["source.cluster.alias"])
        given = {str(e.partition.get("cluster")) for e in entries.get(target.name, []) if e.offset is not None}
        foreign = sorted(given - {alias})
        if foreign:
            out.append(
                f"{target.name} replicates under source.cluster.alias {alias}: its tasks ignore the offsets "
                f"set under {', '.join(foreign)} (stored, and used only once the connector's alias is that one)"
            )
    return out


def _check_syncs_topic(spec: MirrorMaker2, topic: str, connectors: Sequence[TargetConnector]) -> None:
    """The spec's aliases, location and separator name the topic to clean up; the
    MirrorSourceConnector's own config names the one MM2 writes. When they contradict each other
    the reset would delete (or truncate) another flow's topic, or none, and leave this flow's
    stale. Only what the config states is compared (a key it leaves out is taken as the spec says)."""
    stated = {
        "source.cluster.alias": spec.source_alias,
        "target.cluster.alias": spec.target_alias,
        "offset-syncs.topic.location": str(spec.offset_syncs_topic_location),
        "replication.policy.separator": spec.separator,
        "replication.policy.internal.topic.separator.enabled": str(spec.internal_topic_separator_enabled).lower(),
    }
    for target in connectors:
        if target.kind is not ConnectorKind.MIRROR_SOURCE:
            continue
        config = {**stated, **{k: v for k, v in target.config.items() if k in stated and v}}
        theirs, _ = mirror_source_syncs(config)
        where = config["offset-syncs.topic.location"].lower()
        if theirs != topic or where != str(spec.offset_syncs_topic_location):
            raise PlanError(
                f"mirrorMaker2 names the offset-syncs topic {topic} on the {spec.offset_syncs_topic_location} "
                f"cluster, but {target.name} writes {theirs} on the {where} cluster (by its source.cluster.alias, "
                "target.cluster.alias, offset-syncs.topic.location and replication.policy.separator): make "
                "sourceAlias, targetAlias, offsetSyncsTopicLocation and separator match the connector's config"
            )
