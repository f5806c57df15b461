"""Where a new connector starts (``spec.offsets``): the pure part.

``clear`` and ``set`` are carried out by an OffsetReset the Connector reconciler creates, owned
by the Connector, so the connector's first offsets go through the same step machine as any reset
(lock, backup, KIP-875 call, read-back from Connect and Kafka, crash-safe resume). This module
says which OffsetReset that is; it does no I/O.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from connectops.models.base import API_VERSION
from connectops.models.connector import ConnectorOffsets, OnCreate, SetTo
from connectops.models.offset_reset import ResetAction

#: states of ``status.offsetsOnCreate``
APPLYING: Final = "Applying"
APPLIED: Final = "Applied"
FAILED: Final = "Failed"
RESUMED: Final = "Resumed"

_SET_TO = {SetTo.EARLIEST: ResetAction.TO_EARLIEST, SetTo.LATEST: ResetAction.TO_LATEST}


def offsets_hash(offsets: ConnectorOffsets | None) -> str:
    """Identifies the ``spec.offsets`` applied, so a later edit can be told apart (and ignored)."""
    text = offsets.model_dump_json(by_alias=True) if offsets is not None else "null"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def needs_reset(offsets: ConnectorOffsets | None) -> bool:
    """Whether creating the connector involves writing its offsets before its first task runs."""
    return offsets is not None and str(offsets.on_create) != OnCreate.RESUME.value


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


def reset_manifest(offsets: ConnectorOffsets, namespace: str, connector_object: str, uid: str) -> dict[str, Any]:
    """The OffsetReset object, owned by the Connector (deleting the Connector deletes it)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "OffsetReset",
        "metadata": {
            "name": reset_name(connector_object, uid),
            "namespace": namespace,
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": "Connector", "name": connector_object, "uid": uid}],
        },
        "spec": reset_spec(offsets, connector_object),
    }
