"""The MirrorMaker 2 reset plan checked against the MirrorSourceConnector's own config."""

from __future__ import annotations

from typing import Any

import pytest

from connectops.models.offset_reset import OffsetResetSpec
from connectops.planning.connector import capabilities_for
from connectops.planning.offset_reset import ConnectorKind, PlanError, TargetConnector, plan_reset

V43 = capabilities_for("4.3.0")
SOURCE_CONFIG = {
    "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
    "source.cluster.alias": "a",
    "target.cluster.alias": "b",
}


def targets(**source_config: str) -> list[TargetConnector]:
    return [
        TargetConnector("src", ConnectorKind.MIRROR_SOURCE, "RUNNING", {**SOURCE_CONFIG, **source_config}),
        TargetConnector("ckpt", ConnectorKind.MIRROR_CHECKPOINT, "RUNNING", {}),
    ]


def spec(**extra: Any) -> OffsetResetSpec:
    mm2 = {"sourceConnector": "src", "checkpointConnector": "ckpt", "sourceAlias": "a", "targetAlias": "b"}
    mm2.update(extra.pop("mirrorMaker2", {}))
    return OffsetResetSpec.model_validate(
        {"clusterRef": {"name": "k"}, "action": "reset", "mirrorMaker2": {**mm2, "offsetSyncs": "delete"}, **extra}
    )


def test_spec_and_connector_agree_on_the_offset_syncs_topic() -> None:
    plan = plan_reset(spec(), targets(), V43, has_kafka_access=True)
    assert plan.offset_syncs_topic == "mm2-offset-syncs.b.internal"
    located = plan_reset(
        spec(mirrorMaker2={"offsetSyncsTopicLocation": "target"}),
        targets(**{"offset-syncs.topic.location": "target"}),
        V43,
        has_kafka_access=True,
    )
    assert located.offset_syncs_topic == "mm2-offset-syncs.a.internal"


@pytest.mark.parametrize(
    ("mm2", "config", "theirs"),
    [
        # the aliases swapped in the spec: the reset would clean the b -> a flow's topic
        ({"sourceAlias": "b", "targetAlias": "a"}, {}, "mm2-offset-syncs.b.internal on the source"),
        # the connector keeps its syncs on the target, the spec looks on the source
        ({}, {"offset-syncs.topic.location": "target"}, "mm2-offset-syncs.a.internal on the target"),
        ({}, {"replication.policy.separator": "_"}, "mm2-offset-syncs_b_internal on the source"),
    ],
)
def test_a_spec_that_contradicts_the_connector_is_refused(
    mm2: dict[str, str], config: dict[str, str], theirs: str
) -> None:
    with pytest.raises(PlanError) as refused:
        plan_reset(spec(mirrorMaker2=mm2), targets(**config), V43, has_kafka_access=True)
    assert f"src writes {theirs} cluster" in str(refused.value)


def test_alter_under_another_alias_is_said_not_refused() -> None:
    entries = [
        {"partition": {"cluster": "a", "topic": "t", "partition": 0}, "offset": {"offset": 3}},
        {"partition": {"cluster": "old", "topic": "t", "partition": 0}, "offset": {"offset": 3}},
        # removing an entry under another alias (cleaning up) is nothing to warn about
        {"partition": {"cluster": "older", "topic": "t", "partition": 0}, "offset": None},
    ]
    plan = plan_reset(spec(action="alter", offsets=entries), targets(), V43, has_kafka_access=True)
    assert plan.warnings == [
        "src replicates under source.cluster.alias a: its tasks ignore the offsets set under old "
        "(stored, and used only once the connector's alias is that one)"
    ]
    plain = plan_reset(spec(action="alter", offsets=entries[:1]), targets(), V43, has_kafka_access=True)
    assert plain.warnings == []
