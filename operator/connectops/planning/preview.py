"""``connectops plan``: what applying a set of manifests would do, as a pull-request comment.

Pure: documents in, a plan out (the live answers, when there are any, are gathered by
:mod:`connectops.reconcilers.preview`). The verdicts are the reconcilers' own functions
(``render_config``, ``plan_connector``, ``expected_after``), so the preview cannot drift from what
the operator then does.

Values are shown only where Git already shows them: a changed key's new value from the spec (a
key whose name says it is sensitive, or that comes from a Secret, is masked), never a live value
from Connect (a worker's config may hold a secret a PR comment must not repeat), and removed keys
by name only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import IntEnum
from typing import Any

from pydantic import BaseModel, ValidationError

from connectops.models.base import GROUP
from connectops.models.connect_cluster import ConnectClusterSpec
from connectops.models.connector import ConnectorOffsets, ConnectorSpec, OnCreate
from connectops.models.group_failover import GroupFailoverSpec
from connectops.models.offset_reset import OffsetResetSpec, ResetAction
from connectops.planning.connector import (
    Create,
    RestartFailed,
    SetState,
    UpdateConfig,
    config_drift,
    render_config,
)
from connectops.planning.offset_reset import expected_after
from connectops.planning.on_create import mode, needs_reset

SPECS: dict[str, type[BaseModel]] = {
    "ConnectCluster": ConnectClusterSpec,
    "Connector": ConnectorSpec,
    "OffsetReset": OffsetResetSpec,
    "GroupFailover": GroupFailoverSpec,
}
#: a key whose value is not shown even when it is in the spec as plain text
SENSITIVE = re.compile(r"(password|secret|token|credential|jaas|private|(^|[._])key($|[._]))", re.IGNORECASE)
MASK = "(hidden)"
VALUE_LIMIT = 80


class Exit(IntEnum):
    """``connectops plan``'s exit status, for CI: as ``terraform plan -detailed-exitcode``."""

    NO_CHANGE = 0
    INVALID = 1
    CHANGES = 2


@dataclass
class ObjectPlan:
    kind: str
    namespace: str
    name: str
    #: why applying it would fail (schema, Connect's validation, a missing reference)
    errors: list[str] = field(default_factory=list)
    #: what applying it would change, one sentence each
    changes: list[str] = field(default_factory=list)
    #: facts worth knowing that change nothing (offline limits, what is left alone)
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass
class Document:
    kind: str
    namespace: str
    name: str
    spec: dict[str, Any]


def documents(loaded: Sequence[Any], default_namespace: str) -> tuple[list[Document], list[ObjectPlan]]:
    """The connectops objects among YAML documents; other kinds are skipped, unreadable ones are
    plans with an error."""
    found: list[Document] = []
    bad: list[ObjectPlan] = []
    for index, doc in enumerate(loaded):
        if not isinstance(doc, Mapping):
            continue
        api = str(doc.get("apiVersion") or "")
        if not api.startswith(f"{GROUP}/"):
            continue
        kind = str(doc.get("kind") or "")
        raw_meta = doc.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        name = str(meta.get("name") or "")
        namespace = str(meta.get("namespace") or default_namespace)
        if kind not in SPECS or not name:
            plan = ObjectPlan(kind or "?", namespace, name or f"document {index + 1}")
            plan.errors.append(f"not a known connectops object (kind {kind!r}, name {name!r})")
            bad.append(plan)
            continue
        spec = doc.get("spec")
        found.append(Document(kind, namespace, name, dict(spec) if isinstance(spec, Mapping) else {}))
    return found, bad


def validate(doc: Document) -> tuple[BaseModel | None, ObjectPlan]:
    """The typed spec (None when the schema refuses it) and the plan that says so."""
    plan = ObjectPlan(doc.kind, doc.namespace, doc.name)
    try:
        return SPECS[doc.kind].model_validate(doc.spec), plan
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"]) or "spec"
            plan.errors.append(f"spec.{where}: {error['msg']}")
        return None, plan


def shown(key: str, value: str, secret_keys: frozenset[str]) -> str:
    if key in secret_keys or SENSITIVE.search(key):
        return MASK
    return value if len(value) <= VALUE_LIMIT else value[:VALUE_LIMIT] + "…"


def connector_changes(
    name: str,
    desired: Mapping[str, str],
    live: Mapping[str, str] | None,
    actions: Sequence[Any],
    secret_keys: frozenset[str],
    offsets: ConnectorOffsets | None = None,
) -> list[str]:
    """Sentences for the reconciler's planned actions on one connector (``offsets``: its
    ``spec.offsets``, said when the connector would be created, the only time it applies)."""
    said: list[str] = []
    for action in actions:
        if isinstance(action, Create):
            keys = ", ".join(f"{k}={shown(k, v, secret_keys)}" for k, v in sorted(desired.items()) if k != "name")
            if needs_reset(offsets):
                said.append(f"create connector {name} in state STOPPED: {keys}")
            else:
                state = f" in state {action.initial_state}" if action.initial_state else ""
                said.append(f"create connector {name}{state}: {keys}")
            said.append(offsets_on_create(name, offsets))
        elif isinstance(action, UpdateConfig):
            said.append(f"update the config of {name}; Connect restarts the connector and its tasks:")
            for key in config_drift(desired, live or {}):
                if key not in desired:
                    said.append(f"  - remove {key}")
                elif live is None or key not in live:
                    said.append(f"  - add {key}={shown(key, desired[key], secret_keys)}")
                else:
                    said.append(f"  - change {key} to {shown(key, desired[key], secret_keys)}")
        elif isinstance(action, SetState):
            said.append(f"move {name} from {action.observed or 'new'} to {str(action.target).upper()}")
        elif isinstance(action, RestartFailed):
            said.append(f"restart the failed tasks {list(action.failed_tasks)} of {name} (autoRestart)")
    return said


