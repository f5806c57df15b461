"""``Connector``: one Kafka Connect connector whose config and state the operator owns.

The spec, its parts and the status live together (~590 lines) because they are one CRD's schema,
generated from here, and the admission rules on the spec name its fields.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from connectops.models.admission import filled, given, rules
from connectops.models.base import (
    STORED_AS_TEXT,
    CamelModel,
    Condition,
    LocalObjectRef,
    SecretValueSource,
    StatusModel,
)
from connectops.models.checks import CheckSpec, LastCheck
from connectops.models.interruption import Interruption
from connectops.models.maven_version import InvalidVersionSpec, requirement
from connectops.models.offset_reset import OffsetEntry, TimestampText, timestamp_ms

#: Keys the operator renders from dedicated spec fields; accepting them in ``config`` would
#: give one setting two owners.
OWNED_KEYS = frozenset({"name", "connector.class", "tasks.max"})
#: KIP-891 keys, rendered from spec.pluginVersion and spec.converterVersions
CONNECTOR_VERSION_KEY = "connector.plugin.version"
CONVERTER_VERSION_KEYS = {
    "key": "key.converter.plugin.version",
    "value": "value.converter.plugin.version",
    "header": "header.converter.plugin.version",
}
CONVERTER_CLASS_KEYS = {"key": "key.converter", "value": "value.converter", "header": "header.converter"}
VERSION_KEYS = frozenset({CONNECTOR_VERSION_KEY, *CONVERTER_VERSION_KEYS.values()})
OVERRIDE_PREFIXES = {
    "producer": "producer.override.",
    "consumer": "consumer.override.",
    "admin": "admin.override.",
}

#: Bounds every object must fit in (the API server refuses the rest with a message at admission):
#: a value as large as a long PEM chain, and far more keys than any connector has.
MAX_VALUE_LENGTH = 65536
MAX_KEYS = 1000
ConfigValue = Annotated[str, Field(max_length=MAX_VALUE_LENGTH)] | int


#: typed producer field -> Kafka property; explicit so a rename can never change the wire name
PRODUCER_PROPERTY_NAMES = {
    "batch_size": "batch.size",
    "linger_ms": "linger.ms",
    "buffer_memory": "buffer.memory",
    "acks": "acks",
    "compression_type": "compression.type",
    "max_in_flight_requests_per_connection": "max.in.flight.requests.per.connection",
    "enable_idempotence": "enable.idempotence",
    "request_timeout_ms": "request.timeout.ms",
    "delivery_timeout_ms": "delivery.timeout.ms",
}


#: Connect accepts these in a name on POST, but its REST server (Jetty 12, Connect 4.x) answers
#: 400 "Ambiguous URI path encoding" to any path that carries them percent-encoded, and "." / ".."
#: are resolved as dot segments: such a connector could be created but never managed again.
UNADDRESSABLE_CHARACTERS = ("/", "\\", "%")


def unaddressable_name(name: str) -> None:
    # Connect's own name check rejects ISO control characters, and Jetty refuses them in a path
    bad = [c for c in UNADDRESSABLE_CHARACTERS if c in name] + sorted(
        {c for c in name if unicodedata.category(c) == "Cc"}
    )
    if bad or name in (".", ".."):
        raise ValueError(
            f"connector name must not contain {' '.join(repr(c) for c in bad) or repr(name)}: "
            "Kafka Connect's REST API cannot address such a name once created"
        )


class DesiredState(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"


class ProducerOverrides(CamelModel):
    """Typed ``producer.override.*`` settings; ``config`` takes any other producer setting.

    On a sink connector these only affect the dead-letter-queue producer (Connect's rule).
    """

    batch_size: int | None = Field(default=None, ge=0, description="batch.size (bytes)")
    linger_ms: int | None = Field(default=None, ge=0, description="linger.ms")
    buffer_memory: int | None = Field(default=None, ge=0, description="buffer.memory (bytes)")
    acks: str | None = Field(default=None, pattern=r"^(all|-1|0|1)$", description="acks")
    compression_type: str | None = Field(
        default=None,
        pattern=r"^(none|gzip|snappy|lz4|zstd)$",
        description="compression.type",
    )
    max_in_flight_requests_per_connection: int | None = Field(
        default=None, ge=1, description="max.in.flight.requests.per.connection"
    )
    enable_idempotence: bool | None = Field(default=None, description="enable.idempotence")
    request_timeout_ms: int | None = Field(default=None, ge=0, description="request.timeout.ms")
    delivery_timeout_ms: int | None = Field(default=None, ge=0, description="delivery.timeout.ms")
    config: dict[str, ConfigValue] = Field(
        default_factory=dict, description="Other producer settings, without the prefix."
    )

    def as_properties(self) -> dict[str, str]:
        """Producer properties without prefix; typed fields win over the free-form map."""
        props = {k: str(v) for k, v in self.config.items()}
        for field, prop in PRODUCER_PROPERTY_NAMES.items():
            value = getattr(self, field)
            if value is not None:
                props[prop] = str(value).lower() if isinstance(value, bool) else str(value)
        return props


def version_requirement(value: str | None) -> str | None:
    """A ``*.plugin.version`` value Connect will accept, else ValueError (pydantic's invalid spec)."""
    if value is not None:
        try:
            requirement(value)
        except InvalidVersionSpec as exc:
            raise ValueError(f"{value!r} is not a version or Maven version range: {exc}") from None
    return value


PluginVersionText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description=(
            "A version (exact: 1.0 means [1.0]), a Maven range such as [1.0,2.0) or [1.0,), or latest. "
            "Needs Kafka Connect 4.1+ (KIP-891)."
        ),
    ),
]


