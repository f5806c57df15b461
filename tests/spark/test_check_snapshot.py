"""Snapshot files and the collector's parsing of Connect REST and client ids (no servers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectops_check.collect import (
    Checkpoint,
    ConnectorInfo,
    checkpoints_topic,
    decode_checkpoint,
    kind_from_offsets,
    parse_assigned_partitions,
    parse_mirror_offsets,
    parse_task_status,
    renamed_topic,
    replication_separators,
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


def _entry(partition: dict[str, object], offset: object) -> dict[str, object]:
    return {"partition": partition, "offset": offset}


def test_mm2_recognised_by_the_shape_of_its_stored_offsets() -> None:
    source = _entry({"cluster": "east", "topic": "orders", "partition": 1}, {"offset": 41})
    checkpoint = _entry({"group": "app", "topic": "east.orders", "partition": 1}, {"offset": 0})
    tombstone = _entry({"cluster": "east", "topic": "gone", "partition": 0}, None)
    assert kind_from_offsets({"offsets": [source, tombstone]}) is ConnectorKind.MIRROR_SOURCE
    assert kind_from_offsets({"offsets": [checkpoint]}) is ConnectorKind.MIRROR_CHECKPOINT
    not_mm2 = [
        [],  # nothing stored yet: nothing to recognise
        [tombstone],
        [source, checkpoint],  # two MM2 shapes in one connector is not MM2
        [_entry({"sourceClusterAlias": "east", "targetClusterAlias": "west"}, {"offset": 0})],  # heartbeats
        [_entry({"group": "app", "topic": "t", "partition": 0}, {"offset": 5})],  # checkpoints store only 0
        [_entry({"cluster": "east", "topic": "t", "partition": 0, "extra": 1}, {"offset": 1})],
        [_entry({"cluster": "east", "topic": "t", "partition": 0}, {"offset": 1, "ts": 2})],
        [_entry({"cluster": "east", "topic": "t", "partition": 0}, {"offset": -1})],
        [_entry({"cluster": "east", "topic": "t", "partition": True}, {"offset": 1})],
        [_entry({"cluster": "east", "topic": "t", "partition": "0"}, {"offset": 1})],
        [_entry({"cluster": "east", "topic": "t", "partition": 0}, {"offset": 1.5})],
        [_entry({"filename": "/tmp/in.txt"}, {"position": 120})],  # FileStreamSource
    ]
    for offsets in not_mm2:
        assert kind_from_offsets({"offsets": offsets}) is None, offsets
    assert kind_from_offsets(None) is None


def test_checkpoint_connector_kind_by_class_name() -> None:
    config = {"connector.class": "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"}
    assert ConnectorInfo("c", "source", config, "RUNNING", []).kind is ConnectorKind.MIRROR_CHECKPOINT


def test_decode_checkpoint_known_bytes() -> None:
    # Checkpoint.java: key group STRING, topic STRING, partition INT32; value header version
    # INT16 = 0, then upstreamOffset INT64, offset (downstream) INT64, metadata STRING
    key = b"\x00\x03app" + b"\x00\x0beast.orders" + b"\x00\x00\x00\x02"
    value = b"\x00\x00" + b"\x00" * 7 + b"\x07" + b"\x00" * 7 + b"\x05" + b"\x00\x02md"
    assert decode_checkpoint(key, value) == Checkpoint("app", "east.orders", 2, 7, 5, "md")
    with pytest.raises(ValueError, match="version 1"):
        decode_checkpoint(key, b"\x00\x01" + value[2:])
    with pytest.raises(ValueError, match="bad string length 2"):
        decode_checkpoint(key, value[:-1])  # metadata cut short
    with pytest.raises(ValueError, match="bad string length"):
        decode_checkpoint(b"checkpoint {group=app}", value)  # the shape plugin's offsets-only mode


def test_checkpoint_topic_names_follow_the_replication_policy() -> None:
    assert replication_separators({}) == (".", ".")
    assert replication_separators({"replication.policy.separator": "_"}) == ("_", "_")
    disabled = {"replication.policy.separator": "_", "replication.policy.internal.topic.separator.enabled": "false"}
    assert replication_separators(disabled) == ("_", ".")
    assert checkpoints_topic("east", ".") == "east.checkpoints.internal"
    # a group's upstream topic as its checkpoint names it (MirrorCheckpointTask.renameTopicPartition)
    assert renamed_topic("orders", "east", "west", ".") == "east.orders"
    assert renamed_topic("west.orders", "east", "west", ".") == "orders"  # came from the target
    assert renamed_topic("other.orders", "east", "west", ".") == "east.other.orders"
    assert renamed_topic("west.orders", "east", None, ".") == "east.west.orders"
