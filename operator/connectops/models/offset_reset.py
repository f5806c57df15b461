"""``OffsetReset``: a one-shot, durable request to reset or alter a connector's offsets.

The spec, the status and the plan the inspect step publishes (``ResetPlanStatus``) live together
(~550 lines) because they are one CRD's schema, generated from here.
"""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Final

from pydantic import Field, StringConstraints, model_validator

from connectops.models.admission import filled, given, rules
from connectops.models.base import STORED_AS_TEXT, CamelModel, Condition, LocalObjectRef, SecretKeyRef, StatusModel
from connectops.models.checks import LastCheck
from connectops.models.interruption import Interruption


class ResetAction(StrEnum):
    RESET = "reset"
    ALTER = "alter"
    TO_EARLIEST = "toEarliest"
    TO_LATEST = "toLatest"
    TO_TIMESTAMP = "toTimestamp"
    RESTORE = "restore"


#: Epoch milliseconds or an RFC 3339 date-time with its offset. The schema bounds the text
#: (pattern, maxLength) and the model the value (calendar, range): no CEL rule parses it.
TIMESTAMP_PATTERN: Final = (
    r"^([0-9]{1,15}|[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2}))$"
)
#: a spec timestamp as the schema bounds it (its value is checked by :func:`timestamp_ms`)
TimestampText = Annotated[str, StringConstraints(max_length=40, pattern=TIMESTAMP_PATTERN)]
#: 9999-12-31T23:59:59.999Z: the last instant RFC 3339 can write, and far inside Kafka's int64.
MAX_TIMESTAMP_MS: Final = 253_402_300_799_999


def timestamp_ms(text: str) -> int:
    """Epoch milliseconds of a spec timestamp, or ValueError with the sentence a user needs."""
    if text.isdigit():
        value = int(text)
    else:
        try:
            parsed = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                "timestamp must be epoch milliseconds or an RFC 3339 time such as 2026-01-31T12:00:00Z"
            ) from None
        if parsed.tzinfo is None:
            # fromisoformat would read it as the operator's local time: a silent shift by hours
            raise ValueError("timestamp needs a UTC offset (Z or +hh:mm), for example 2026-01-31T12:00:00Z")
        value = int(parsed.timestamp() * 1000)
    if not 0 <= value <= MAX_TIMESTAMP_MS:
        raise ValueError(
            f"timestamp {text} is out of range: epoch milliseconds from 0 to {MAX_TIMESTAMP_MS} "
            "(1970-01-01 to 9999-12-31)"
        )
    return value


SINK_ONLY_ACTIONS = frozenset({ResetAction.TO_EARLIEST, ResetAction.TO_LATEST, ResetAction.TO_TIMESTAMP})

#: The most partitions one alter names. The spec is copied into the reset's status
#: (executedSpec), whose whole is bounded by models.bounds.STATUS_MAX_BYTES, and client-side
#: kubectl apply keeps another copy in an annotation (256 KiB for all of them): 1,000 entries
#: of a usual partition shape are ~100 KiB. The bytes are bounded too (a partition map may be
#: of any size).
ALTER_MAX_ENTRIES: Final = 1000
ALTER_MAX_BYTES: Final = 128 * 1024
#: The most entries an alter takes from ConfigMaps (``offsetsFrom``) and inline together: a
#: 20,000-partition alter is the size the tests prove end to end (models of that many entries
#: are tens of MiB in the operator, read once at inspect); the plan and the backup go to
#: chunked ConfigMaps, so status stays bounded.
ALTER_FROM_MAX_ENTRIES: Final = 20_000
#: ConfigMaps one alter may name: each holds at most ~1 MiB (etcd's object limit).
ALTER_FROM_MAX_CONFIG_MAPS: Final = 32
#: What one ConfigMap's value may inflate to (a gzip value is a user's: a bomb must not stop).
ALTER_FROM_MAX_INFLATED_BYTES: Final = 16 * 1024 * 1024
OFFSETS_KEY: Final = "offsets.json"
ALTER_ALTERNATIVE: Final = (
    f"list them in ConfigMaps named in offsetsFrom (up to {ALTER_FROM_MAX_ENTRIES} entries), split the change "
    "over several OffsetResets, or put the offsets in a ConfigMap in a backup's format and use action restore "
    "with restoreFrom (which sets exactly those offsets, removing the others)"
)


