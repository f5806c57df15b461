"""MirrorMaker 2 lag, proven end to end: a real Connect worker running the MM2-shaped connectors
(tests/env/plugins/mm2shapes, named unlike MM2's connectors on purpose, see below), the real
Apache Kafka broker, the job's own collection and metrics, and a hand computation from what the
broker holds, read independently of the job:

- source log-ends by READING every record of each partition (not from the watermarks the job
  reads), and checking the offsets are dense;
- MM2's stored offsets by reading the worker's offsets topic itself (the job asks Connect's
  ``GET /offsets``, which is Connect's reading of that same topic);
- checkpoints by decoding the checkpoints topic's records here, and the group's committed
  offsets by OffsetFetch.

The connectors' class names do not end in ``MirrorSourceConnector``/``...CheckpointConnector``:
the job recognises them by the shape of their stored offsets (the class-name path is
test_collect_integration.test_mirror_source_lag_from_stored_offsets), and so does the operator's
reset planning given the same worker's answers (one rule, connectops_rules.mm2).
"""

from __future__ import annotations

import contextlib
import json
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # not re-exported
from pyspark.sql import SparkSession

from connectops.planning.offset_reset import ConnectorKind as ResetKind
from connectops.planning.offset_reset import connector_kind
from connectops_check.collect import collect_snapshot
from connectops_check.job import run_check
from connectops_check.snapshot import ConnectorKind
from connectops_check.verdict import Settings
from tests.env.plugins import MM2_CHECKPOINT, MM2_SOURCE, mm2_shapes_jar
from tests.env.records import batching_producer
from tests.env.servers import ConnectWorker, KafkaBroker

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
PARTITIONS = 3
SHIFT = 2  # records in each remote partition before MM2 starts


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except httpx.HTTPError as error:
            last = error
        else:
            if last:
                return last
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def read_records(bootstrap: str, topic: str, idle: float = 2.0) -> list[Any]:
    """Every record of every partition of ``topic``, read from the start until quiet for ``idle`` s."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"hand-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[Any] = []
        quiet_since, deadline = time.monotonic(), time.monotonic() + 60
        while time.monotonic() - quiet_since < idle and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(num_messages=1000, timeout=0.3) if m.error() is None]
            records.extend(batch)
            if batch:
                quiet_since = time.monotonic()
        return records
    finally:
        consumer.close()


def log_ends_by_reading(bootstrap: str, topic: str) -> dict[int, int]:
    """Per partition, the offset after its last record, from the records themselves."""
    offsets: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for record in read_records(bootstrap, topic):
        offsets[record.partition()].append(record.offset())
    for partition, seen in offsets.items():
        assert sorted(seen) == list(range(len(seen))), f"{topic}-{partition}: offsets not dense: {seen}"
    return {p: len(seen) for p, seen in offsets.items()}


def stored_offsets_from_topic(worker: ConnectWorker, connector: str) -> dict[int, int]:
    """MM2's stored source offsets, read from the worker's offsets topic: key ``[name, partition
    map]``, value ``{"offset": n}`` or null; per key, the last record wins (a key lives in one
    partition of the topic, so read order within it is write order)."""
    latest: dict[str, Any] = {}
    for record in read_records(worker.bootstrap, worker.offset_topic):
        name, partition = json.loads(record.key())
        if name == connector:
            latest[json.dumps(partition, sort_keys=True)] = (
                None if record.value() is None else json.loads(record.value())
            )
    stored: dict[int, int] = {}
    for key, value in latest.items():
        partition = json.loads(key)
        assert set(partition) == {"cluster", "topic", "partition"}, partition
        if value is not None:
            stored[int(partition["partition"])] = int(value["offset"])
    return stored


def _string(data: bytes, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, pos)
    return data[pos + 2 : pos + 2 + length].decode(), pos + 2 + length


def checkpoints_from_topic(bootstrap: str, topic: str) -> dict[tuple[str, str, int], tuple[int, int]]:
    """(group, topic, partition) -> (upstreamOffset, downstreamOffset) of the latest checkpoint,
    decoded here from the records (Checkpoint.java's encoding)."""
    out: dict[tuple[str, str, int], tuple[int, int]] = {}
    for record in read_records(bootstrap, topic):
        group, pos = _string(record.key(), 0)
        remote, pos = _string(record.key(), pos)
        (partition,) = struct.unpack_from(">i", record.key(), pos)
        version, upstream, downstream = struct.unpack_from(">hqq", record.value(), 0)
        assert version == 0
        out[(group, remote, partition)] = (upstream, downstream)
    return out


class Rest:
    def __init__(self, worker: ConnectWorker) -> None:
        self.http = httpx.Client(base_url=worker.url, timeout=90)

    def state(self, name: str) -> tuple[str, list[str]] | None:
        response = self.http.get(f"/connectors/{name}/status")
        if response.status_code != 200:
            return None
        body = response.json()
        return body["connector"]["state"], [t["state"] for t in body.get("tasks", [])]

    def create(self, name: str, config: dict[str, str]) -> None:
        self.http.put(f"/connectors/{name}/config", json=config).raise_for_status()
        wait_for(lambda: self.state(name) == ("RUNNING", ["RUNNING"]), 90, f"{name} RUNNING")

    def pause(self, name: str) -> None:
        assert self.http.put(f"/connectors/{name}/pause").status_code == 202
        wait_for(lambda: self.state(name) == ("PAUSED", ["PAUSED"]), 60, f"{name} PAUSED")

    def resume(self, name: str) -> None:
        assert self.http.put(f"/connectors/{name}/resume").status_code == 202
        wait_for(lambda: self.state(name) == ("RUNNING", ["RUNNING"]), 60, f"{name} RUNNING")

    def reset_kind(self, name: str) -> tuple[ResetKind, ResetKind]:
        """What the operator's reset planning makes of the connector from this worker's answers:
        by its class alone, and with its stored offsets."""
        info = self.http.get(f"/connectors/{name}").json()
        entries = self.http.get(f"/connectors/{name}/offsets").json()["offsets"]
        by_class = connector_kind(info["config"]["connector.class"], info["type"])
        return by_class, connector_kind(info["config"]["connector.class"], info["type"], entries)

    def stored(self, name: str) -> dict[int, int]:
        entries = self.http.get(f"/connectors/{name}/offsets").json()["offsets"]
        return {int(e["partition"]["partition"]): int(e["offset"]["offset"]) for e in entries if e["offset"]}


@pytest.fixture(scope="module")
def worker(connect_factory: Any) -> Iterator[ConnectWorker]:
    started: ConnectWorker = connect_factory("mm2-lag", extra_classpath=[mm2_shapes_jar()])
    yield started
    started.stop()  # an idle JVM, and its fetches on the broker, for the rest of the session otherwise


@pytest.fixture(scope="module")
def mirror(kafka: KafkaBroker, worker: ConnectWorker) -> Iterator[dict[str, Any]]:
    """Upstream topic ``orders<run>`` (3 partitions) with 4, 2 and 3 records, all replicated by a
    running MM2-shaped source connector into ``east<run>.orders<run>``, whose partitions already
    held ``SHIFT`` records each: a downstream offset is then the upstream one + SHIFT, so the
    two cannot be confused. Shared by the module (a connector costs a rebalance): each test
    leaves the source connector running and caught up."""
    run = uuid.uuid4().hex[:6]
    alias, upstream = f"east{run}", f"orders{run}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    topics = [NewTopic(upstream, PARTITIONS, 1), NewTopic(f"{alias}.{upstream}", PARTITIONS, 1)]
    for future in admin.create_topics(topics).values():
        future.result(timeout=15)
    producer = batching_producer(kafka.bootstrap)

    def produce(counts: dict[int, int]) -> None:
        for partition, count in counts.items():
            for i in range(count):
                producer.produce(upstream, value=b"v%d" % i, partition=partition)
        assert producer.flush(10) == 0

    for partition in range(PARTITIONS):
        for i in range(SHIFT):
            producer.produce(f"{alias}.{upstream}", value=b"before-%d" % i, partition=partition)
            producer.flush(10)
    produce({0: 4, 1: 2, 2: 3})
    rest = Rest(worker)
    source = f"mm2-source-{run}"
    rest.create(
        source,
        {
            "connector.class": MM2_SOURCE,
            "tasks.max": "1",
            "source.cluster.alias": alias,
            "source.cluster.bootstrap.servers": kafka.bootstrap,
            "topics": upstream,
            "key.converter": BYTES,
            "value.converter": BYTES,
        },
    )
    wait_for(lambda: rest.stored(source) == {0: 3, 1: 1, 2: 2}, 60, "every record replicated and stored")
    made = [source]
    yield {"run": run, "alias": alias, "upstream": upstream, "source": source, "rest": rest, "produce": produce}
    for name in made:
        with contextlib.suppress(httpx.HTTPError):
            rest.http.delete(f"/connectors/{name}")
    rest.http.close()


def job_lags(doc: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(p["topic"], p["partition"]): p["lag"] for p in doc["lag"]["topPartitions"]}


def test_replication_lag_equals_the_hand_computation(
    kafka: KafkaBroker, worker: ConnectWorker, mirror: dict[str, Any], spark: SparkSession
) -> None:
    rest: Rest = mirror["rest"]
    source, upstream = mirror["source"], mirror["upstream"]
    rest.pause(source)
    unreplicated = {0: 5, 1: 0, 2: 7}  # the known amount, produced while MM2 cannot copy it
    mirror["produce"](unreplicated)

    snap = collect_snapshot("unused:9092", worker.url, source, 2, 0.5)
    doc = run_check(snap, Settings(desired_state="paused"), spark)

    # the hand computation, from the broker alone
    ends = log_ends_by_reading(kafka.bootstrap, upstream)
    stored = stored_offsets_from_topic(worker, source)
    hand = {p: ends[p] - (stored[p] + 1) for p in range(PARTITIONS)}
    # the scenario held: 4+5, 2+0, 3+7 records; 4, 2, 3 of them replicated
    assert ends == {0: 9, 1: 2, 2: 10}
    assert stored == {0: 3, 1: 1, 2: 2}
    assert hand == unreplicated

    assert snap.kind is ConnectorKind.MIRROR_SOURCE
    assert any("MirrorMaker 2's shape" in n for n in snap.notes), snap.notes
    # the operator, on the same worker's answers: not by the class, by the stored offsets
    assert rest.reset_kind(source) == (ResetKind.SOURCE, ResetKind.MIRROR_SOURCE)
    # the job's inputs are the broker's: Connect's view of the offsets topic, and the log-ends
    assert {p.partition: p.stored for p in snap.samples[-1].partitions} == stored
    assert {p.partition: p.log_end for p in snap.samples[-1].partitions} == ends
    assert job_lags(doc) == {(upstream, p): lag for p, lag in hand.items()}
    assert doc["lag"]["total"] == sum(hand.values()) == 12
    assert {p["basis"] for p in doc["lag"]["topPartitions"]} == {"committed"}
    assert doc["verdict"] == "PAUSED", doc["reasons"]

    # resumed, MM2 copies the backlog: the lag is 0 by the same two computations
    rest.resume(source)
    wait_for(lambda: rest.stored(source) == {0: 8, 1: 1, 2: 9}, 60, "the backlog replicated")
    doc = run_check(collect_snapshot("unused:9092", worker.url, source, 2, 0.5), Settings(), spark)
    stored = stored_offsets_from_topic(worker, source)
    ends = log_ends_by_reading(kafka.bootstrap, upstream)
    assert {p: ends[p] - (stored[p] + 1) for p in range(PARTITIONS)} == {0: 0, 1: 0, 2: 0}
    assert job_lags(doc) == {(upstream, p): 0 for p in range(PARTITIONS)}
    assert doc["lag"]["total"] == 0


def test_checkpoint_lag_equals_the_hand_computation(
    kafka: KafkaBroker, worker: ConnectWorker, mirror: dict[str, Any], spark: SparkSession
) -> None:
    """Checkpoint lag = the group's committed offset on the source - the upstreamOffset of its
    latest checkpoint: what a consumer failing over to the target now would read again."""
    rest: Rest = mirror["rest"]
    alias, upstream, run = mirror["alias"], mirror["upstream"], mirror["run"]
    group = f"app{run}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})

    def commit(offsets: dict[int, int]) -> None:
        request = [
            ConsumerGroupTopicPartitions(group, [KafkaTopicPartition(upstream, p, o) for p, o in offsets.items()])
        ]
        admin.alter_consumer_group_offsets(request)[group].result(30)

    def committed() -> dict[int, int]:
        request = [ConsumerGroupTopicPartitions(group, [KafkaTopicPartition(upstream, p) for p in range(PARTITIONS)])]
        answer = admin.list_consumer_group_offsets(request)[group].result(30)
        return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.offset >= 0}

    commit({0: 2, 1: 1, 2: 3})
    topic = f"{alias}.checkpoints.internal"
    remote = f"{alias}.{upstream}"
    # as MirrorCheckpointConnector does on the target: one partition (compaction is not needed here)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    checkpoint = f"mm2-checkpoint-{run}"
    rest.create(
        checkpoint,
        {
            "connector.class": MM2_CHECKPOINT,
            "source.cluster.alias": alias,
            "source.cluster.bootstrap.servers": kafka.bootstrap,
            "groups": group,
            "topics": upstream,
            "emit.interval.ms": "500",
            "downstream.offset.shift": str(SHIFT),
            "key.converter": BYTES,
            "value.converter": BYTES,
        },
    )
    try:
        first = {(group, remote, p): (o, o + SHIFT) for p, o in {0: 2, 1: 1, 2: 3}.items()}
        wait_for(lambda: checkpoints_from_topic(kafka.bootstrap, topic) == first, 60, "the first checkpoints")
        rest.pause(checkpoint)
        commit({0: 6, 1: 1, 2: 5})  # the group moves on; no checkpoint follows it

        snap = collect_snapshot(kafka.bootstrap, worker.url, checkpoint, 2, 0.5)
        doc = run_check(snap, Settings(desired_state="paused"), spark)

        now = committed()
        latest = checkpoints_from_topic(kafka.bootstrap, topic)
        hand = {p: now[p] - latest[(group, remote, p)][0] for p in range(PARTITIONS)}
        assert now == {0: 6, 1: 1, 2: 5}  # the scenario held
        assert hand == {0: 4, 1: 0, 2: 2}
        assert snap.kind is ConnectorKind.MIRROR_CHECKPOINT
        assert rest.reset_kind(checkpoint) == (ResetKind.SOURCE, ResetKind.MIRROR_CHECKPOINT)
        row = f"{group}:{upstream}"
        assert job_lags(doc) == {(row, p): lag for p, lag in hand.items()}
        assert doc["lag"]["total"] == sum(hand.values()) == 6

        # resumed, MM2 checkpoints the group's new offsets: no checkpoint lag left
        rest.resume(checkpoint)
        now = committed()
        wait_for(
            lambda: (
                {k: v[0] for k, v in checkpoints_from_topic(kafka.bootstrap, topic).items()}
                == {(group, remote, p): o for p, o in now.items()}
            ),
            60,
            "checkpoints of the new offsets",
        )
        doc = run_check(collect_snapshot(kafka.bootstrap, worker.url, checkpoint, 2, 0.5), Settings(), spark)
        assert job_lags(doc) == {(row, p): 0 for p in range(PARTITIONS)}
    finally:
        with contextlib.suppress(httpx.HTTPError):
            rest.http.delete(f"/connectors/{checkpoint}")
