"""Snapshot files and the collector's parsing of Connect REST and client ids (no servers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectops_check.collect import (
    ConnectorInfo,
    parse_assigned_partitions,
    parse_mirror_offsets,
    parse_task_status,
    sink_topics,
    task_id_from_client_id,
)
from connectops_check.frames import snapshot_tables
from connectops_check.snapshot import ConnectorKind, Snapshot, TopicPartition
from connectops_check.synthetic import random_snapshot


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    snap = random_snapshot(40, samples=3, seed=5, kind=ConnectorKind.MIRROR_SOURCE)
    snap.notes.append("kafka: describe_consumer_groups(connect-x) failed: unsupported")
    path = tmp_path / "s.json"
    snap.save(path)
    assert Snapshot.load(path) == snap
    assert Snapshot.from_dict(snap.to_dict()).to_dict() == snap.to_dict()


def test_members_none_and_empty_stay_distinct() -> None:
    base = Snapshot(connector="c", kind=ConnectorKind.SINK)
    assert Snapshot.from_dict(base.to_dict()).members is None
    base.members = []
    assert Snapshot.from_dict(base.to_dict()).members == []


def test_unknown_version_and_bad_values_are_rejected(tmp_path: Path) -> None:
    data = Snapshot(connector="c", kind=ConnectorKind.SINK).to_dict()
    with pytest.raises(ValueError, match="version"):
        Snapshot.from_dict({**data, "version": 99})
    with pytest.raises(TypeError):
        Snapshot.from_dict({**data, "samples": [{"ts_ms": 1, "partitions": [["t", 0, [1], None, None, None]]}]})
    path = tmp_path / "list.json"
    path.write_text("[]")
    with pytest.raises(TypeError):
        Snapshot.load(path)


def test_mirror_position_is_stored_plus_one() -> None:
    snap = random_snapshot(5, samples=2, seed=1, kind=ConnectorKind.MIRROR_SOURCE)
    tables = snapshot_tables(snap)
    stored = [p.stored for s in snap.samples for p in s.partitions]
    expected = [None if v is None else v + 1 for v in stored]
    assert tables.samples.column("position").to_pylist() == expected


def test_parse_mirror_offsets() -> None:
    payload = {
        "offsets": [
            {"partition": {"cluster": "east", "topic": "orders", "partition": 2}, "offset": {"offset": 41}},
            {"partition": {"cluster": "east", "topic": "my-topic", "partition": 0}, "offset": {"offset": 0}},
            {"partition": {"cluster": "east", "topic": "gone", "partition": 1}, "offset": None},
            {
                "partition": {"sourceClusterAlias": "east", "targetClusterAlias": "west"},
                "offset": {"offset": 0},
            },
        ]
    }
    assert parse_mirror_offsets(payload) == {
        TopicPartition("orders", 2): 41,
        TopicPartition("my-topic", 0): 0,
    }


def test_parse_assigned_partitions_keeps_dashes_in_topic_names() -> None:
    assert parse_assigned_partitions("orders-0, my-topic-12,bad,-3,x-y") == [
        TopicPartition("orders", 0),
        TopicPartition("my-topic", 12),
    ]
    assert parse_assigned_partitions("") == []


def test_task_id_from_client_id() -> None:
    assert task_id_from_client_id("sink-a", "connector-consumer-sink-a-3") == 3
    assert task_id_from_client_id("sink-a", "connector-consumer-sink-a-b-3") is None
    assert task_id_from_client_id("sink", "connector-consumer-sink-a-3") is None
    assert task_id_from_client_id("sink-a", "rdkafka") is None


def test_sink_topics() -> None:
    available = ["orders", "orders-eu", "__consumer_offsets", "audit"]
    assert sink_topics({"topics": " orders , audit"}, available) == ["orders", "audit"]
    # Java's Matcher.matches(): the whole name must match
    assert sink_topics({"topics.regex": "orders.*"}, available) == ["orders", "orders-eu"]
    assert sink_topics({"topics.regex": "order"}, available) == []
    assert sink_topics({"topics.regex": ".*"}, available) == ["audit", "orders", "orders-eu"]
    assert sink_topics({}, available) == []


def test_connector_kind_and_task_status() -> None:
    mm2 = ConnectorInfo(
        "mm2",
        "source",
        {"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector"},
        "RUNNING",
        [],
    )
    assert mm2.kind is ConnectorKind.MIRROR_SOURCE
    assert (
        ConnectorInfo("f", "source", {"connector.class": "FileStreamSource"}, "RUNNING", []).kind
        is ConnectorKind.SOURCE
    )
    assert ConnectorInfo("s", "sink", {}, "RUNNING", []).kind is ConnectorKind.SINK
    status = {
        "tasks": [
            {"id": 1, "state": "FAILED", "worker_id": "w2", "trace": "boom"},
            {"id": 0, "state": "RUNNING", "worker_id": "w1"},
        ]
    }
    tasks = parse_task_status(status)
    assert [(t.task_id, t.state, t.trace) for t in tasks] == [(0, "RUNNING", None), (1, "FAILED", "boom")]