class ResetStrategy(StrEnum):
    AUTO = "auto"
    REST = "rest"
    TOMBSTONE = "tombstone"


class ResetPhase(StrEnum):
    """Where an OffsetReset is (``status.phase``)."""

    PENDING = "Pending"
    #: a dry run's end: the plan is published, nothing was changed
    PLANNED = "Planned"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


#: phases after which the reset does nothing more (it runs once, as first written)
FINAL_PHASES: Final = frozenset({ResetPhase.SUCCEEDED, ResetPhase.FAILED, ResetPhase.PLANNED})


class StepState(StrEnum):
    """Where one step of an OffsetReset is (``status.steps[].state``)."""

    PENDING = "Pending"
    RUNNING = "Running"
    DONE = "Done"
    SKIPPED = "Skipped"
    FAILED = "Failed"


class ChangeState(StrEnum):
    """What Connect answered to one offsets call (``status.changes[].state``)."""

    #: sent, no answer read yet: it may have taken effect
    STARTED = "Started"
    DONE = "Done"
    REFUSED = "Refused"


class ResumePolicy(StrEnum):
    DESIRED = "desired"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


class OffsetSyncsCleanup(StrEnum):
    """What a MirrorMaker 2 reset does to the offset-syncs topic.

    The topic is shared by every flow between the same two clusters, so deleting it reaches flows
    the reset does not name, and keeping it leaves syncs that make MM2 create topics without
    mirroring data. ``auto`` deletes it only when the reset covers every MirrorSourceConnector on
    the worker that uses it, and otherwise refuses before any change, asking for ``keep`` or
    ``delete`` explicitly.
    """

    AUTO = "auto"
    DELETE = "delete"
    TRUNCATE = "truncate"
    KEEP = "keep"
    NONE = "none"
    """The same as keep (the name used before keep existed)."""


class OffsetsTopicLocation(StrEnum):
    SOURCE = "source"
    TARGET = "target"


class OffsetEntry(CamelModel):
    """One KIP-875 entry: a connector partition and its offset (null removes it)."""

    partition: dict[str, Any] = Field(description="Partition map, e.g. {kafka_topic, kafka_partition}.")
    offset: dict[str, Any] | None = Field(
        default=None, description="Offset map, e.g. {kafka_offset: 42}; null removes the partition."
    )


class OffsetsConfigMapRef(CamelModel):
    """A ConfigMap of the OffsetReset's namespace whose key holds alter entries: a JSON list of
    ``{partition, offset}`` (as in ``offsets``), in ``data``, or gzip-compressed in ``binaryData``
    when the key ends in ``.gz``. Read once, at inspect, before anything is stopped; what was
    read is the plan from then on (a later edit of the ConfigMap changes nothing)."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="The ConfigMap's name (in the OffsetReset's namespace).",
    )
    key: str = Field(
        default=OFFSETS_KEY,
        min_length=1,
        max_length=253,
        pattern=r"^[-._a-zA-Z0-9]+$",
        description=f"The key holding the entries ({OFFSETS_KEY} by default; *.gz: gzip, in binaryData).",
    )


class KafkaClusterAccess(CamelModel):
    """How the operator reaches one of MirrorMaker 2's clusters (for its offset-syncs topic)."""

    model_config = rules(
        (
            "!has(self.configFrom) || !has(self.config) || !self.configFrom.exists(k, k in self.config)",
            "a Kafka setting is set in both config and configFrom",
        )
    )

    bootstrap_servers: str = Field(min_length=1, description="host:port[,host:port]")
    config: dict[str, str] = Field(
        default_factory=dict, description="Non-sensitive client settings (librdkafka names)."
    )
    config_from: dict[str, SecretKeyRef] = Field(
        default_factory=dict,
        description=("Sensitive client settings read from Secrets of the OffsetReset's namespace, e.g. sasl.password."),
    )

    @model_validator(mode="after")
    def _one_source_per_setting(self) -> KafkaClusterAccess:
        both = sorted(set(self.config) & set(self.config_from))
        if both:
            raise ValueError(f"Kafka settings {both} are set in both config and configFrom")
        return self


