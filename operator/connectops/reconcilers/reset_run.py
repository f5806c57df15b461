"""One OffsetReset execution's working state (``Run``) and the small facts every step module
shares: what a backup is called, how a failure is described (who holds a lock:
:mod:`connectops.planning.reset_holder`, which the Connector reconciler reads too)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from connectops.adapters.kafka import KafkaOffsets, OffsetRecord, RawRecord, WrittenRecord
from connectops.models.base import utcnow_iso
from connectops.models.connector import ConnectorSpec
from connectops.models.offset_reset import (
    OffsetResetSpec,
    OffsetResetStatus,
    ResetAction,
    ResetPlanStatus,
    StepState,
    StepStatus,
)
from connectops.planning.offset_reset import Step
from connectops.reconcilers.clusters import ClusterHandle
from connectops.reconcilers.common import EmitEvent
from connectops.redact import Redactor

if TYPE_CHECKING:
    from connectops.reconcilers.reset_changes import OffsetChanges

PLURAL = "offsetresets"
HISTORY_LIMIT = 30


def backup_name(namespace: str, name: str, uid: str) -> str:
    """A backup ConfigMap name that no other reset can have: readable prefix, then a hash of the
    full identity (two long names sharing their first 200 characters still differ)."""
    digest = hashlib.sha256(f"{namespace}/{name}/{uid}".encode()).hexdigest()[:12]
    return f"connectops-backup-{name[:200]}-{digest}"


def offsets_outcome(reset_step: StepStatus, action: str, backup: str | None, *, changed: bool) -> str:
    """What a failed reset did to the offsets, as far as the operator can know: from its reset
    step and its change log (``changed``: a call was Done, or Started with no answer)."""
    kept = f" (the old offsets are in ConfigMap {backup})" if backup else ""
    if reset_step.state == StepState.DONE:
        return f"The offsets WERE changed by the {action}{kept}"
    if changed:
        # a change may have reached Connect or Kafka with its answer lost on the way back
        return f"The offsets may have been changed: an offsets call was sent and not confirmed{kept}"
    return "Offsets were not changed (every offsets call was refused, or none was made)"


def spec_hash(spec: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


class KafkaApi(Protocol):
    """What a reset calls on Kafka (``KafkaOffsets`` implements it; tests plug in a double)."""

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]: ...
    def delete_group(self, group: str) -> bool: ...
    def alter_group_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None: ...
    def partitions_for(self, topics: Iterable[str]) -> list[tuple[str, int]]: ...
    def topics_matching(self, regex: str) -> list[str]: ...
    def list_offsets(
        self, topic_partitions: Iterable[tuple[str, int]], spec: str | int, *, read_committed: bool = False
    ) -> dict[tuple[str, int], int]: ...
    def read_connector_offsets(
        self, topic: str, connector_names: Iterable[str], *, timeout_s: float | None = None
    ) -> list[OffsetRecord]: ...
    def write_tombstones(self, records: Iterable[OffsetRecord]) -> list[WrittenRecord]: ...
    def restore_records(self, records: Iterable[RawRecord]) -> list[WrittenRecord]: ...
    def verify_tombstones(
        self, topic: str, records: Iterable[OffsetRecord], *, timeout_s: float | None = None
    ) -> None: ...
    def topic_exists(self, topic: str) -> bool: ...
    def delete_topic(self, topic: str) -> bool: ...
    def truncate_topic(self, topic: str) -> dict[int, int]: ...


#: builds the Kafka access of a ConnectCluster with ``spec.kafka``: (bootstrap servers, client config)
KafkaFactory = Callable[[str, Mapping[str, str]], KafkaApi]

#: checked by mypy: the real adapter implements the interface
_KAFKA_OFFSETS_IMPLEMENTS_API: type[KafkaApi] = KafkaOffsets


class StepFailed(Exception):
    """A step cannot succeed as asked; ``unsafe_to_resume`` keeps the connector stopped."""

    def __init__(self, message: str, *, unsafe_to_resume: bool = False) -> None:
        super().__init__(message)
        self.unsafe_to_resume = unsafe_to_resume


@dataclass
class Run:
    """One execution's working state; ``status`` is the object's status as loaded, changed here
    and stored through :meth:`OffsetResetStatus.for_storage`."""

    namespace: str
    name: str
    uid: str
    generation: int | None
    status: OffsetResetStatus
    spec: OffsetResetSpec
    cluster: ClusterHandle
    emit: EmitEvent
    kafka: KafkaApi | None = None
    #: builds the access to another Kafka cluster (MirrorMaker 2's source or target)
    kafka_factory: KafkaFactory = KafkaOffsets
    #: MirrorMaker 2's client settings by cluster ("source", "target"): config with the values
    #: of configFrom, read from this reset's namespace before anything changes
    mirror_kafka_config: dict[str, dict[str, str]] = field(default_factory=dict)
    managed_states: dict[str, str] = field(default_factory=dict)
    #: masks every secret value the reset holds in the texts it writes (status, Events): the
    #: ConnectCluster's and the reset's own (mirrorMaker2 configFrom), added when read
    redactor: Redactor = field(default_factory=Redactor)
    #: changes to ``status`` not written yet that must ride on the next write, whatever that
    #: write is for (a step boundary the machine did not write on its own, an offsets call's
    #: answer); see ``OffsetResetExecutor._execute`` for which ones may wait
    unsaved: bool = False
    #: each connector's offsets as Connect answered the backup step of this very execution, after
    #: the stop (not stored: a rerun from status reads the backup's ConfigMap); the backup holds
    #: them and the plan shows them
    offsets_read: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: this execution's stop step saw the connectors STOPPED with no tasks (the backup step
    #: that follows need not ask again)
    stopped_here: bool = False
    #: this execution's lock step took a lock over from another holder: its outcome names that
    #: holder, which a rerun (now the holder itself) could not tell again, so it is written at once
    took_over_lock: bool = False
    #: each connector's Lease as this execution's lock step left it (its resourceVersion): the
    #: unlock deletes that version without reading the Lease first (KubeClient.release_lock)
    lease_versions: dict[str, str] = field(default_factory=dict)
    #: the Connector's spec for the check launched with the outcome, read beside the unlock
    #: (one round trip fewer between RUNNING and Succeeded); a rerun past the unlock reads it then
    check_connector: ConnectorSpec | None = None
    check_connector_read: bool = False
    #: every connector's KIP-875 entries of the plan, whole: status shows a sample, the whole is
    #: in the plan's ConfigMaps (reconcilers.reset_plan_store), read back by a rerun
    entries: dict[str, list[dict[str, Any]]] | None = None

    def __post_init__(self) -> None:
        self.redactor.include(self.cluster.redactor)

    def step(self, step: Step) -> StepStatus:
        return self.status.step(str(step))

    def set_step(self, step: Step, **values: Any) -> None:
        self.status.set_step(str(step), **values)

    def history(self, message: str) -> None:
        self.status.record(message, now=utcnow_iso(), limit=HISTORY_LIMIT)

    @property
    def plan(self) -> ResetPlanStatus:
        """The plan published by the inspect step; every step after it acts on this."""
        if self.status.plan is None:
            raise StepFailed("the reset has no plan yet: the inspect step has not run")
        return self.status.plan

    @property
    def connectors(self) -> list[str]:
        return list(self.status.connectors)

    def kind(self, connector: str) -> str:
        """source, sink or a mirror kind, as inspected."""
        return self.plan.config(connector).kind

    def group(self, connector: str) -> str:
        """A sink's consumer group, as inspected."""
        group = self.plan.config(connector).group
        if not group:
            raise StepFailed(f"{connector}: the plan names no consumer group for this sink")
        return group


def bound(fn: Callable[..., Awaitable[Any]], *args: Any) -> Callable[[], Awaitable[Any]]:
    """A call bound to its arguments now (a lambda in a loop would see the loop's last values)."""
    return lambda: fn(*args)


class Strategy(Protocol):
    """What each strategy module (reset_rest, reset_tombstone, reset_consumer_group) provides."""

    async def reset(
        self, changes: OffsetChanges, run: Run, connector: str, action: ResetAction, entries: list[dict[str, Any]]
    ) -> None: ...

    async def restore(self, changes: OffsetChanges, run: Run, connector: str, saved: dict[str, Any]) -> None: ...
