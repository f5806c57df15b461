"""Partition ownership read from a running sink's consumer group, as Apache Kafka reports it.

A real FileStreamSink with two tasks runs on the session's Connect worker; its tasks' consumers
join the group ``connect-<name>`` and the broker's group coordinator assigns the partitions
(Connect's sinks use the consumer's default assignor, the RangeAssignor). The check's own
collection reads the group through librdkafka's DescribeConsumerGroups; the test reads the same
group with its own AdminClient call and the records it produced, and compares: members, their
partitions, their lag and their traffic. Two shapes: one topic of four partitions (two each:
balanced), and three topics of three partitions with one of one, where the range assignor gives
the first member seven partitions and the second three (the uneven case the check must call out).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # not re-exported
from pyspark.sql import SparkSession

from connectops_check import metrics, reference
from connectops_check.collect import ConnectorInfo, _collect_sink
from connectops_check.frames import snapshot_tables
from connectops_check.job import run_check
from connectops_check.snapshot import ConnectorKind, Snapshot, TaskInfo
from connectops_check.verdict import Settings
from tests.env.records import end_offsets
from tests.env.servers import ConnectWorker, KafkaBroker

pytestmark = pytest.mark.spark

FILESTREAM_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


def _wait(check: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def _produce(bootstrap: str, counts: dict[tuple[str, int], int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for (topic, partition), n in counts.items():
        for i in range(n):
            producer.produce(topic, value=json.dumps(f"{topic}-{partition}-{i}").encode(), partition=partition)
    assert producer.flush(15) == 0


def _members(bootstrap: str, group: str, *, stable_only: bool = False) -> dict[str, tuple[str, list[tuple[str, int]]]]:
    """client id -> (member id, assigned partitions), read with this test's own admin call;
    ``stable_only``: nothing unless the group is Stable (mid-rebalance it can list a member that
    still holds every partition beside one that holds none yet)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(timeout=15)
    if stable_only and described.state != ConsumerGroupState.STABLE:
        return {}
    return {
        m.client_id: (
            m.member_id,
            sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])),
        )
        for m in described.members
    }