class MirrorMaker2(CamelModel):
    """The MirrorMaker 2 deployment whose offsets are reset together.

    The offset-syncs topic name is derived exactly as MM2 does: ``mm2-offset-syncs`` + sep +
    alias + sep + ``internal``; the alias is the TARGET alias when the topic lives on the source
    cluster (the default since 3.0, KIP-716) and the SOURCE alias when it lives on the target.
    """

    source_connector: str = Field(min_length=1, description="MirrorSourceConnector name.")
    checkpoint_connector: str | None = Field(
        default=None, description="MirrorCheckpointConnector name (reset with the source)."
    )
    heartbeat_connector: str | None = Field(
        default=None, description="MirrorHeartbeatConnector name (reset with the source)."
    )
    source_alias: str = Field(min_length=1, description="source.cluster.alias")
    target_alias: str = Field(min_length=1, description="target.cluster.alias")
    offset_syncs_topic_location: OffsetsTopicLocation = Field(
        default=OffsetsTopicLocation.SOURCE, description="offset-syncs.topic.location"
    )
    separator: str = Field(default=".", description="replication.policy.separator")
    internal_topic_separator_enabled: bool = Field(
        default=True,
        description=(
            "replication.policy.internal.topic.separator.enabled; when false, internal topics "
            "keep the default '.' separator."
        ),
    )
    offset_syncs: OffsetSyncsCleanup = Field(
        default=OffsetSyncsCleanup.AUTO,
        description=(
            "auto: delete the offset-syncs topic when this reset covers every MirrorSourceConnector "
            "on the worker that uses it, else refuse before any change; delete: delete it even if "
            "other flows use it (their translated offsets restart); keep (or none): leave it "
            "(accepting stale syncs); truncate: DeleteRecords on it."
        ),
    )
    source_cluster: KafkaClusterAccess | None = Field(
        default=None, description="Source Kafka cluster (for offset-syncs on the source)."
    )
    target_cluster: KafkaClusterAccess | None = Field(
        default=None, description="Target Kafka cluster (for offset-syncs on the target)."
    )


