"""``GroupFailover``: move an application's consumer group from MM2's source cluster to its target.

A kind of its own, not an ``OffsetReset`` action: an OffsetReset acts on a connector (it stops
it, changes the offsets Connect keeps for it, resumes it) and is locked per connector, while a
failover acts on a consumer group that belongs to no connector (the application's), on a cluster
Connect does not own, and never stops a connector. Its checks (the group's members, MM2's group
sync, the namespace's group allowlist) and its backup (a group's offsets) are not a reset's, so
as an action it would share only a name.

The spec names the MirrorCheckpointConnector of the flow: its config on the Connect worker gives
the aliases, the replication policy's separator, where the offset-syncs topic lives and whether
MM2 syncs group offsets itself, so none of them can disagree with what MM2 runs.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final

from pydantic import Field, model_validator

from connectops.models.admission import filled, rules
from connectops.models.base import STORED_AS_TEXT, CamelModel, Condition, LocalObjectRef, StatusModel
from connectops.models.bounds import STATUS_SAMPLE
from connectops.models.offset_reset import KafkaClusterAccess


class FailoverAction(StrEnum):
    FAILOVER = "failover"
    """Translate the group's offsets on the source through MM2's checkpoints and write them on the target."""
    FAILBACK = "failback"
    """Move the group back: its offsets on the target's remote topics, translated through the flow's syncs."""
    RESTORE = "restore"
    """Write back the group's target offsets from a backup an earlier failover took."""


class FailoverPhase(StrEnum):
    PLANNED = "Planned"
    SUCCEEDED = "Succeeded"
    REFUSED = "Refused"
    FAILED = "Failed"


#: phases after which the object does nothing more (it runs once, as first written)
FINAL_PHASES: Final = frozenset(
    {FailoverPhase.PLANNED, FailoverPhase.SUCCEEDED, FailoverPhase.REFUSED, FailoverPhase.FAILED}
)

#: the checkpoint age limit's default: ten times MM2's default emit.checkpoints.interval.seconds
DEFAULT_MAX_CHECKPOINT_AGE_SECONDS: Final = 600


class GroupFailoverSpec(CamelModel):
    """Fail a consumer group over from MirrorMaker 2's source cluster to its target (or restore it)."""

    model_config = rules(
        (f"self.action != 'restore' || {filled('restoreFrom')}", "action restore needs restoreFrom"),
        immutable="a GroupFailover runs once as first written: create a new one for another move",
    )

    group: str = Field(min_length=1, max_length=255, description="The consumer group to move.")
    action: FailoverAction = Field(default=FailoverAction.FAILOVER, description="failover or restore.")
    cluster_ref: LocalObjectRef = Field(description="The ConnectCluster running the MirrorCheckpointConnector.")
    checkpoint_connector: str = Field(
        min_length=1, description="The MirrorCheckpointConnector of the flow (its name on Connect)."
    )
    source_cluster: KafkaClusterAccess = Field(description="MM2's source cluster (the flow's, also for a failback).")
    target_cluster: KafkaClusterAccess = Field(description="MM2's target cluster (the flow's, also for a failback).")
    topics: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="Source topics to move the group's offsets of (default: every topic it committed).",
    )
    max_checkpoint_age_seconds: int = Field(
        default=DEFAULT_MAX_CHECKPOINT_AGE_SECONDS,
        ge=1,
        le=7 * 86400,
        description=(
            "Refuse when a partition's checkpoint trails the group's committed offset and is older than this. "
            "A checkpoint at the committed offset is exact however old (MM2 writes one only when it moves)."
        ),
    )
    dry_run: bool = Field(default=False, description="Publish the plan in status and stop there.")
    restore_from: str | None = Field(
        default=None, min_length=1, description="For restore: the backup ConfigMap an earlier failover made."
    )

    @model_validator(mode="after")
    def _coherent(self) -> GroupFailoverSpec:
        if self.action is FailoverAction.RESTORE and not self.restore_from:
            raise ValueError("action restore needs restoreFrom")
        return self


class FailoverPartition(StatusModel):
    """One partition of the plan. "From" is the cluster the group leaves (MM2's source for a
    failover, its target for a failback), "to" the one it moves to."""

    topic: str = Field(description="The topic the group read (a failover: <topic>; a failback: a.<topic>).")
    partition: int = Field(description="Partition.")
    source_offset: int = Field(description="The group's committed offset on the cluster it leaves.")
    target_topic: str = Field(description="The topic it reads where it moves (a failover: a.<topic>).")
    target_offset: int = Field(description="The translated offset written there.")
    checkpoint_upstream: int | None = Field(
        default=None, description="A failover: the source offset the checkpoint translated."
    )
    checkpoint_age_seconds: float | None = Field(
        default=None, description="A failover: how old the checkpoint was when planned."
    )
    reread: int | None = Field(
        default=None,
        description="Records the group reads again on the target (at most; null when no offset sync tells).",
    )


class FailoverPlan(StatusModel):
    partitions: int = Field(default=0, description="Partitions moved.")
    reread_total: int | None = Field(
        default=None, description="Records read again on the target, all partitions (null if one is unknown)."
    )
    checkpoints_topic: str = Field(default="", description="Where the translation came from.")
    offset_syncs_topic: str = Field(default="", description="What the reread estimate came from.")
    sample: list[FailoverPartition] = Field(
        default_factory=list, description=f"The first {STATUS_SAMPLE} partitions (topic, partition order)."
    )


class GroupFailoverStatus(StatusModel):
    phase: Annotated[FailoverPhase, STORED_AS_TEXT] | None = Field(
        default=None, description="Planned (dry run), Succeeded, Refused or Failed."
    )
    observed_generation: int | None = Field(default=None, description="Generation acted upon.")
    message: str | None = Field(default=None, description="What was done, or why nothing was.")
    plan: FailoverPlan | None = Field(default=None, description="What was (or would be) written.")
    backup: str | None = Field(default=None, description="ConfigMap holding the group's previous target offsets.")
    written: int | None = Field(default=None, description="Partitions written on the target and read back.")
    conditions: list[Condition] = Field(default_factory=list, description="Succeeded.")