def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=15)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def _run(
    kafka: KafkaBroker,
    connect: ConnectWorker,
    spark: SparkSession,
    tmp_path: Path,
    topics: dict[str, int],
) -> tuple[dict[str, Any], dict[str, tuple[int, int, int]]]:
    """Run a two-task sink over ``topics`` (name -> partition count), pause it with a backlog,
    collect two samples with traffic in between; return the check's document and the expected
    (partitions, lag, traffic) per member client id, computed from the broker and the records."""
    connector = f"own-{uuid.uuid4().hex[:6]}"
    group = f"connect-{connector}"
    names = {t: f"{connector}-{t}" for t in topics}
    admin = AdminClient(kafka.admin_config())
    for t, n in topics.items():
        admin.create_topics([NewTopic(names[t], n, 1)])[names[t]].result(timeout=30)
    partitions = [(names[t], p) for t, n in topics.items() for p in range(n)]
    _produce(kafka.bootstrap, dict.fromkeys(partitions, 5))
    config = {
        "connector.class": FILESTREAM_SINK,
        "tasks.max": "2",
        "file": str(tmp_path / f"{connector}.txt"),
        "topics": ",".join(names.values()),
    }
    resp = httpx.put(f"{connect.url}/connectors/{connector}/config", json=config, timeout=30)
    assert resp.status_code in (200, 201), resp.text
    try:
        # both tasks' consumers in the group, every partition assigned, the first records committed
        def settled() -> bool:
            members = _members(kafka.bootstrap, group, stable_only=True)
            held = sorted(tp for _, parts in members.values() for tp in parts)
            if len(members) != 2 or held != sorted(partitions):
                return False
            time.sleep(2)  # and still so a moment later: the rebalances of task starts are over
            return _members(kafka.bootstrap, group, stable_only=True) == members

        _wait(settled, timeout=90, what="a Stable group of two members holding every partition")
        _wait(lambda: _committed(kafka.bootstrap, group) == dict.fromkeys(partitions, 5), timeout=60, what="commits")
        # paused: the consumers stay in the group but stop reading, so a backlog stays put
        assert httpx.put(f"{connect.url}/connectors/{connector}/pause", timeout=30).status_code == 202
        _wait(
            lambda: (
                httpx.get(f"{connect.url}/connectors/{connector}/status", timeout=10).json()["connector"]["state"]
                == "PAUSED"
            ),
            timeout=30,
            what="PAUSED",
        )
        backlog = {tp: 3 + i for i, tp in enumerate(partitions)}
        _produce(kafka.bootstrap, backlog)
        during = {tp: (2 if i % 2 == 0 else 0) for i, tp in enumerate(partitions)}

        status = httpx.get(f"{connect.url}/connectors/{connector}/status", timeout=10).json()
        tasks = [TaskInfo(t["id"], t["worker_id"], t["state"]) for t in status["tasks"]]
        info = ConnectorInfo(connector, "sink", config, status["connector"]["state"], tasks)
        snap = Snapshot(connector=connector, kind=ConnectorKind.SINK, connector_state="PAUSED", tasks=tasks)
        _collect_sink(snap, info, kafka.bootstrap, None, 2, 0.0, None, lambda _: _produce(kafka.bootstrap, during))

        # the independent side: the group as this test reads it, the broker's ends, the records
        members = _members(kafka.bootstrap, group)
        assert len(members) == 2, members
        assert snap.members is not None, snap.notes
        assert {
            m.client_id: (m.member_id, sorted((tp.topic, tp.partition) for tp in m.assignment)) for m in snap.members
        } == (members)
        committed = _committed(kafka.bootstrap, group)
        assert committed == dict.fromkeys(partitions, 5)
        expected_end = {tp: 5 + backlog[tp] + during[tp] for tp in partitions}
        ends = {(names[t], p): e for t in topics for p, e in end_offsets(kafka.bootstrap, names[t]).items()}
        assert ends == expected_end  # the broker holds what was produced, batches and all
        expected = {
            client: (
                len(parts),
                sum(expected_end[tp] - committed[tp] for tp in parts),
                sum(during[tp] for tp in parts),
            )
            for client, (_, parts) in members.items()
        }
        tables = snapshot_tables(snap)
        for engine in (reference.compute(tables), metrics.compute(spark, tables)):
            assert {m.client_id: (m.partitions, m.lag, m.traffic) for m in engine.members} == expected
            assert engine.unassigned_partitions == 0
        doc = run_check(snap, Settings(), spark)
        assignment = doc["balance"]["assignment"]
        assert {m["clientId"]: (m["partitions"], m["lag"], m["traffic"]) for m in assignment["perMember"]} == expected
        return doc, expected
    finally:
        httpx.delete(f"{connect.url}/connectors/{connector}", timeout=30)


def test_a_running_sinks_members_are_read_from_the_broker(
    kafka: KafkaBroker, connect: ConnectWorker, spark: SparkSession, tmp_path: Path
) -> None:
    doc, expected = _run(kafka, connect, spark, tmp_path, {"in": 4})
    assert sorted(p for p, _, _ in expected.values()) == [2, 2]
    codes = {r["code"] for r in doc["reasons"]}
    assert "OWNERSHIP_UNKNOWN" not in codes
    assert "ASSIGNMENT_UNBALANCED" not in codes


def test_the_range_assignors_uneven_split_is_called_unbalanced(
    kafka: KafkaBroker, connect: ConnectWorker, spark: SparkSession, tmp_path: Path
) -> None:
    # range deals each topic out on its own, in member order: three topics of 3 -> 2 + 1 each,
    # one of 1 -> 1 + 0, every extra to the same (first) member: 7 and 3 partitions, outside
    # Cruise Control's count bounds around the mean 5 ([4, 6] at the default threshold 1.1)
    doc, expected = _run(kafka, connect, spark, tmp_path, {"a": 3, "b": 3, "c": 3, "d": 1})
    assert sorted(p for p, _, _ in expected.values()) == [3, 7]
    codes = {r["code"] for r in doc["reasons"]}
    assert "OWNERSHIP_UNKNOWN" not in codes
    assert "ASSIGNMENT_UNBALANCED" in codes