class OffsetResetSpec(CamelModel):
    """Reset, alter or restore a connector's offsets: stop, backup, reset, resume, verify."""

    # What _coherent checks, at admission (timestamp_ms's calendar and range check stays there).
    model_config = rules(
        (
            f"{given('connectorRef')} != ({given('connectorName')} || {given('mirrorMaker2')})",
            "set exactly one of connectorRef, or connectorName/mirrorMaker2 with clusterRef",
        ),
        (
            f"!({given('connectorName')} || {given('mirrorMaker2')}) || {given('clusterRef')}",
            "connectorName and mirrorMaker2 need clusterRef",
        ),
        (
            f"self.action != 'alter' || {filled('offsets')} || {filled('offsetsFrom')}",
            "action alter needs a non-empty offsets list or offsetsFrom",
        ),
        (f"self.action == 'alter' || !{filled('offsets')}", "offsets are only used by action alter"),
        (f"self.action == 'alter' || !{filled('offsetsFrom')}", "offsetsFrom is only used by action alter"),
        (
            f"!has(self.offsets) || size(self.offsets) <= {ALTER_MAX_ENTRIES}",
            f"an alter takes at most {ALTER_MAX_ENTRIES} offsets; for more, {ALTER_ALTERNATIVE}",
        ),
        (f"self.action != 'toTimestamp' || {filled('timestamp')}", "action toTimestamp needs timestamp"),
        (f"self.action != 'restore' || {filled('restoreFrom')}", "action restore needs restoreFrom"),
        (
            f"!{given('mirrorMaker2')} || !(self.action in {sorted(str(a) for a in SINK_ONLY_ACTIONS)})",
            "actions toEarliest, toLatest and toTimestamp apply to sink connectors, not MirrorMaker 2",
        ),
        immutable=(
            "an OffsetReset runs once as first written, so its spec cannot change: "
            "create a new OffsetReset for a new reset"
        ),
    )

    connector_ref: LocalObjectRef | None = Field(
        default=None, description="The Connector object whose connector is reset."
    )
    connector_name: str | None = Field(
        default=None, min_length=1, description="A connector not managed by a Connector object."
    )
    cluster_ref: LocalObjectRef | None = Field(
        default=None, description="ConnectCluster of connectorName (required with it)."
    )
    action: ResetAction = Field(default=ResetAction.RESET, description="What to do to the offsets.")
    strategy: ResetStrategy = Field(
        default=ResetStrategy.AUTO,
        description="auto: KIP-875 REST on 3.6+ workers, tombstones before; or force one.",
    )
    offsets: list[OffsetEntry] = Field(
        default_factory=list,
        max_length=ALTER_MAX_ENTRIES,
        description=(
            f"For alter: the partitions and their new offsets (at most {ALTER_MAX_ENTRIES} entries and "
            f"{ALTER_MAX_BYTES >> 10} KiB of them; for more, {ALTER_ALTERNATIVE})."
        ),
    )
    offsets_from: list[OffsetsConfigMapRef] = Field(
        default_factory=list,
        max_length=ALTER_FROM_MAX_CONFIG_MAPS,
        description=(
            "For alter: ConfigMaps of this namespace holding more entries, added to offsets (at most "
            f"{ALTER_FROM_MAX_ENTRIES} entries in all; a partition named twice is refused). Read at inspect, "
            "before the stop; a missing or invalid one refuses the reset with nothing stopped."
        ),
    )
    timestamp: TimestampText | None = Field(
        default=None,
        description="For toTimestamp: RFC 3339 time with its offset (2026-01-31T12:00:00Z) or epoch milliseconds.",
    )
    topics: list[str] = Field(
        default_factory=list,
        description="For sink toEarliest/toLatest/toTimestamp: limit to these topics.",
    )
    restore_from: str | None = Field(
        default=None, description="For restore: the backup ConfigMap made by an earlier reset."
    )
    mirror_maker2: MirrorMaker2 | None = Field(
        default=None, description="Reset a MirrorMaker 2 deployment's connectors together."
    )
    dry_run: bool = Field(default=False, description="Publish the plan in status and stop there.")
    acknowledge_external_offsets: bool = Field(
        default=False,
        description=(
            "Required when the Connector declares offsetsManagedExternally: the reset changes only "
            "the offsets Kafka Connect manages; the position the connector keeps elsewhere must be "
            "changed by hand."
        ),
    )
    resume: ResumePolicy = Field(
        default=ResumePolicy.DESIRED,
        description=(
            "State afterwards: desired = the Connector object's spec.state (for unmanaged "
            "connectors, the state before the reset)."
        ),
    )

    @model_validator(mode="after")
    def _coherent(self) -> OffsetResetSpec:
        has_ref = self.connector_ref is not None
        has_name = self.connector_name is not None or self.mirror_maker2 is not None
        if has_ref == has_name:
            raise ValueError("set exactly one of connectorRef, or connectorName/mirrorMaker2 with clusterRef")
        if has_name and self.cluster_ref is None:
            raise ValueError("connectorName and mirrorMaker2 need clusterRef")
        if self.action == ResetAction.ALTER and not self.offsets and not self.offsets_from:
            raise ValueError("action alter needs a non-empty offsets list or offsetsFrom")
        if self.action != ResetAction.ALTER and self.offsets:
            raise ValueError("offsets are only used by action alter")
        if self.action != ResetAction.ALTER and self.offsets_from:
            raise ValueError("offsetsFrom is only used by action alter")
        size = len(json.dumps([e.model_dump(mode="json") for e in self.offsets], separators=(",", ":")))
        if size > ALTER_MAX_BYTES:
            raise ValueError(
                f"offsets take {size} bytes; an alter takes at most {ALTER_MAX_BYTES >> 10} KiB of them "
                f"(and {ALTER_MAX_ENTRIES} entries); for more, {ALTER_ALTERNATIVE}"
            )
        if self.action == ResetAction.TO_TIMESTAMP and not self.timestamp:
            raise ValueError("action toTimestamp needs timestamp")
        if self.timestamp:
            timestamp_ms(self.timestamp)
        if self.action == ResetAction.RESTORE and not self.restore_from:
            raise ValueError("action restore needs restoreFrom")
        if self.mirror_maker2 is not None and self.action in SINK_ONLY_ACTIONS:
            raise ValueError(f"action {self.action} applies to sink connectors, not MirrorMaker 2")
        return self


