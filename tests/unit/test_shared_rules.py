"""The rules the operator and the check job share (connectops_rules) give one answer on both sides.

The two packages never import each other; each applies the shared rule through its own code
(the operator's planning, the job's collection, argument parser and settings). These tests feed
both sides the same inputs and compare their answers, so a side that stops using the shared
rule, or wraps it differently, fails here. MirrorMaker 2's recognition on a real Connect worker
(connectors named unlike MM2's, known by their stored offsets) is in tests/spark/test_mm2_lag.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from connectops.models import API_VERSION
from connectops.models.checks import CheckSpec
from connectops.models.offset_reset import OffsetEntry
from connectops.planning.checks import CheckTarget, job_arguments
from connectops.planning.offset_reset import ConnectorKind as ResetKind
from connectops.planning.offset_reset import connector_kind, entry_kind, sink_group
from connectops.reconcilers.mirror_loss import is_mirror_source
from connectops_check.cli import main, parser
from connectops_check.collect import ConnectorInfo, kind_from_offsets
from connectops_check.document import Settings
from connectops_check.serialize import to_json
from connectops_check.snapshot import ConnectorKind as CheckKind
from connectops_rules import connect, mm2, thresholds

APACHE = "org.apache.kafka.connect.mirror."


def source_entry(cluster: Any = "east", topic: Any = "orders", partition: Any = 0, offset: Any = 41) -> dict[str, Any]:
    return {"partition": {"cluster": cluster, "topic": topic, "partition": partition}, "offset": {"offset": offset}}


def checkpoint_entry(offset: Any = 0) -> dict[str, Any]:
    return {"partition": {"group": "app", "topic": "orders", "partition": 2}, "offset": {"offset": offset}}


def heartbeat_entry() -> dict[str, Any]:
    return {"partition": {"sourceClusterAlias": "east", "targetClusterAlias": "west"}, "offset": {"offset": 0}}


TOMBSTONE = {"partition": {"cluster": "east", "topic": "orders", "partition": 1}, "offset": None}
FILE = {"partition": {"filename": "/tmp/in.txt"}, "offset": {"position": 120}}

# (connector class, Connect's type, stored entries or None when not read) -> the MM2 role
CASES: list[tuple[str, str, list[dict[str, Any]] | None, mm2.Mm2Role | None]] = [
    # Apache's classes: the class says it, whatever (or whether) they stored
    (APACHE + "MirrorSourceConnector", "source", None, mm2.Mm2Role.SOURCE),
    (APACHE + "MirrorSourceConnector", "source", [], mm2.Mm2Role.SOURCE),
    (APACHE + "MirrorSourceConnector", "source", [source_entry(), TOMBSTONE], mm2.Mm2Role.SOURCE),
    (APACHE + "MirrorCheckpointConnector", "source", [checkpoint_entry()], mm2.Mm2Role.CHECKPOINT),
    (APACHE + "MirrorHeartbeatConnector", "source", [heartbeat_entry()], mm2.Mm2Role.HEARTBEAT),
    (APACHE + "MirrorHeartbeatConnector", "source", None, mm2.Mm2Role.HEARTBEAT),
    # subclasses named after them
    ("com.acme.TracingMirrorSourceConnector", "source", None, mm2.Mm2Role.SOURCE),
    ("com.acme.TracingMirrorCheckpointConnector", "source", [], mm2.Mm2Role.CHECKPOINT),
    # a class that is not the connector (nor an Apache one) names nothing, even when close
    ("com.acme.MirrorSourceConnectorWrapper", "source", None, None),
    (APACHE + "MirrorSourceConfig", "source", None, None),
    # forks and wrappers named otherwise: known by what they store
    ("com.acme.Replicator", "source", [source_entry(), source_entry(partition=1, offset=0)], mm2.Mm2Role.SOURCE),
    ("com.acme.MirrorSourceConnectorWrapper", "source", [source_entry()], mm2.Mm2Role.SOURCE),
    ("com.acme.GroupTranslator", "source", [checkpoint_entry(), TOMBSTONE], mm2.Mm2Role.CHECKPOINT),
    ("com.acme.Beat", "source", [heartbeat_entry()], mm2.Mm2Role.HEARTBEAT),
    # not MM2: another shape, a mixture, the key names with the wrong types, no entries at all
    ("org.apache.kafka.connect.file.FileStreamSourceConnector", "source", [FILE], None),
    ("com.acme.Replicator", "source", [source_entry(), checkpoint_entry()], None),
    ("com.acme.Replicator", "source", [source_entry(), FILE], None),
    ("com.acme.Replicator", "source", [source_entry(cluster=1)], None),
    ("com.acme.Replicator", "source", [source_entry(partition=True)], None),
    ("com.acme.Replicator", "source", [source_entry(partition="0")], None),
    ("com.acme.Replicator", "source", [source_entry(offset=-1)], None),
    ("com.acme.Replicator", "source", [source_entry(offset=1.5)], None),
    ("com.acme.GroupTranslator", "source", [checkpoint_entry(offset=5)], None),
    (
        "com.acme.Replicator",
        "source",
        [{"partition": source_entry()["partition"], "offset": {"offset": 3, "x": 1}}],
        None,
    ),
    ("com.acme.Replicator", "source", [TOMBSTONE], None),
    ("com.acme.Replicator", "source", [], None),
    ("com.acme.Replicator", "source", None, None),
    # a sink is never MM2, whatever its class is called (MM2's connectors are sources)
    ("com.acme.MirrorSourceConnector", "sink", None, None),
    ("com.acme.Sink", "sink", [source_entry()], None),
]

#: the operator's reset kinds and the check's kinds of each role (the check measures nothing of
#: a heartbeat connector, an ordinary source to it)
RESET_KIND = {
    mm2.Mm2Role.SOURCE: ResetKind.MIRROR_SOURCE,
    mm2.Mm2Role.CHECKPOINT: ResetKind.MIRROR_CHECKPOINT,
    mm2.Mm2Role.HEARTBEAT: ResetKind.MIRROR_HEARTBEAT,
}
CHECK_KIND = {
    mm2.Mm2Role.SOURCE: CheckKind.MIRROR_SOURCE,
    mm2.Mm2Role.CHECKPOINT: CheckKind.MIRROR_CHECKPOINT,
    mm2.Mm2Role.HEARTBEAT: CheckKind.SOURCE,
}


def check_side(connector_class: str, rest_type: str, stored: list[dict[str, Any]] | None) -> CheckKind:
    """What the job's collection decides (collect_snapshot): the class, then, for a source whose
    class names no MM2 role, the stored offsets (it reads them only then)."""
    info = ConnectorInfo("c", rest_type, {"connector.class": connector_class}, "RUNNING", [])
    if info.kind is CheckKind.SOURCE and info.role is None and stored is not None:
        return kind_from_offsets({"offsets": stored}) or CheckKind.SOURCE
    return info.kind


@pytest.mark.parametrize(("connector_class", "rest_type", "stored", "role"), CASES)
def test_mm2_recognition_is_one_answer_on_both_sides(
    connector_class: str, rest_type: str, stored: list[dict[str, Any]] | None, role: mm2.Mm2Role | None
) -> None:
    assert mm2.mm2_role(connector_class, rest_type, stored) is role
    plain = ResetKind.SINK if rest_type == "sink" else ResetKind.SOURCE
    reset = connector_kind(connector_class, rest_type, stored)
    assert reset is (plain if role is None else RESET_KIND[role])
    plain_check = CheckKind.SINK if rest_type == "sink" else CheckKind.SOURCE
    assert check_side(connector_class, rest_type, stored) is (plain_check if role is None else CHECK_KIND[role])
    # the operator's other readers of the class: the mirror-loss watch takes MM2's source only
    by_class = mm2.role_by_class(connector_class, rest_type)
    if rest_type == "source":
        assert is_mirror_source(connector_class) is (by_class is mm2.Mm2Role.SOURCE)


def test_an_entry_is_routed_to_the_role_its_keys_name() -> None:
    """A reset's alter entries go to the MM2 connector whose partition keys they carry (types are
    validated after routing), the keys the check recognises stored offsets by."""
    for entry, kind in (
        (source_entry(), ResetKind.MIRROR_SOURCE),
        (checkpoint_entry(), ResetKind.MIRROR_CHECKPOINT),
        (heartbeat_entry(), ResetKind.MIRROR_HEARTBEAT),
        (source_entry(partition="0"), ResetKind.MIRROR_SOURCE),
        (FILE, None),
    ):
        assert entry_kind(OffsetEntry.model_validate(entry)) is kind


def test_sink_group_is_connects_on_both_sides() -> None:
    for config, group in (({}, "connect-orders-sink"), ({"consumer.override.group.id": "legacy"}, "legacy")):
        assert sink_group("orders-sink", config) == connect.sink_group("orders-sink", config) == group


TARGET = CheckTarget(
    namespace="ns",
    owner_kind="Connector",
    owner_name="sink",
    owner_uid="u",
    owner_api_version=API_VERSION,
    connector="sink",
    connect_url="http://connect:8083",
    bootstrap="kafka:9092",
    metrics_urls=("http://w0:9404/metrics",),
)


def test_thresholds_unset_in_the_cr_are_the_jobs_defaults() -> None:
    parsed = parser().parse_args(job_arguments(TARGET, CheckSpec(), "a"))
    settings = Settings()
    for threshold in (*thresholds.CR, *thresholds.JOB_ONLY):
        assert getattr(parsed, threshold.dest) == threshold.default, threshold.name
    doc = to_json(settings)
    assert {t.name: doc[t.name] for t in (*thresholds.CR, *thresholds.JOB_ONLY)} == {
        t.name: t.default for t in (*thresholds.CR, *thresholds.JOB_ONLY)
    }
    assert (
        (parsed.offset_flush_timeout_ms, parsed.offset_flush_interval_ms)
        == (
            settings.offset_flush_timeout_ms,
            settings.offset_flush_interval_ms,
        )
        == (connect.OFFSET_FLUSH_TIMEOUT_MS, connect.OFFSET_FLUSH_INTERVAL_MS)
    )


def test_every_cr_threshold_reaches_the_job_under_its_name() -> None:
    """Each threshold a Connector sets is written by the operator, parsed by the job, and shown in
    the verdict's settings under the CR's own field name."""
    values: dict[str, float] = {
        "maxLag": 123,
        "maxSkew": 3.5,
        "maxGini": 0.25,
        "assignmentThreshold": 1.3,
        "allowedLag": 7,
        "minimumComplete": 0.5,
        "maxLagWhilePaused": 999,
        "maxTimeLagWhilePausedSeconds": 1800,
    }
    assert set(values) == {t.name for t in thresholds.CR}
    check = CheckSpec.model_validate(values)
    parsed = parser().parse_args(job_arguments(TARGET, check, "a"))
    settings = Settings(
        max_lag=parsed.max_lag,
        max_skew=parsed.max_skew,
        max_gini=parsed.max_gini,
        assignment_threshold=parsed.assignment_threshold,
        allowed_lag=parsed.allowed_lag,
        minimum_complete=parsed.minimum_complete,
        max_lag_while_paused=parsed.max_lag_while_paused,
        max_time_lag_while_paused_s=parsed.max_time_lag_while_paused,
    )
    shown = to_json(settings)
    assert {name: shown[name] for name in values} == values


def test_cr_and_job_refuse_the_same_values() -> None:
    """The CRD's schema (from CheckSpec) bounds each threshold where the job's parser does."""
    schema = CheckSpec.model_json_schema(by_alias=True)["properties"]
    for threshold in thresholds.CR:
        bounds = {k: v for s in schema[threshold.name].get("anyOf", [schema[threshold.name]]) for k, v in s.items()}
        assert (bounds.get("minimum"), bounds.get("maximum")) == (threshold.minimum, threshold.maximum), threshold.name
        if threshold.minimum is not None:
            below = threshold.minimum - 1
            with pytest.raises(SystemExit) as refused:
                main([threshold.flag, threshold.argument(below), "--snapshot", "never-read.json"])
            assert refused.value.code == 2
            with pytest.raises(ValueError, match=threshold.name):
                CheckSpec.model_validate({threshold.name: below})