class ConverterVersions(CamelModel):
    """Versions of the connector's converters (KIP-891), each for the class named in ``config``."""

    key: PluginVersionText | None = Field(default=None, description="key.converter.plugin.version")
    value: PluginVersionText | None = Field(default=None, description="value.converter.plugin.version")
    header: PluginVersionText | None = Field(default=None, description="header.converter.plugin.version")

    _valid = field_validator("key", "value", "header")(version_requirement)

    def as_properties(self) -> dict[str, str]:
        return {CONVERTER_VERSION_KEYS[k]: v for k in ("key", "value", "header") if (v := getattr(self, k)) is not None}


class RestartBackoff(CamelModel):
    """The waits before automatic restarts: ``initialSeconds: 2, maxSeconds: 4`` restarts a task
    that keeps failing 2 s after the failure is seen, then 4 s and 4 s after each restart."""

    initial_seconds: int = Field(
        default=10,
        ge=1,
        description="Delay before the first restart, counted from when the operator sees the failure.",
    )
    max_seconds: int = Field(
        default=600,
        ge=1,
        description="Upper bound of the delay, which doubles with each restart and counts from the restart before; "
        "also how long the connector must stay Ready after the last restart for the count to start again.",
    )


class AutoRestart(CamelModel):
    """Restart failed connectors and tasks with a doubling delay, like Strimzi's autoRestart."""

    enabled: bool = Field(default=True, description="Restart failed connectors/tasks.")
    max_restarts: int | None = Field(
        default=None, ge=0, description="Consecutive restarts before giving up; unset = no limit."
    )
    backoff: RestartBackoff = Field(default_factory=RestartBackoff, description="Restart delays.")


class OnCreate(StrEnum):
    RESUME = "resume"
    CLEAR = "clear"
    SET = "set"