class StepStatus(StatusModel):
    name: str = Field(description="Step name.")
    state: Annotated[StepState, STORED_AS_TEXT] = Field(
        default=StepState.PENDING, description="Pending, Running, Done, Skipped or Failed."
    )
    attempts: int = Field(default=0, description="How many times the step was started.")
    started_at: str | None = Field(default=None, description="When the last attempt started.")
    first_started_at: str | None = Field(
        default=None, description="When the first attempt started: the step's deadline counts from here."
    )
    finished_at: str | None = Field(default=None, description="When the step finished.")
    message: str | None = Field(default=None, description="What the step did or why it failed.")


class HistoryEntry(StatusModel):
    time: str = Field(description="When.")
    message: str = Field(description="What happened.")


class BackupStatus(StatusModel):
    config_map: str = Field(description="ConfigMap holding the backup (outlives the reset).")
    offsets: int = Field(default=0, description="Number of partitions saved.")
    taken_at: str | None = Field(default=None, description="When the backup was taken.")
    read_after_stop: bool | None = Field(
        default=None,
        description=(
            "The offsets were read after the connector was STOPPED with no tasks, so they include the "
            "commit its tasks make as they stop. Absent on backups an earlier operator version took "
            "before the stop, which may trail the connector's position by up to the flush interval."
        ),
    )
    earlier_config_map: str | None = Field(
        default=None,
        description=(
            "A backup this reset took before the stop under an earlier operator version; kept, but "
            "configMap, read after the stop, is the one a restore should use."
        ),
    )


class OffsetChange(StatusModel):
    """One offsets call that changed (or may have changed) a connector, and Connect's answer."""

    connector: str = Field(description="Connector whose offsets were changed.")
    call: str = Field(description="The call: PATCH offsets, DELETE offsets, tombstones, group offsets.")
    partitions: int = Field(default=0, description="Partitions named in the call (0: all of them).")
    state: Annotated[ChangeState, STORED_AS_TEXT] = Field(
        default=ChangeState.STARTED, description="Started (outcome unknown), Done or Refused."
    )
    confirmed_by_connector: bool | None = Field(
        default=None,
        description=(
            "Connect's answer: true when the connector confirmed the change (its alterOffsets), "
            "false when only the framework-managed offsets were changed; null when not a REST call."
        ),
    )
    message: str | None = Field(default=None, description="Connect's message, verbatim (sanitized).")


class PlanConnector(StatusModel):
    """One connector of the plan: what it is, the state it was in, the state it returns to."""

    name: str = Field(description="Connector name.")
    kind: str = Field(description="source, sink, or a MirrorMaker 2 kind.")
    state: str = Field(description="Connect's state when inspected.")
    resume_to: str = Field(default="running", description="running, paused or stopped after the reset.")
    managed_by: str | None = Field(default=None, description="The Connector object managing it, if any.")
    managed_generation: int | None = Field(
        default=None,
        description=(
            "That Connector's metadata.generation when inspected: a resume state other than its spec.state "
            "is held while the generation stays this one; a later spec change wins."
        ),
    )


