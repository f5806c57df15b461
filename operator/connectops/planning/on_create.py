"""Where a new connector starts (``spec.offsets``): the pure part.

``clear`` and ``set`` are carried out by an OffsetReset the Connector reconciler creates, owned
by the Connector, so the connector's first offsets go through the same step machine as any reset
(lock, backup, KIP-875 call, read-back from Connect and Kafka, crash-safe resume). This module
says which OffsetReset that is; it does no I/O.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from connectops.models.base import API_VERSION
from connectops.models.connector import ConnectorOffsets, OnCreate, SetTo
from connectops.models.offset_reset import ResetAction

_SET_TO = {SetTo.EARLIEST: ResetAction.TO_EARLIEST, SetTo.LATEST: ResetAction.TO_LATEST}


def offsets_hash(offsets: ConnectorOffsets | None) -> str:
    """Identifies the ``spec.offsets`` applied, so a later edit can be told apart (and ignored)."""
    text = offsets.model_dump_json(by_alias=True) if offsets is not None else "null"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: ``status.offsetsOnCreate.onCreate`` of a rename (``spec.offsets.from``)
RENAME: Final = "rename"
#: the annotation a deleted Connector object leaves on the one that renames its connector: the
#: proof that a Connector object of this namespace managed it and handed it over
HANDED_OVER: Final = "connectops.io/handed-over"


def needs_reset(offsets: ConnectorOffsets | None) -> bool:
    """Whether creating the connector involves writing its offsets before its first task runs."""
    return offsets is not None and (offsets.from_ is not None or str(offsets.on_create) != OnCreate.RESUME.value)


def renamed_from(spec: Any) -> str | None:
    """The old connector a Connector's raw spec renames (``spec.offsets.from.connector``), read
    without validating the spec: kopf's index and delete handlers see bodies as stored."""
    offsets = spec.get("offsets") if isinstance(spec, dict) else None
    source = offsets.get("from") if isinstance(offsets, dict) else None
    name = source.get("connector") if isinstance(source, dict) else None
    return name if isinstance(name, str) and name else None


def mode(offsets: ConnectorOffsets) -> str:
    """What ``spec.offsets`` does at creation: resume, clear, set or rename."""
    return RENAME if offsets.from_ is not None else str(offsets.on_create)


def rename_blocker(
    old: str, new: str, namespace: str, claims: list[tuple[str, str]], handed_over: str | None
) -> tuple[str, str] | None:
    """Why a rename from connector ``old`` cannot start (now): (reason, message), or None; every
    reconcile asks again. ``claims``: (namespace, object name) of the Connector objects that manage ``old`` on
    the same Kafka cluster; ``handed_over``: this object's hand-over annotation."""
    if old == new:
        return "RenameInvalid", f"spec.offsets.from names this connector itself ({new})"
    for claim_namespace, claim_name in claims:
        if claim_namespace != namespace:
            return (
                "RenameRefused",
                f"connector {old} is managed by a Connector object in another namespace: only a connector managed "
                "in this namespace can be renamed from; nothing was changed",
            )
        return (
            "RenameWaiting",
            f"Connector {claim_name} still manages connector {old}: remove it (its deletion hands {old} over to "
            f"this rename instead of deleting it from Kafka Connect); nothing is created until then",
        )
    if handed_over != old:
        return (
            "RenameRefused",
            f"connector {old} was not handed over by a Connector object of this namespace (deleting one while this "
            "object names it in spec.offsets.from hands it over): only a connector managed here can be renamed "
            "from; nothing was changed",
        )
    return None


def rename_spec(connector_object: str, carried: list[dict[str, Any]], leftover: list[dict[str, Any]]) -> dict[str, Any]:
    """The OffsetReset spec that gives the renamed connector the old one's offsets: ``carried``
    (KIP-875 entries read from the old connector) as they were, and the partitions an earlier
    namesake left under the new name (``leftover``) removed (a null offset). Nothing to carry
    and nothing left: a plain reset, so the connector starts from scratch like the old one."""
    spec: dict[str, Any] = {"connectorRef": {"name": connector_object}, "resume": "desired"}
    carried_keys = {_key(e["partition"]) for e in carried}
    removed = [
        {"partition": e["partition"], "offset": None} for e in leftover if _key(e["partition"]) not in carried_keys
    ]
    entries = [{"partition": e["partition"], "offset": e["offset"]} for e in carried] + removed
    if not entries:
        return {**spec, "action": str(ResetAction.RESET)}
    return {**spec, "action": str(ResetAction.ALTER), "offsets": entries}


def _key(partition: dict[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True)


def reset_name(connector_object: str, uid: str) -> str:
    """One OffsetReset per Connector object (the uid: a re-created namesake gets its own)."""
    return f"{connector_object[:200]}-offsets-{uid[:8]}"


def reset_spec(offsets: ConnectorOffsets, connector_object: str) -> dict[str, Any]:
    """The OffsetReset spec that applies ``offsets`` to the connector of ``connector_object``;
    it returns the connector to the Connector's own ``spec.state`` (resume: desired)."""
    spec: dict[str, Any] = {"connectorRef": {"name": connector_object}, "resume": "desired"}
    # the models keep enum values as plain strings
    if str(offsets.on_create) == OnCreate.CLEAR.value:
        return {**spec, "action": str(ResetAction.RESET)}
    if offsets.entries:
        entries = [e.model_dump(mode="json", by_alias=True) for e in offsets.entries]
        return {**spec, "action": str(ResetAction.ALTER), "offsets": entries}
    set_to = SetTo(str(offsets.set_to))
    if set_to is SetTo.TIMESTAMP:
        spec = {**spec, "action": str(ResetAction.TO_TIMESTAMP), "timestamp": offsets.timestamp}
    else:
        spec = {**spec, "action": str(_SET_TO[set_to])}
    return {**spec, "topics": list(offsets.topics)} if offsets.topics else spec


def reset_manifest(
    offsets: ConnectorOffsets, namespace: str, connector_object: str, uid: str, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The OffsetReset object, owned by the Connector (deleting the Connector deletes it);
    ``spec``: instead of the one ``offsets`` says (a rename's, :func:`rename_spec`)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "OffsetReset",
        "metadata": {
            "name": reset_name(connector_object, uid),
            "namespace": namespace,
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": "Connector", "name": connector_object, "uid": uid}],
        },
        "spec": spec if spec is not None else reset_spec(offsets, connector_object),
    }
