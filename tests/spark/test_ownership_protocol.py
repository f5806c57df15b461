"""Partition ownership read from a consumer group's member assignments, as an Apache Kafka broker
reports them (Issue 14, item 4).

The test broker lists no members for any group, so :class:`tests.env.groupproxy.GroupsProxy`
answers DescribeGroups in front of it with members whose metadata and assignment bytes are made
by kafka-clients' own ``ConsumerProtocol`` (the jar on the Connect worker's class path), in each
of its assignment versions; every other request (topics, offsets, committed offsets) is the real
broker's. The check's own collection reads the group through librdkafka's DescribeConsumerGroups,
and its per-member numbers are compared with an independent computation from the broker.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # not re-exported
from pyspark.sql import SparkSession

from connectops_check import metrics, reference
from connectops_check.collect import ConnectorInfo, _collect_sink
from connectops_check.frames import snapshot_tables
from connectops_check.job import run_check
from connectops_check.snapshot import ConnectorKind, Snapshot, TaskInfo, TopicPartition
from connectops_check.verdict import Settings
from tests.env.groupproxy import ConsumerProtocolBytes, Group, GroupsProxy, Member
from tests.env.servers import KafkaBroker, free_port

pytestmark = pytest.mark.spark

PARTITIONS = 6
#: records in each partition before the first sample, and produced between the two samples
BEFORE = [40, 40, 40, 2, 2, 2]
DURING = [30, 30, 30, 1, 0, 0]
#: the group's committed offsets
COMMITTED = [10, 40, 25, 2, 0, 1]


class Proxied:
    """A Tansu broker reached only through a :class:`GroupsProxy` (it advertises the proxy)."""

    def __init__(self, root: Path) -> None:
        port = free_port()
        self.kafka = KafkaBroker(root, name="groups-tansu", advertised_port=port)
        self.proxy = GroupsProxy(("127.0.0.1", self.kafka.port), port=port)
        self.bootstrap = self.proxy.address

    def __enter__(self) -> Proxied:
        self.proxy.start()
        self.kafka.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.kafka.stop()
        self.proxy.stop()


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    with Proxied(tmp_path_factory.mktemp("groups")) as p:
        yield p


def produce(bootstrap: str, topic: str, per_partition: list[int]) -> None:
    """One record per batch: KafkaBroker's end offsets are right only then (its pinned deviation)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for p, n in enumerate(per_partition):
        for i in range(n):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
            producer.flush(10)
    assert producer.flush(10) == 0