class PlanConfig(StatusModel):
    """What the reset needs from a connector's config to change its offsets on the Kafka side."""

    kind: str = Field(description="source, sink, or a MirrorMaker 2 kind.")
    group: str | None = Field(default=None, description="A sink's consumer group.")
    offsets_topic: str | None = Field(
        default=None, description="A source's own offsets topic (offsets.storage.topic), if it has one."
    )


class PlanScope(StatusModel):
    """What a set-to action (toEarliest, toLatest, toTimestamp) touches and what it leaves alone."""

    topics: list[str] = Field(default_factory=list, description="Topics whose offsets are set.")
    all_topics: bool = Field(default=False, description="Every topic the connector reads (no spec.topics).")
    partitions: int = Field(default=0, description="Partitions whose offsets are set.")
    untouched_partitions: int = Field(default=0, description="Committed partition offsets left as they are.")
    untouched_topics: list[str] = Field(default_factory=list, description="Topics of the untouched partitions.")
    description: str = Field(default="", description="The same, in a sentence.")


#: a KIP-875 entry as Connect's REST API writes it: {partition: {...}, offset: {...} | null}
KipEntry = dict[str, Any]


class ResetPlanStatus(StatusModel):
    """What the reset does (or, for a dry run, would do), decided at the inspect step."""

    warnings: list[str] = Field(default_factory=list, description="What the user should know before it runs.")
    strategy: str = Field(description="rest or tombstone, as resolved.")
    steps: list[str] = Field(default_factory=list, description="The steps this reset runs.")
    connectors: list[PlanConnector] = Field(default_factory=list, description="The connectors reset.")
    worker_version: str | None = Field(default=None, description="Kafka Connect version of the worker.")
    configs: dict[str, PlanConfig] = Field(default_factory=dict, description="By connector: its kind, group, topic.")
    entries: dict[str, list[KipEntry]] = Field(
        default_factory=dict,
        description=(
            "By connector: the KIP-875 entries written (alter and set-to actions); all of them, or, when "
            "entriesConfigMap is set, the first 50 (the whole list is in that ConfigMap)."
        ),
    )
    entry_counts: dict[str, int] = Field(default_factory=dict, description="By connector: how many entries.")
    entries_config_map: str | None = Field(
        default=None,
        description=(
            "The ConfigMap (owned by this reset, never replaced) holding every entry, when they are more than "
            "status shows; a large plan continues in ConfigMaps it names."
        ),
    )
    current: dict[str, list[KipEntry]] = Field(
        default_factory=dict,
        description="By connector: its offsets before the change (the first 50); see currentAsOf for when.",
    )
    current_counts: dict[str, int] = Field(default_factory=dict, description="By connector: how many offsets it had.")
    current_as_of: str | None = Field(
        default=None,
        description=(
            "When current was read: stop (after the connector was STOPPED with no tasks: its final "
            "commit included, the offsets the backup holds) or lastCommit (a dry run, which does not "
            "stop the connector: as it last committed them, which may trail its position by up to "
            "the workers' offset.flush.interval.ms)."
        ),
    )
    scope: dict[str, PlanScope] = Field(default_factory=dict, description="By connector: a set-to action's reach.")
    offset_syncs_topic: str | None = Field(default=None, description="MirrorMaker 2's offset-syncs topic.")
    offset_syncs_cleanup: str | None = Field(default=None, description="What happens to it: keep, delete, truncate.")
    offset_syncs_cluster: str | None = Field(default=None, description="source or target: where it lives.")
    offset_syncs_other_flows: str | None = Field(
        default=None, description="Other MirrorSourceConnector flows that use the same topic."
    )

    def config(self, connector: str) -> PlanConfig:
        """The inspected config facts of a connector of this reset (only those are in the plan)."""
        try:
            return self.configs[connector]
        except KeyError:
            raise KeyError(f"connector {connector} is not part of this reset's plan") from None

    def resume_to(self, connector: str) -> str:
        return next((c.resume_to for c in self.connectors if c.name == connector), str(ResumePolicy.RUNNING))

    def entries_for(self, connector: str) -> list[KipEntry]:
        """The connector's KIP-875 entries, each with its ``offset`` key: the API server drops a
        null inside a list's objects when it stores a status patch, so a partition to remove
        reads back without its ``offset: null``."""
        return [{"partition": e.get("partition"), "offset": e.get("offset")} for e in self.entries.get(connector, [])]


