"""The OffsetReset planner with plain data: every action x strategy x connector kind."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from pydantic import ValidationError

from connectops.models.offset_reset import (
    OffsetEntry,
    OffsetResetSpec,
    OffsetsTopicLocation,
    ResetAction,
    ResetStrategy,
)
from connectops.planning.connector import capabilities_for
from connectops.planning.offset_reset import (
    ALL_STEPS,
    DEFAULT_FLUSH_INTERVAL_MS,
    ConnectorKind,
    MirrorFlow,
    PlanError,
    Step,
    TargetConnector,
    backup_predates_stop,
    connector_kind,
    diff_offsets,
    dry_run_caveat,
    expected_after,
    mirror_source_syncs,
    offset_syncs_topic,
    plan_reset,
    restore_call,
    restore_entries,
    resume_state,
    shares_syncs_topic,
    sink_group,
    step_rank,
    untouched,
    validate_entries,
)

V43, V35, V34 = capabilities_for("4.3.0"), capabilities_for("3.5.2"), capabilities_for("3.4.0")

SINK_ENTRY = {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}
SOURCE_ENTRY = {"partition": {"filename": "/f"}, "offset": {"position": 10}}
MM2_SOURCE_ENTRY = {"partition": {"cluster": "a", "topic": "t", "partition": 1}, "offset": {"offset": 9}}
MM2_CKPT_ENTRY = {"partition": {"group": "g", "topic": "t", "partition": 0}, "offset": {"offset": 0}}
MM2_HB_ENTRY = {"partition": {"sourceClusterAlias": "a", "targetClusterAlias": "b"}, "offset": {"offset": 0}}

ENTRY_FOR = {
    ConnectorKind.SINK: SINK_ENTRY,
    ConnectorKind.SOURCE: SOURCE_ENTRY,
    ConnectorKind.MIRROR_SOURCE: MM2_SOURCE_ENTRY,
    ConnectorKind.MIRROR_CHECKPOINT: MM2_CKPT_ENTRY,
    ConnectorKind.MIRROR_HEARTBEAT: MM2_HB_ENTRY,
}


def target(kind: ConnectorKind, name: str = "c", state: str = "RUNNING", managed: str | None = None) -> TargetConnector:
    return TargetConnector(name=name, kind=kind, state=state, config={}, managed_state=managed)


def spec_for(action: ResetAction, kind: ConnectorKind, strategy: ResetStrategy, **kw: Any) -> OffsetResetSpec:
    data: dict[str, Any] = {"connectorRef": {"name": "c"}, "action": str(action), "strategy": str(strategy)}
    if action is ResetAction.ALTER:
        data["offsets"] = [ENTRY_FOR[kind]]
    if action is ResetAction.TO_TIMESTAMP:
        data["timestamp"] = "2026-01-01T00:00:00Z"
    if action is ResetAction.RESTORE:
        data["restoreFrom"] = "backup-cm"
    return OffsetResetSpec.model_validate({**data, **kw})


@pytest.mark.parametrize(
    ("action", "strategy", "kind"),
    list(itertools.product(ResetAction, ResetStrategy, ConnectorKind)),
    ids=str,
)
def test_matrix(action: ResetAction, strategy: ResetStrategy, kind: ConnectorKind) -> None:
    spec = spec_for(action, kind, strategy)
    sink_only = action in (ResetAction.TO_EARLIEST, ResetAction.TO_LATEST, ResetAction.TO_TIMESTAMP)
    if sink_only and kind is not ConnectorKind.SINK:
        with pytest.raises(PlanError, match="applies to sink"):
            plan_reset(spec, [target(kind)], V43, has_kafka_access=True)
        return
    plan = plan_reset(spec, [target(kind)], V43, has_kafka_access=True)
    expected_strategy = ResetStrategy.REST if strategy is ResetStrategy.AUTO else strategy
    assert plan.strategy is expected_strategy
    # fixed order: the stop before the backup (a stopped connector's offsets no longer move),
    # the backup strictly before the reset, resume after reset
    assert plan.steps == [s for s in ALL_STEPS if s is not Step.OFFSET_SYNCS]
    assert plan.steps.index(Step.STOP) < plan.steps.index(Step.BACKUP) < plan.steps.index(Step.RESET)
    assert plan.steps.index(Step.RESET) < plan.steps.index(Step.RESUME) < plan.steps.index(Step.UNLOCK)
    if action is ResetAction.ALTER:
        assert [e.model_dump(mode="json") for e in plan.entries["c"]] == [ENTRY_FOR[kind]]


def test_auto_picks_tombstones_on_35_and_refuses_older() -> None:
    spec = spec_for(ResetAction.RESET, ConnectorKind.SOURCE, ResetStrategy.AUTO)
    assert (
        plan_reset(spec, [target(ConnectorKind.SOURCE)], V35, has_kafka_access=True).strategy is ResetStrategy.TOMBSTONE
    )
    with pytest.raises(PlanError, match=r"spec\.kafka"):
        plan_reset(spec, [target(ConnectorKind.SOURCE)], V35, has_kafka_access=False)
    with pytest.raises(PlanError, match=r"3\.5"):
        plan_reset(spec, [target(ConnectorKind.SOURCE)], V34, has_kafka_access=True)
    rest = spec_for(ResetAction.RESET, ConnectorKind.SOURCE, ResetStrategy.REST)
    with pytest.raises(PlanError, match=r"3\.6"):
        plan_reset(rest, [target(ConnectorKind.SOURCE)], V35, has_kafka_access=True)


@pytest.mark.parametrize(
    ("kind", "entry", "fragment"),
    [
        (
            ConnectorKind.SINK,
            {"partition": {"kafka_topic": "t"}, "offset": {"kafka_offset": 1}},
            "kafka_partition",
        ),
        (
            ConnectorKind.SINK,
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": -1}},
            "kafka_offset",
        ),
        (
            ConnectorKind.SINK,
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"offset": 1}},
            "kafka_offset",
        ),
        (
            ConnectorKind.MIRROR_SOURCE,
            {"partition": {"cluster": "a", "topic": "t"}, "offset": {"offset": 1}},
            "MirrorSource partition",
        ),
        (
            ConnectorKind.MIRROR_SOURCE,
            {"partition": {"cluster": "a", "topic": "t", "partition": 0}, "offset": {"offset": "9"}},
            "MirrorSource offset",
        ),
        (
            ConnectorKind.MIRROR_CHECKPOINT,
            {"partition": {"group": "g", "topic": "t", "partition": 0}, "offset": {"offset": 5}},
            "only be reset",
        ),
        (
            ConnectorKind.MIRROR_HEARTBEAT,
            {"partition": {"sourceClusterAlias": "a", "targetClusterAlias": "b"}, "offset": {"offset": 1}},
            "only be reset",
        ),
        (ConnectorKind.SOURCE, {"partition": {}, "offset": {"x": 1}}, "empty partition"),
    ],
)
def test_bad_entries_rejected_before_anything_stops(kind: ConnectorKind, entry: dict[str, Any], fragment: str) -> None:
    problems = validate_entries(kind, [OffsetEntry.model_validate(entry)])
    assert any(fragment in p for p in problems), problems
    spec = OffsetResetSpec.model_validate({"connectorRef": {"name": "c"}, "action": "alter", "offsets": [entry]})
    with pytest.raises(PlanError):
        plan_reset(spec, [target(kind)], V43, has_kafka_access=True)


def test_null_offsets_allowed_for_rest_but_not_for_sink_tombstones() -> None:
    entry = {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": None}
    rest = OffsetResetSpec.model_validate({"connectorRef": {"name": "c"}, "action": "alter", "offsets": [entry]})
    assert plan_reset(rest, [target(ConnectorKind.SINK)], V43, has_kafka_access=True)
    tomb = rest.model_copy(update={"strategy": ResetStrategy.TOMBSTONE})
    with pytest.raises(PlanError, match="per-partition"):
        plan_reset(tomb, [target(ConnectorKind.SINK)], V43, has_kafka_access=True)


def mm2_spec(**mm2: Any) -> OffsetResetSpec:
    return OffsetResetSpec.model_validate(
        {
            "clusterRef": {"name": "k"},
            "action": "reset",
            "mirrorMaker2": {
                "sourceConnector": "src",
                "checkpointConnector": "ckpt",
                "heartbeatConnector": "hb",
                "sourceAlias": "us",
                "targetAlias": "eu",
                **mm2,
            },
        }
    )


MM2_TARGETS = [
    target(ConnectorKind.MIRROR_SOURCE, "src"),
    target(ConnectorKind.MIRROR_CHECKPOINT, "ckpt"),
    target(ConnectorKind.MIRROR_HEARTBEAT, "hb"),
]


def test_mm2_reset_includes_offset_syncs_cleanup_on_the_right_cluster() -> None:
    plan = plan_reset(mm2_spec(), MM2_TARGETS, V43, has_kafka_access=True)
    assert Step.OFFSET_SYNCS in plan.steps
    assert plan.steps.index(Step.RESET) < plan.steps.index(Step.OFFSET_SYNCS) < plan.steps.index(Step.RESUME)
    assert plan.offset_syncs_topic == "mm2-offset-syncs.eu.internal"
    assert plan.offset_syncs_on == "source"
    on_target = plan_reset(
        mm2_spec(offsetSyncsTopicLocation="target", offsetSyncs="truncate"),
        MM2_TARGETS,
        V43,
        has_kafka_access=True,
    )
    assert on_target.offset_syncs_topic == "mm2-offset-syncs.us.internal"
    assert on_target.offset_syncs_on == "target"
    skipped = plan_reset(mm2_spec(offsetSyncs="none"), MM2_TARGETS, V43, has_kafka_access=True)
    assert Step.OFFSET_SYNCS not in skipped.steps


@pytest.mark.parametrize(
    ("location", "sep", "enabled", "expected"),
    [
        (OffsetsTopicLocation.SOURCE, ".", True, "mm2-offset-syncs.B.internal"),
        (OffsetsTopicLocation.TARGET, ".", True, "mm2-offset-syncs.A.internal"),
        (OffsetsTopicLocation.SOURCE, "_", True, "mm2-offset-syncs_B_internal"),
        (OffsetsTopicLocation.SOURCE, "_", False, "mm2-offset-syncs.B.internal"),
    ],
)
def test_offset_syncs_topic_name(location: OffsetsTopicLocation, sep: str, enabled: bool, expected: str) -> None:
    assert offset_syncs_topic("A", "B", location, sep, enabled) == expected


def test_mm2_alter_routes_entries_by_partition_shape() -> None:
    spec = OffsetResetSpec.model_validate(
        {
            "clusterRef": {"name": "k"},
            "action": "alter",
            "offsets": [MM2_SOURCE_ENTRY, MM2_CKPT_ENTRY, MM2_HB_ENTRY],
            "mirrorMaker2": {
                "sourceConnector": "src",
                "checkpointConnector": "ckpt",
                "heartbeatConnector": "hb",
                "sourceAlias": "a",
                "targetAlias": "b",
            },
        }
    )
    plan = plan_reset(spec, MM2_TARGETS, V43, has_kafka_access=True)
    assert {k: len(v) for k, v in plan.entries.items()} == {"src": 1, "ckpt": 1, "hb": 1}


def test_spec_coherence_rules() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        OffsetResetSpec.model_validate({"action": "reset"})
    with pytest.raises(ValidationError, match="clusterRef"):
        OffsetResetSpec.model_validate({"connectorName": "x"})
    with pytest.raises(ValidationError, match="non-empty offsets"):
        OffsetResetSpec.model_validate({"connectorRef": {"name": "c"}, "action": "alter"})
    with pytest.raises(ValidationError, match="timestamp"):
        OffsetResetSpec.model_validate({"connectorRef": {"name": "c"}, "action": "toTimestamp"})
    with pytest.raises(ValidationError, match="restoreFrom"):
        OffsetResetSpec.model_validate({"connectorRef": {"name": "c"}, "action": "restore"})


def test_resume_state() -> None:
    from connectops.models.offset_reset import ResumePolicy

    assert resume_state(ResumePolicy.DESIRED, target(ConnectorKind.SOURCE, managed="paused")) == "paused"
    assert resume_state(ResumePolicy.DESIRED, target(ConnectorKind.SOURCE, state="PAUSED")) == "paused"
    assert resume_state(ResumePolicy.DESIRED, target(ConnectorKind.SOURCE, state="FAILED")) == "running"
    assert resume_state(ResumePolicy.STOPPED, target(ConnectorKind.SOURCE, managed="running")) == "stopped"


def test_kinds_and_groups() -> None:
    assert (
        connector_kind("org.apache.kafka.connect.mirror.MirrorSourceConnector", "source") is ConnectorKind.MIRROR_SOURCE
    )
    assert (
        connector_kind("org.apache.kafka.connect.mirror.MirrorCheckpointConnector", "source")
        is ConnectorKind.MIRROR_CHECKPOINT
    )
    assert connector_kind("x.FileStreamSinkConnector", "sink") is ConnectorKind.SINK
    assert connector_kind("x.FileStreamSourceConnector", "source") is ConnectorKind.SOURCE
    assert sink_group("s", {}) == "connect-s"
    assert sink_group("s", {"consumer.override.group.id": "g"}) == "g"


def test_expected_after_and_diff() -> None:
    before = [
        SINK_ENTRY,
        {"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": {"kafka_offset": 7}},
    ]
    assert expected_after(ResetAction.RESET, [], before) == []
    altered = expected_after(
        ResetAction.ALTER,
        [
            {"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": None},
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 1}},
        ],
        before,
    )
    assert altered == [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 1}}]
    assert diff_offsets(altered, altered) == []
    assert diff_offsets(altered, before)


def _sink(topic: str, partition: int, offset: int | None) -> dict[str, Any]:
    return {
        "partition": {"kafka_topic": topic, "kafka_partition": partition},
        "offset": None if offset is None else {"kafka_offset": offset},
    }


@pytest.mark.parametrize("action", [ResetAction.TO_LATEST, ResetAction.TO_EARLIEST, ResetAction.TO_TIMESTAMP])
def test_set_to_keeps_every_partition_it_does_not_name(action: ResetAction) -> None:
    """The defect this replaced: set-to was "exactly the requested partitions", so a reset of one
    topic of a two-topic sink verified fine while the other topic had lost its offsets."""
    before = [_sink("orders", 0, 3), _sink("payments", 0, 2), _sink("payments", 1, 4)]
    after = expected_after(action, [_sink("orders", 0, 9)], before)
    assert after == [_sink("orders", 0, 9), _sink("payments", 0, 2), _sink("payments", 1, 4)]
    # a read-back that lost payments is a difference, not a success
    assert diff_offsets(after, [_sink("orders", 0, 9)])


def test_restore_is_exactly_the_backup_in_one_patch() -> None:
    saved = [_sink("t", 0, 5), _sink("t", 1, 6)]
    current = [_sink("t", 0, 9), _sink("t", 2, 1)]
    patch = restore_entries(saved, current)
    # saved offsets, and null for the partition the backup did not have: no DELETE needed first
    assert patch == [_sink("t", 0, 5), _sink("t", 1, 6), _sink("t", 2, None)]
    assert expected_after(ResetAction.RESTORE, patch, current) == saved
    assert restore_entries([], []) == []
    assert untouched([_sink("t", 0, 1)], current) == [_sink("t", 2, 1)]


def test_restore_call() -> None:
    current = [_sink("t", 0, 1), _sink("t", 2, 1)]
    assert restore_call([_sink("t", 0, 5)], current) == ("patch", [_sink("t", 0, 5), _sink("t", 2, None)])
    # a backup of a connector that held nothing: clear it (Connect refuses a PATCH without offsets)
    assert restore_call([], current) == ("delete", [])
    assert restore_call([_sink("t", 0, None)], current) == ("delete", [])
    assert restore_call([], []) == ("none", [])
    assert restore_call([], [_sink("t", 0, None)]) == ("none", [])


def test_steps_rank_in_the_order_they_run() -> None:
    old = ["lock", "inspect", "backup", "stop", "reset", "offsetSyncs", "resume", "verify", "unlock"]
    assert sorted(old, key=step_rank) == [str(s) for s in ALL_STEPS]
    assert [str(s) for s in ALL_STEPS][:4] == ["lock", "inspect", "stop", "backup"]
    assert step_rank("unknown") == len(ALL_STEPS)


@pytest.mark.parametrize(
    ("states", "after_stop", "changed", "again"),
    [
        ({"backup": "Done", "stop": "Pending", "reset": "Pending"}, False, False, True),
        ({"backup": "Done", "stop": "Running", "reset": "Pending"}, False, False, True),
        ({"backup": "Done", "stop": "Done", "reset": "Running"}, False, False, True),  # no call made yet
        ({"backup": "Done", "stop": "Done", "reset": "Running"}, False, True, False),  # a call made: keep it
        ({"backup": "Done", "stop": "Done", "reset": "Done"}, False, False, False),
        ({"backup": "Done", "stop": "Done", "reset": "Pending"}, True, False, False),  # read after the stop
        ({"backup": "Skipped", "stop": "Skipped", "reset": "Skipped"}, False, False, False),  # a dry run
        ({"backup": "Pending", "stop": "Pending"}, False, False, False),
    ],
)
def test_a_backup_taken_before_the_stop_is_taken_again_while_nothing_changed(
    states: dict[str, str], after_stop: bool, changed: bool, again: bool
) -> None:
    assert backup_predates_stop(states, backup_read_after_stop=after_stop, changed=changed) is again


def test_a_dry_run_says_its_figures_may_trail() -> None:
    text = dry_run_caveat(DEFAULT_FLUSH_INTERVAL_MS)
    assert "as the connector last committed them" in text
    assert "(offset.flush.interval.ms, 60 s)" in text
    assert "(offset.flush.interval.ms, 1.5 s)" in dry_run_caveat(1500)


SOURCE_MM2 = {
    "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
    "source.cluster.alias": "us",
    "target.cluster.alias": "eu",
    "source.cluster.bootstrap.servers": "us-1:9092,us-2:9092",
}


def test_mirror_source_syncs_topic_from_config_with_mm2_defaults() -> None:
    assert mirror_source_syncs(SOURCE_MM2) == ("mm2-offset-syncs.eu.internal", frozenset({"us-1:9092", "us-2:9092"}))
    assert mirror_source_syncs({})[0] == "mm2-offset-syncs.target.internal"
    on_target = {**SOURCE_MM2, "offset-syncs.topic.location": "target", "target.cluster.bootstrap.servers": "eu:9"}
    assert mirror_source_syncs(on_target) == ("mm2-offset-syncs.us.internal", frozenset({"eu:9"}))
    assert shares_syncs_topic(SOURCE_MM2, "mm2-offset-syncs.eu.internal", "us-2:9092")
    assert not shares_syncs_topic(SOURCE_MM2, "mm2-offset-syncs.eu.internal", "elsewhere:9092")
    assert not shares_syncs_topic(SOURCE_MM2, "mm2-offset-syncs.ap.internal", "us-1:9092")
    # unknown bootstrap on either side: counted as shared (a false "shared" only asks to choose)
    assert shares_syncs_topic(
        {k: v for k, v in SOURCE_MM2.items() if "bootstrap" not in k}, "mm2-offset-syncs.eu.internal", "x:1"
    )


def test_mm2_default_cleanup_refuses_when_other_flows_share_the_topic() -> None:
    flows = [MirrorFlow("other", "other-obj"), MirrorFlow("foreign")]
    with pytest.raises(PlanError) as refused:
        plan_reset(mm2_spec(offsetSyncs="auto"), MM2_TARGETS, V43, has_kafka_access=True, other_flows=flows)
    assert "2 other MirrorSourceConnector flow(s)" in str(refused.value)
    assert "other (Connector other-obj), 1 not managed in this namespace" in str(refused.value)
    alone = plan_reset(mm2_spec(offsetSyncs="auto"), MM2_TARGETS, V43, has_kafka_access=True)
    assert alone.offset_syncs_cleanup == "delete"
    explicit = plan_reset(mm2_spec(offsetSyncs="delete"), MM2_TARGETS, V43, has_kafka_access=True, other_flows=flows)
    assert explicit.offset_syncs_cleanup == "delete"
    assert explicit.summary()["offsetSyncsOtherFlows"] == "other (Connector other-obj), 1 not managed in this namespace"
    kept = plan_reset(mm2_spec(offsetSyncs="keep"), MM2_TARGETS, V43, has_kafka_access=True, other_flows=flows)
    assert Step.OFFSET_SYNCS not in kept.steps


def test_external_offsets_need_acknowledgement() -> None:
    external = [TargetConnector("s", ConnectorKind.SINK, "RUNNING", {}, offsets_external=True)]
    spec = {"connectorName": "s", "clusterRef": {"name": "c"}, "action": "reset"}
    with pytest.raises(PlanError, match="acknowledgeExternalOffsets"):
        plan_reset(OffsetResetSpec.model_validate(spec), external, V43, has_kafka_access=True)
    dry = plan_reset(OffsetResetSpec.model_validate({**spec, "dryRun": True}), external, V43, has_kafka_access=True)
    assert "offsetsManagedExternally" in dry.warnings[0]
    acked = plan_reset(
        OffsetResetSpec.model_validate({**spec, "acknowledgeExternalOffsets": True}),
        external,
        V43,
        has_kafka_access=True,
    )
    assert acked.summary()["warnings"] == acked.warnings