class SetTo(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"


class OnCreateState(StrEnum):
    """Where the offsets a new connector starts from are (``status.offsetsOnCreate.state``)."""

    #: clear, set, rename: the OffsetReset (or the carry-over) that applies them is under way
    APPLYING = "Applying"
    APPLIED = "Applied"
    FAILED = "Failed"
    #: resume: nothing to apply, the connector kept the offsets it had
    RESUMED = "Resumed"


class RenameFrom(CamelModel):
    """The connector a renamed one takes over from."""

    connector: str = Field(
        min_length=1,
        max_length=1000,
        description="The old connector's name in Kafka Connect; it must be handed over by a Connector object of "
        "this namespace (by deleting that object while this one names it here).",
    )


class ConnectorOffsets(CamelModel):
    """Where a new connector starts, applied once: when the operator creates the connector.

    Connect keys a source's offsets by connector name and a sink's by its ``connect-<name>``
    group, so a connector created under a name used before silently resumes where the old one
    stopped. ``resume`` (the default) does that and says so in status; ``clear`` removes what an
    earlier connector of the name left; ``set`` writes the given offsets. ``clear`` and ``set``
    create the connector STOPPED (Connect 3.7+), apply the offsets through an OffsetReset owned
    by the Connector (backup, read-back from Connect and Kafka, the same crash safety), and only
    then move it to ``spec.state``. Changing this later does nothing: use an OffsetReset."""

    # What _one_way_to_set checks, at admission (timestamp_ms's calendar and range check stays there).
    model_config = rules(
        (
            f"!{given('from')} || (self.onCreate == 'resume' && !{filled('entries')} && !{given('setTo')}"
            f" && !{filled('timestamp')} && !{filled('topics')})",
            "from carries the old connector's offsets over: leave onCreate, entries and setTo unset",
        ),
        (
            f"self.onCreate != 'set' || {filled('entries')} != {given('setTo')}",
            "onCreate set needs exactly one of entries or setTo",
        ),
        (
            f"self.onCreate == 'set' || !({filled('entries')} || {given('setTo')} || {filled('timestamp')}"
            f" || {filled('topics')})",
            "entries, setTo, timestamp and topics apply to onCreate set only",
        ),
        (
            f"({given('setTo')} && self.setTo == 'timestamp') == {filled('timestamp')}",
            "setTo timestamp needs timestamp, and timestamp needs setTo timestamp",
        ),
    )

    on_create: OnCreate = Field(
        default=OnCreate.RESUME,
        description=(
            "resume: keep offsets left under this name (reported in status); clear: remove them; set: write these."
        ),
    )
    entries: list[OffsetEntry] = Field(
        default_factory=list,
        max_length=10000,
        description=(
            "onCreate set: KIP-875 entries (source partitions and offsets, or sink "
            "kafka_topic/kafka_partition/kafka_offset)."
        ),
    )
    set_to: SetTo | None = Field(
        default=None, description="onCreate set, sink connectors: earliest, latest or timestamp on the topics it reads."
    )
    timestamp: TimestampText | None = Field(
        default=None,
        description="setTo timestamp: RFC 3339 time with its offset (2026-01-31T12:00:00Z) or epoch milliseconds.",
    )
    topics: list[str] = Field(
        default_factory=list, max_length=1000, description="setTo: limit to these of the topics the sink reads."
    )
    from_: Annotated[
        RenameFrom | None,
        Field(
            alias="from",
            description="A rename: start where this old connector stopped (its offsets are carried over, then it "
            "is deleted). Leave onCreate unset.",
        ),
    ] = None

    @model_validator(mode="after")
    def _one_way_to_set(self) -> ConnectorOffsets:
        if self.from_ is not None and (
            self.on_create != OnCreate.RESUME or self.entries or self.set_to or self.timestamp or self.topics
        ):
            raise ValueError("from carries the old connector's offsets over: leave onCreate, entries and setTo unset")
        given = bool(self.entries) + (self.set_to is not None)
        if self.on_create == OnCreate.SET and given != 1:
            raise ValueError("onCreate set needs exactly one of entries or setTo")
        if self.on_create != OnCreate.SET and (given or self.timestamp or self.topics):
            raise ValueError(f"entries, setTo, timestamp and topics apply to onCreate set, not {self.on_create}")
        if (self.set_to == SetTo.TIMESTAMP) != bool(self.timestamp):
            raise ValueError("setTo timestamp needs timestamp, and timestamp needs setTo timestamp")
        if self.timestamp:
            timestamp_ms(self.timestamp)
        return self


def _no_key(field: str, keys: Iterable[str], *, prefixes: bool = False) -> str:
    """CEL: no key of the map ``field`` is one of ``keys`` (or, with ``prefixes``, starts with one)."""
    test = " || ".join(f"k.startsWith('{p}')" for p in sorted(keys)) if prefixes else f"k in {sorted(keys)}"
    return f"!has(self.{field}) || !self.{field}.exists(k, {test})"


class ConnectorSpec(CamelModel):
    """A Kafka Connect connector whose config and running state connectops owns."""

    # What the validators below check without the worker, at admission (the version ranges'
    # syntax is checked by the operator only).
    model_config = rules(
        (
            # UNADDRESSABLE_CHARACTERS and the Cc category (U+0000-U+001F, U+007F-U+009F)
            f"!{given('connectorName')} || !(self.connectorName in ['.', '..'] || "
            r"self.connectorName.matches(r'[/\\%\x00-\x1f\x7f-\x{9f}]'))",
            "connector name must not contain '/', '\\', '%' or control characters, nor be '.' or '..': "
            "Kafka Connect's REST API cannot address such a name once created",
        ),
        (
            _no_key("config", OWNED_KEYS),
            "config keys name, connector.class and tasks.max are set by spec fields (connectorName/class/tasksMax)",
        ),
        (
            _no_key("config", VERSION_KEYS),
            "config keys *.plugin.version are set by spec.pluginVersion and spec.converterVersions",
        ),
        (
            _no_key("config", OVERRIDE_PREFIXES.values(), prefixes=True),
            "config keys producer.override.*, consumer.override.* and admin.override.* belong in "
            "producerOverrides/consumerOverrides/adminOverrides",
        ),
        *(
            (
                f"!{given('converterVersions')} || !{given(f'converterVersions.{which}')} || "
                f"(has(self.config) && '{key}' in self.config)",
                f"converterVersions.{which} needs the converter class in config.{key}",
            )
            for which, key in CONVERTER_CLASS_KEYS.items()
        ),
        (
            "!has(self.configFrom) || !has(self.config) || !self.configFrom.exists(k, k in self.config)",
            "a key is set in both config and configFrom",
        ),
        (
            _no_key("configFrom", OWNED_KEYS | VERSION_KEYS),
            "configFrom keys name, connector.class, tasks.max and *.plugin.version are set by spec fields",
        ),
    )

    cluster_ref: LocalObjectRef = Field(description="The ConnectCluster running this connector.")
    connector_name: str | None = Field(
        default=None,
        min_length=1,
        description="Name in Kafka Connect; defaults to metadata.name. Any characters allowed.",
    )
    connector_class: Annotated[str, Field(alias="class", min_length=1, description="connector.class")]
    tasks_max: int = Field(default=1, ge=1, description="tasks.max")
    plugin_version: PluginVersionText | None = Field(
        default=None,
        description=(
            "connector.plugin.version (Kafka Connect 4.1+, KIP-891): which installed version of the class runs. "
            "A version (exact: 1.0 means [1.0]), a Maven range such as [1.0,2.0), or latest; unset: the newest. "
            "Checked against the worker's plugin list before anything is applied."
        ),
    )
    converter_versions: ConverterVersions | None = Field(
        default=None,
        description="key/value/header.converter.plugin.version (KIP-891), for the converter classes set in config.",
    )
    config: dict[str, ConfigValue] = Field(
        default_factory=dict,
        max_length=MAX_KEYS,
        description=(
            "Connector configuration. name, connector.class, tasks.max and *.override.* keys "
            "are set by dedicated fields and rejected here."
        ),
    )
    config_from: dict[str, SecretValueSource] = Field(
        default_factory=dict,
        max_length=MAX_KEYS,
        description="Configuration values read from Secrets (any key, overrides included).",
    )
    producer_overrides: ProducerOverrides | None = Field(default=None, description="Rendered as producer.override.*")
    consumer_overrides: dict[str, ConfigValue] = Field(
        default_factory=dict, max_length=MAX_KEYS, description="Rendered as consumer.override.*"
    )
    admin_overrides: dict[str, ConfigValue] = Field(
        default_factory=dict, max_length=MAX_KEYS, description="Rendered as admin.override.*"
    )
    state: DesiredState = Field(default=DesiredState.RUNNING, description="running|paused|stopped")
    offsets: ConnectorOffsets | None = Field(
        default=None, description="Where the connector starts when the operator creates it (once)."
    )
    auto_restart: AutoRestart = Field(default_factory=AutoRestart, description="Failed connector/task restarts.")
    check: CheckSpec = Field(default_factory=CheckSpec, description="Lag and balance check after changes.")
    offsets_managed_externally: bool = Field(
        default=False,
        description=(
            "The connector keeps its position outside Kafka too (a sink that recovers it from the "
            "target system, say): an OffsetReset of it is refused unless it sets "
            "acknowledgeExternalOffsets."
        ),
    )

    @field_validator("connector_name")
    @classmethod
    def _addressable_name(cls, name: str | None) -> str | None:
        if name is not None:
            unaddressable_name(name)
        return name

    @field_validator("config")
    @classmethod
    def _no_owned_keys(cls, config: dict[str, ConfigValue]) -> dict[str, ConfigValue]:
        owned = sorted(k for k in config if k in OWNED_KEYS)
        if owned:
            raise ValueError(f"config keys {owned} are set by spec fields (connectorName/class/tasksMax)")
        versions = sorted(k for k in config if k in VERSION_KEYS)
        if versions:
            raise ValueError(f"config keys {versions} are set by spec.pluginVersion and spec.converterVersions")
        prefixed = sorted(k for k in config if any(k.startswith(p) for p in OVERRIDE_PREFIXES.values()))
        if prefixed:
            raise ValueError(f"config keys {prefixed} belong in producerOverrides/consumerOverrides/adminOverrides")
        return config

    _valid_plugin_version = field_validator("plugin_version")(version_requirement)

    @model_validator(mode="after")
    def _converter_versions_name_a_class(self) -> ConnectorSpec:
        # the version is checked against the class the connector names; the worker's default
        # converter is not visible over REST
        if self.converter_versions is not None:
            for which, key in CONVERTER_CLASS_KEYS.items():
                if getattr(self.converter_versions, which) is not None and key not in self.config:
                    raise ValueError(f"converterVersions.{which} needs the converter class in config.{key}")
        return self

    @model_validator(mode="after")
    def _secret_keys_not_duplicated(self) -> ConnectorSpec:
        both = sorted(set(self.config_from) & set(self.config))
        if both:
            raise ValueError(f"keys {both} are set in both config and configFrom")
        owned = sorted(k for k in self.config_from if k in OWNED_KEYS | VERSION_KEYS)
        if owned:
            raise ValueError(f"configFrom keys {owned} are set by spec fields")
        return self


class TaskStatus(StatusModel):
    id: int = Field(description="Task id.")
    state: str = Field(description="RUNNING, PAUSED, FAILED, UNASSIGNED…")
    worker_id: str | None = Field(default=None, description="Worker running the task.")
    version: str | None = Field(default=None, description="Plugin version the task runs, as Connect reports it.")
    trace: str | None = Field(default=None, description="First line of the failure trace.")


class AutoRestartStatus(StatusModel):
    count: int = Field(default=0, description="Consecutive automatic restarts.")
    last_restart_time: str | None = Field(default=None, description="When the last one happened.")


class ClaimRecord(StatusModel):
    """Where this object's claim on its connector is recorded: a Lease in the operator's own
    namespace, which no tenant can write, named after the Kafka cluster and the connector (see
    connectops.reconcilers.claims). Kept here so that the claim can be released, and stands,
    whatever happens to the ConnectCluster it was made through."""

    kafka_cluster: str = Field(description="The Kafka cluster id of the worker group the connector lives on.")
    connector: str = Field(description="The connector's name in Kafka Connect.")
    lease: str = Field(description="The Lease that records the claim (namespace/name).")


class VerbTokens(StatusModel):
    """One-shot verbs as annotations the operator never writes or removes (GitOps tools would
    see that as drift and fight it): a value acts once, when it differs from the one recorded
    here; re-applying the same manifest does nothing, a new token acts again."""

    restart: str | None = Field(default=None, description="Last connectops.io/restart value acted on.")
    restart_tasks: str | None = Field(default=None, description="Last connectops.io/restart-tasks value acted on.")


class OffsetsOnCreateStatus(StatusModel):
    """What happened to the connector's offsets when the operator created it."""

    on_create: str = Field(description="resume, clear, set or rename, as applied.")
    state: Annotated[OnCreateState, STORED_AS_TEXT] = Field(
        description="Applying, Applied or Failed (clear, set, rename); Resumed (resume)."
    )
    renamed_from: str | None = Field(default=None, description="rename: the old connector's name in Kafka Connect.")
    carried: int | None = Field(
        default=None, description="rename: partition offsets carried over from the old connector."
    )
    offset_reset: str | None = Field(default=None, description="The OffsetReset that applies them (clear, set).")
    spec_hash: str | None = Field(default=None, description="Hash of the spec.offsets applied.")
    found_partitions: int | None = Field(
        default=None, description="resume: partition offsets found under this name when the connector was created."
    )
    found: list[dict[str, Any]] = Field(
        default_factory=list, description="resume: where they stood (the first 10, KIP-875 entries)."
    )
    message: str | None = Field(default=None, description="What happened, in a sentence.")


class MirrorTopicSeen(StatusModel):
    """A source topic of a MirrorMaker 2 source connector as the last look saw it."""

    topic: str = Field(description="Topic on the source cluster.")
    topic_id: str = Field(description="Its topic ID (a re-created topic has a new one).")
    stored: dict[str, int] = Field(
        default_factory=dict, description="Per partition: the last offset MirrorMaker 2 had replicated."
    )
    log_end: dict[str, int] = Field(default_factory=dict, description="Per partition: the source log-end offset.")


class MirrorLoss(StatusModel):
    """Records of one source partition gone before MirrorMaker 2 replicated them."""

    topic: str = Field(description="Topic on the source cluster.")
    partition: int = Field(description="Partition.")
    reason: str = Field(description="SourceTruncated or SourceTopicRecreated.")
    first_lost: int = Field(description="First source offset lost (the one MirrorMaker 2 would replicate next).")
    lost: int = Field(description="Records lost.")
    detected_at: str = Field(description="When the operator first saw it.")
    message: str = Field(description="What happened, in a sentence.")


class MirrorLossStatus(StatusModel):
    """Silent loss between a MirrorMaker 2 source connector and its source cluster, looked for at
    every reconcile (see connectops.reconcilers.mirror_loss)."""

    topics: list[MirrorTopicSeen] = Field(default_factory=list, description="The source topics at the last look.")
    losses: list[MirrorLoss] = Field(default_factory=list, description="Losses found and not acknowledged.")
    records_lost: int = Field(default=0, description="Sum of the losses' records.")
    acknowledged: str | None = Field(
        default=None, description="Last connectops.io/acknowledge-mirror-loss value acted on (it clears the losses)."
    )
    checked_at: str | None = Field(default=None, description="When the operator last looked.")


class ConnectorStatus(StatusModel):
    observed_generation: int | None = Field(default=None, description="Last handled generation.")
    connector_name: str | None = Field(default=None, description="Name in Kafka Connect.")
    connector_state: str | None = Field(default=None, description="State reported by Connect.")
    worker_id: str | None = Field(default=None, description="Worker running the connector.")
    connector_version: str | None = Field(
        default=None,
        description="Plugin version the connector runs, as Connect reports it (Kafka Connect 4.1+, KIP-891).",
    )
    tasks: list[TaskStatus] = Field(
        default_factory=list,
        description=(
            "Task states: every task up to 50; past that the failed ones first, then the others by id, "
            "50 in all (tasksOmitted counts the rest)."
        ),
    )
    tasks_omitted: int | None = Field(
        default=None, description="Tasks Connect reported that the tasks list leaves out (it shows at most 50)."
    )
    tasks_running: str | None = Field(default=None, description="running/total, for kubectl get.")
    auto_restart: AutoRestartStatus = Field(
        default_factory=AutoRestartStatus, description="Automatic restart bookkeeping."
    )
    last_check: LastCheck | None = Field(default=None, description="The latest lag and balance check.")
    offsets_on_create: OffsetsOnCreateStatus | None = Field(
        default=None, description="What spec.offsets did when the connector was created."
    )
    last_interruption: Interruption | None = Field(
        default=None,
        description="What the last change that restarted running tasks cost: stop to first task RUNNING.",
    )
    verbs: VerbTokens = Field(
        default_factory=VerbTokens,
        description="The last connectops.io/restart and restart-tasks annotation values acted on.",
    )
    claim: ClaimRecord | None = Field(
        default=None, description="This object's recorded claim on its connector (it owns it while the claim stands)."
    )
    mirror_loss: MirrorLossStatus | None = Field(
        default=None, description="MirrorMaker 2 source connectors: records lost at the source before replication."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready, Valid, Synced, LagHealthy, PartitionsBalanced, ReconcilePaused, MirrorComplete.",
    )