class OffsetResetStatus(StatusModel):
    phase: Annotated[ResetPhase, STORED_AS_TEXT] | None = Field(
        default=None, description="Pending, Planned (dry run), Running, Succeeded or Failed."
    )
    observed_generation: int | None = Field(default=None, description="Generation acted upon.")
    spec_hash: str | None = Field(default=None, description="Hash of the spec that was executed.")
    executed_spec: dict[str, Any] | None = Field(
        default=None,
        description="The spec as it was when the reset started: what runs, whatever the spec says later.",
    )
    strategy: str | None = Field(default=None, description="rest or tombstone, as resolved.")
    connector_kind: str | None = Field(default=None, description="source, sink or mirror kinds.")
    connectors: list[str] = Field(default_factory=list, description="Connectors reset.")
    lock_scope: str | None = Field(
        default=None,
        max_length=300,
        description=(
            "Where the connectors' lock is taken: kafka/<cluster id> (every ConnectCluster object "
            "reaching that Kafka cluster shares it), or the ConnectCluster's name when no id is known."
        ),
    )
    lock_namespace: str | None = Field(
        default=None,
        max_length=63,
        description=(
            "The namespace of the lock's Lease: the operator's own, shared by resets from every "
            "namespace; absent on locks taken in the reset's namespace."
        ),
    )
    previous_states: dict[str, str] = Field(default_factory=dict, description="Connector states before the reset.")
    stopped_at: str | None = Field(
        default=None, description="When the stop step first called Connect's stop (to the millisecond)."
    )
    interruptions: list[Interruption] = Field(
        default_factory=list,
        description="What the reset cost each connector: stop to first task RUNNING after the resume.",
    )
    steps: list[StepStatus] = Field(default_factory=list, description="The step machine.")
    current_step: str | None = Field(default=None, description="The step in progress.")
    pending_resume: bool | None = Field(
        default=None,
        description="The reset failed and resuming its connectors failed too: the operator keeps retrying the resume.",
    )
    plan: ResetPlanStatus | None = Field(default=None, description="What was (or would be) done.")
    backup: BackupStatus | None = Field(default=None, description="Where the old offsets are.")
    changes: list[OffsetChange] = Field(
        default_factory=list, description="Every offsets call that changed (or may have changed) a connector."
    )
    restore_manifest: str | None = Field(
        default=None,
        description="After a failure past the first change: the OffsetReset (YAML) that restores the backup.",
    )
    history: list[HistoryEntry] = Field(default_factory=list, description="Last events (bounded).")
    last_check: LastCheck | None = Field(default=None, description="Lag and balance check after the reset.")
    conditions: list[Condition] = Field(default_factory=list, description="Succeeded, Immutable.")

    # -- the step machine's record ----------------------------------------------------------------

    def step(self, name: str) -> StepStatus:
        for entry in self.steps:
            if entry.name == name:
                return entry
        raise KeyError(f"no step {name} in this reset's status")

    def set_step(self, name: str, **values: Any) -> None:
        """Update one step (a copy replaces it, so a step read earlier is not changed behind a caller)."""
        unknown = set(values) - set(StepStatus.model_fields)
        if unknown:
            raise AttributeError(f"StepStatus has no field(s) {sorted(unknown)}")
        self.steps = [e.model_copy(update=values) if e.name == name else e for e in self.steps]

    def record(self, message: str, *, now: str, limit: int) -> None:
        """Add a history line, keeping the last ``limit``."""
        self.history = [*self.history, HistoryEntry(time=now, message=message)][-limit:]

    def changed_offsets(self) -> bool:
        """Whether any offsets call may have taken effect (Done, or Started with no answer)."""
        return any(c.state in (ChangeState.STARTED, ChangeState.DONE) for c in self.changes)

    @property
    def backup_config_map(self) -> str | None:
        return self.backup.config_map if self.backup is not None else None
