"""How a MirrorMaker 2 connector is recognised, by the operator and by the check job alike.

MM2 runs as three Connect source connectors (``org.apache.kafka.connect.mirror``): the source
connector replicates records, the checkpoint connector translates consumer groups' offsets, the
heartbeat connector emits heartbeats. Each stores its own kind of Connect offsets (KIP-875):

- MirrorSourceConnector: partition ``{cluster: str, topic: str, partition: int}``, offset
  ``{offset: n}``, n >= 0 the last upstream offset replicated (``MirrorUtils.wrapPartition``,
  ``wrapOffset``);
- MirrorCheckpointConnector: partition ``{group: str, topic: str, partition: int}``, offset
  always ``{offset: 0}`` (``Checkpoint.connectorPartition``);
- MirrorHeartbeatConnector: partition ``{sourceClusterAlias: str, targetClusterAlias: str}``,
  offset always ``{offset: 0}`` (``Heartbeat.connectorPartition``).

The rule, in this order (:func:`mm2_role`):

1. A sink is never MM2: Connect's own ``type`` says what the connector is, and all three MM2
   connectors are source connectors.
2. The class names the role: the simple class name ENDS with ``MirrorSourceConnector``,
   ``MirrorCheckpointConnector`` or ``MirrorHeartbeatConnector`` (Apache's classes, and
   subclasses named after them, ``com.acme.TracingMirrorSourceConnector``).
3. Otherwise, when the stored offsets are known, their shape: every non-null entry has one MM2
   role's exact shape (keys AND types, as MM2 writes them), and there is at least one. MM2
   forks and wrappers keep the shape whatever their class is called; a connector that merely
   reuses one of the key names, or mixes shapes, is not taken for MM2.

Why the class first: it is known before any offsets exist (a new MM2 connector has none), and
an Apache or subclassed MM2 class is MM2 whatever it stored. Why the shape as well: the class
name is only a convention, while the stored offsets are what the connector actually is to
Connect and to every rule about its offsets (a reset's entries, a lag measured from them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final


class Mm2Role(StrEnum):
    """Which of MirrorMaker 2's three connectors."""

    SOURCE = "source"
    CHECKPOINT = "checkpoint"
    HEARTBEAT = "heartbeat"


#: the simple class name of each role's connector ends with this
CLASS_SUFFIX: Final[Mapping[Mm2Role, str]] = MappingProxyType(
    {
        Mm2Role.SOURCE: "MirrorSourceConnector",
        Mm2Role.CHECKPOINT: "MirrorCheckpointConnector",
        Mm2Role.HEARTBEAT: "MirrorHeartbeatConnector",
    }
)
#: Apache's classes
APACHE_CLASS: Final[Mapping[Mm2Role, str]] = MappingProxyType(
    {role: f"org.apache.kafka.connect.mirror.{suffix}" for role, suffix in CLASS_SUFFIX.items()}
)
#: the keys of each role's source partition (its Connect offsets' partition map)
PARTITION_KEYS: Final[Mapping[Mm2Role, frozenset[str]]] = MappingProxyType(
    {
        Mm2Role.SOURCE: frozenset({"cluster", "topic", "partition"}),
        Mm2Role.CHECKPOINT: frozenset({"group", "topic", "partition"}),
        Mm2Role.HEARTBEAT: frozenset({"sourceClusterAlias", "targetClusterAlias"}),
    }
)
#: each role's partition map: key -> must be text (else a non-negative integer)
_TEXT_KEYS: Final[Mapping[Mm2Role, frozenset[str]]] = MappingProxyType(
    {
        Mm2Role.SOURCE: frozenset({"cluster", "topic"}),
        Mm2Role.CHECKPOINT: frozenset({"group", "topic"}),
        Mm2Role.HEARTBEAT: frozenset({"sourceClusterAlias", "targetClusterAlias"}),
    }
)
#: roles whose offset is always ``{offset: 0}`` (their offsets carry no position)
ZERO_OFFSET_ROLES: Final = frozenset({Mm2Role.CHECKPOINT, Mm2Role.HEARTBEAT})

SINK_TYPE: Final = "sink"


def is_offset(value: object) -> bool:
    """A non-negative integer (JSON's booleans are not offsets)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def role_by_class(connector_class: str, rest_type: str | None = None) -> Mm2Role | None:
    """The role the class names (rules 1 and 2), None when it names none."""
    if rest_type == SINK_TYPE:
        return None
    simple = connector_class.rsplit(".", 1)[-1]
    for role, suffix in CLASS_SUFFIX.items():
        if simple.endswith(suffix):
            return role
    return None


def partition_role(partition: Mapping[str, object]) -> Mm2Role | None:
    """The role whose partition map has exactly these keys (types not checked: a request's
    entries are routed by it, then validated with their types)."""
    keys = frozenset(partition)
    return next((role for role, wanted in PARTITION_KEYS.items() if keys == wanted), None)


def entry_role(partition: object, offset: object) -> Mm2Role | None:
    """The role one stored entry (non-null offset) was written by, keys and types checked."""
    if not isinstance(partition, Mapping) or not isinstance(offset, Mapping) or set(offset) != {"offset"}:
        return None
    role = partition_role(partition)
    value = offset["offset"]
    if role is None or not is_offset(value) or (role in ZERO_OFFSET_ROLES and value != 0):
        return None
    text = _TEXT_KEYS[role]
    for key, item in partition.items():
        if not (isinstance(item, str) if key in text else is_offset(item)):
            return None
    return role


def role_by_offsets(entries: Iterable[Mapping[str, object]] | None) -> Mm2Role | None:
    """The role every stored entry has the shape of (rule 3); None for none, a mixture, or any
    entry of another shape. Null offsets (a tombstone shown for a moment after a reset) are
    skipped."""
    roles: set[Mm2Role] = set()
    for entry in entries or ():
        offset = entry.get("offset")
        if offset is None:
            continue
        role = entry_role(entry.get("partition"), offset)
        if role is None:
            return None
        roles.add(role)
    return roles.pop() if len(roles) == 1 else None


def mm2_role(
    connector_class: str, rest_type: str | None, offsets: Iterable[Mapping[str, object]] | None = None
) -> Mm2Role | None:
    """The connector's MM2 role, None when it is not MM2 (the module's rule). ``offsets``: its
    stored entries (KIP-875's ``offsets`` list), when they were read."""
    if rest_type == SINK_TYPE:
        return None
    by_class = role_by_class(connector_class)
    if by_class is not None or offsets is None:
        return by_class
    return role_by_offsets(offsets)