def offsets_on_create(name: str, offsets: ConnectorOffsets | None) -> str:
    """What ``spec.offsets`` does when the connector is created."""
    how = mode(offsets) if offsets is not None else OnCreate.RESUME.value
    if offsets is None or how == OnCreate.RESUME.value:
        return f"  offsets: any Connect still holds under {name} are resumed (onCreate resume)"
    then = "then it moves to its desired state"
    if offsets.from_ is not None:
        return (
            f"  offsets: carried over from connector {offsets.from_.connector} (stopped first, deleted once they "
            f"are written), through an OffsetReset; {then}"
        )
    if how == OnCreate.CLEAR.value:
        return f"  offsets: any Connect holds under {name} are removed through an OffsetReset; {then}"
    if offsets.entries:
        where = f"the {len(offsets.entries)} partition offsets of spec.offsets.entries"
    elif offsets.set_to is not None:
        at = f" {offsets.timestamp}" if offsets.timestamp else ""
        where = f"{offsets.set_to}{at} on {', '.join(offsets.topics) if offsets.topics else 'the topics it reads'}"
    else:
        where = "spec.offsets"
    return f"  offsets: set to {where} through an OffsetReset; {then}"


def reset_moves(
    action: ResetAction, requested: Sequence[Mapping[str, Any]], before: Sequence[Mapping[str, Any]]
) -> tuple[list[str], int]:
    """The partitions whose offset would change (``before -> after``), and how many stay."""
    after = {_key(e["partition"]): e.get("offset") for e in expected_after(action, requested, before)}
    now = {_key(e["partition"]): e.get("offset") for e in before if e.get("offset") is not None}
    moves = []
    for key in sorted(set(after) | set(now)):
        if after.get(key) != now.get(key):
            old = json.dumps(now[key], sort_keys=True) if key in now else "none"
            new = json.dumps(after[key], sort_keys=True) if key in after else "removed"
            moves.append(f"{key}: {old} -> {new}")
    return moves, sum(1 for k in now if after.get(k) == now[k])


def _key(partition: Mapping[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True)


def offline(doc: Document, spec: BaseModel | None, plan: ObjectPlan) -> ObjectPlan:
    """As far as a plan goes without a cluster: what would be sent, and a reset's explicit moves."""
    if isinstance(spec, ConnectorSpec):
        secret_keys = frozenset(spec.config_from)
        placeholders = dict.fromkeys(secret_keys, "(from Secret)")
        desired = render_config(spec, spec.connector_name or doc.name, placeholders)
        keys = ", ".join(f"{k}={shown(k, v, secret_keys)}" for k, v in sorted(desired.items()) if k != "name")
        plan.notes.append(f"the config Connect would hold: {keys}; desired state {str(spec.state).upper()}")
    elif isinstance(spec, OffsetResetSpec):
        action = ResetAction(spec.action)
        if action is ResetAction.ALTER:
            moves = [
                f"{_key(e.partition)} -> {json.dumps(e.offset, sort_keys=True) if e.offset else 'removed'}"
                for e in spec.offsets
            ]
            plan.notes.append(f"alter: {len(moves)} partition(s) named: " + "; ".join(moves[:20]))
        else:
            plan.notes.append(f"{action}: which partitions move, and where, is read from Connect and the broker")
    elif isinstance(spec, GroupFailoverSpec):
        plan.notes.append(f"{spec.action} of group {spec.group}: its offsets are translated from the clusters")
    plan.notes.append("offline: what it would change in the cluster and in Connect is not known")
    return plan


def exit_status(plans: Sequence[ObjectPlan]) -> Exit:
    if any(p.errors for p in plans):
        return Exit.INVALID
    return Exit.CHANGES if any(p.changes for p in plans) else Exit.NO_CHANGE


def markdown(plans: Sequence[ObjectPlan], *, online: bool) -> str:
    """The plan as a pull-request comment."""
    invalid = sum(1 for p in plans if p.errors)
    changing = sum(1 for p in plans if p.changes and not p.errors)
    mode = "against the live cluster" if online else "offline (schema only: no cluster was asked)"
    lines = [
        "### connectops plan",
        "",
        f"{len(plans)} object(s) {mode}: {changing} would change, {invalid} invalid.",
        "",
    ]
    for plan in plans:
        mark = "invalid" if plan.errors else ("changes" if plan.changes else "no change" if online else "valid")
        lines.append(f"#### {plan.title}: {mark}")
        lines.extend(f"- **error**: {e}" for e in plan.errors)
        for change in plan.changes:
            lines.append(f"  {change[2:]}" if change.startswith("  ") else f"- {change}")
        lines.extend(f"- _{n}_" for n in plan.notes)
        lines.append("")
    return "\n".join(lines)


def as_json(plans: Sequence[ObjectPlan], *, online: bool) -> str:
    return json.dumps(
        {"online": online, "exit": int(exit_status(plans)), "objects": [asdict(p) for p in plans]}, indent=2
    )