def broker_truth(bootstrap: str, group: str, topic: str) -> tuple[dict[int, int], dict[int, int]]:
    """(log-end, committed) per partition, read straight from the broker (not through the proxy,
    not with the check's code): the independent side of the comparison."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"truth-{uuid.uuid4().hex[:6]}"})
    try:
        ends = {
            p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)
        }
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
    committed = {tp.partition: tp.offset for tp in answer.topic_partitions if tp.topic == topic}
    return ends, committed


def test_members_and_their_load_come_from_consumer_protocol_bytes(proxied: Proxied, spark: SparkSession) -> None:
    connector = f"own-{uuid.uuid4().hex[:6]}"
    topic, group = f"{connector}-in", f"connect-{connector}"
    direct = proxied.kafka.bootstrap
    admin = AdminClient({"bootstrap.servers": direct})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    produce(direct, topic, BEFORE)
    offsets = [KafkaTopicPartition(topic, p, o) for p, o in enumerate(COMMITTED)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)])[group].result(timeout=30)

    # what three sink tasks' consumers would have joined with: task 0 holds the busy partitions,
    # task 1 the quiet ones (plus a partition of a topic the sink does not read), task 2 nothing;
    # each assignment in another ConsumerProtocol version, with and without user data
    held = {0: [(topic, 0), (topic, 1), (topic, 2)], 1: [(topic, 3), (topic, 4), (topic, 5), ("elsewhere", 9)], 2: []}
    versions = {0: 3, 1: 1, 2: 0}
    java = ConsumerProtocolBytes()
    raw = java.many(
        [java.subscription([topic], version=versions[t]) for t in held]
        + [java.assignment(held[t], version=versions[t], user_data="sticky" if t == 0 else None) for t in held]
    )
    members = [
        Member(
            member_id=f"connector-consumer-{connector}-{t}-{uuid.uuid4()}",
            client_id=f"connector-consumer-{connector}-{t}",
            host=f"/10.0.0.{t + 1}",
            metadata=raw[i],
            assignment=raw[len(held) + i],
        )
        for i, t in enumerate(held)
    ]
    proxied.proxy.groups[group] = Group("Stable", "range", members)

    info = ConnectorInfo(
        name=connector,
        type="sink",
        config={"connector.class": "FileStreamSink", "topics": topic},
        state="RUNNING",
        tasks=[TaskInfo(t, "w:8083", "RUNNING") for t in held],
    )
    snap = Snapshot(connector=connector, kind=ConnectorKind.SINK, connector_state="RUNNING", tasks=info.tasks)
    # the records of DURING arrive between the two samples
    _collect_sink(snap, info, proxied.bootstrap, None, 2, 0.0, None, lambda _: produce(direct, topic, DURING))

    # librdkafka asks KIP-848's ConsumerGroupDescribe first (Tansu lists it), then DescribeGroups
    assert {key for key, _ in proxied.proxy.answered} == {69, 15}, proxied.proxy.answered
    assert snap.members is not None, snap.notes
    assert {m.client_id: (m.task_id, m.host, m.assignment) for m in snap.members} == {
        f"connector-consumer-{connector}-{t}": (t, f"/10.0.0.{t + 1}", sorted(TopicPartition(*tp) for tp in held[t]))
        for t in held
    }
    assert sorted(m.member_id for m in snap.members) == sorted(m.member_id for m in members)

    ends, committed = broker_truth(direct, group, topic)
    assert ends == {p: BEFORE[p] + DURING[p] for p in range(PARTITIONS)}  # the broker has what was produced
    assert committed == dict(enumerate(COMMITTED))
    lag = {p: ends[p] - committed[p] for p in range(PARTITIONS)}
    expected = {
        f"connector-consumer-{connector}-{t}": (
            len(held[t]),
            sum(lag[p] for tp, p in held[t] if tp == topic),
            sum(DURING[p] for tp, p in held[t] if tp == topic),
        )
        for t in held
    }
    tables = snapshot_tables(snap)
    for engine in (reference.compute(tables), metrics.compute(spark, tables)):
        assert {m.client_id: (m.partitions, m.lag, m.traffic) for m in engine.members} == expected
        assert engine.unassigned_partitions == 0

    doc = run_check(snap, Settings(), spark)
    codes = {r["code"] for r in doc["reasons"]}
    assert "OWNERSHIP_UNKNOWN" not in codes
    assignment = doc["balance"]["assignment"]
    assert {m["clientId"]: (m["partitions"], m["lag"], m["traffic"]) for m in assignment["perMember"]} == expected
    # 3/4/0 partitions per member: outside Cruise Control's bounds around the mean 7/3
    assert "ASSIGNMENT_UNBALANCED" in codes


def test_an_active_group_without_members_is_ownership_unknown(proxied: Proxied, spark: SparkSession) -> None:
    """What the test broker itself answers for a group with live consumers (Stable, no members):
    the check says ownership is unknown in so many words, and does not call it "no members"."""
    connector = f"own-{uuid.uuid4().hex[:6]}"
    topic, group = f"{connector}-in", f"connect-{connector}"
    admin = AdminClient({"bootstrap.servers": proxied.kafka.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
    produce(proxied.kafka.bootstrap, topic, [3, 3])
    offsets = [KafkaTopicPartition(topic, p, 1) for p in range(2)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)])[group].result(timeout=30)
    proxied.proxy.groups[group] = Group("Stable", "range", [])
    info = ConnectorInfo(connector, "sink", {"topics": topic}, "RUNNING", [TaskInfo(0, "w:8083", "RUNNING")])
    snap = Snapshot(connector=connector, kind=ConnectorKind.SINK, connector_state="RUNNING", tasks=info.tasks)
    _collect_sink(snap, info, proxied.bootstrap, None, 1, 0.0, None, time.sleep)
    assert snap.members is None
    assert any("membership unknown" in n for n in snap.notes), snap.notes
    doc = run_check(snap, Settings(), spark)
    unknown = [r for r in doc["reasons"] if r["code"] == "OWNERSHIP_UNKNOWN"]
    assert len(unknown) == 1
    assert "is unknown" in unknown[0]["message"]
    assert doc["balance"]["assignment"] is None
