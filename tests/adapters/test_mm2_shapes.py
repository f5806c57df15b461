"""The test-only MM2-shaped connectors (tests/env/plugins/mm2shapes) on a real Connect 4.3 worker.

The offset resets run on real MirrorMaker 2 now (tests/e2e/test_offset_reset_mm2.py). This plugin
stays for tests/spark/test_mm2_lag.py, whose connectors must NOT be named like MM2's (the check
recognises them by the shape of their stored offsets, as it must for forks and wrappers of MM2),
and this file proves the shapes that test relies on: source offsets with MirrorMaker 2's exact
shapes, alterOffsets validating like MM2's (checkpoint/heartbeat: only offset 0; source:
non-negative offsets, required keys), DELETE offsets, and resume at stored offset + 1 or, with
nothing stored, from the earliest record. Where it differs from real MM2 4.3.1 (seen there): in
its shapes-only mode a checkpoint partition names the upstream topic, where MM2 names the remote
one (``a.orders``); its checkpoints translate by a fixed shift, not through offset syncs; and it
forgets what it emitted when restarted, where MM2 reads its checkpoints topic back and writes no
checkpoint (nor its connector offset) until the translated offset moves.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from connectops.adapters.kafka import KafkaOffsets, java_partition
from tests.env.plugins import MM2_CHECKPOINT, MM2_HEARTBEAT, MM2_SOURCE, mm2_shapes_jar
from tests.env.servers import ConnectFactory, ConnectWorker, KafkaBroker

pytestmark = pytest.mark.timeout(300)

BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
# Connect 4.3 answers a PATCH that the connector's own alterOffsets rejects (a ConnectException,
# which is what MM2's MirrorUtils throws) with HTTP 500 and the connector's message - not 400,
# which it keeps for requests its runtime rejects itself (e.g. a connector that is not STOPPED).
REJECTED_BY_CONNECTOR = 500


def wait_for(check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except httpx.HTTPError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


class Rest:
    def __init__(self, worker: ConnectWorker) -> None:
        self.client = httpx.Client(base_url=worker.url, timeout=15)

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        deadline = time.monotonic() + 30
        while True:
            response = self.client.request(method, path, **kw)
            if response.status_code != 409 or time.monotonic() > deadline:
                return response
            time.sleep(0.5)

    def put_config(self, name: str, config: dict[str, str]) -> None:
        response = self.call("PUT", f"/connectors/{name}/config", json=config)
        assert response.status_code in (200, 201), response.text

    def state(self, name: str) -> tuple[str | None, list[str]]:
        response = self.call("GET", f"/connectors/{name}/status")
        if response.status_code != 200:
            return None, []
        body = response.json()
        return body["connector"]["state"], [t["state"] for t in body.get("tasks", [])]

    def stop(self, name: str) -> None:
        assert self.call("PUT", f"/connectors/{name}/stop").status_code == 204
        wait_for(lambda: self.state(name) == ("STOPPED", []), timeout=60, what=f"{name} STOPPED, no tasks")

    def resume(self, name: str) -> None:
        assert self.call("PUT", f"/connectors/{name}/resume").status_code == 202
        wait_for(lambda: self.state(name) == ("RUNNING", ["RUNNING"]), timeout=60, what=f"{name} RUNNING")

    def offsets(self, name: str) -> list[dict[str, Any]]:
        """Partitions with an offset. Right after a tombstone (PATCH with a null offset) Connect 4.3
        can still list the partition for a moment, as ``"offset": null``; that means "none"."""
        response = self.call("GET", f"/connectors/{name}/offsets")
        assert response.status_code == 200, response.text
        entries = [e for e in response.json()["offsets"] if e["offset"] is not None]
        return sorted(entries, key=lambda e: sorted(e["partition"].items()))

    def patch(self, name: str, offsets: list[dict[str, Any]]) -> httpx.Response:
        return self.call("PATCH", f"/connectors/{name}/offsets", json={"offsets": offsets})


def count_records(kafka: KafkaBroker, topic: str, partitions: int, expect: int, timeout: float = 30) -> list[Any]:
    consumer = Consumer(kafka.consumer_config(f"count-{uuid.uuid4().hex[:6]}", **{"enable.auto.commit": False}))
    out: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(out) < expect:
            out += [(m.partition(), m.key(), m.value()) for m in consumer.consume(500, 0.5) if m.error() is None]
        out += [(m.partition(), m.key(), m.value()) for m in consumer.consume(500, 1.0) if m.error() is None]
    finally:
        consumer.close()
    return out


@pytest.fixture(scope="module")
def worker(connect_factory: ConnectFactory) -> Iterator[ConnectWorker]:
    started = connect_factory("mm2-shapes", extra_classpath=[mm2_shapes_jar()])
    yield started
    started.stop()  # an idle JVM, and its fetches on the broker, for the rest of the session otherwise


@pytest.fixture
def rest(worker: ConnectWorker) -> Iterator[Rest]:
    client = Rest(worker)
    yield client
    client.client.close()


def test_plugins_are_discovered(rest: Rest) -> None:
    classes = {p["class"] for p in rest.call("GET", "/connector-plugins").json()}
    assert {MM2_SOURCE, MM2_CHECKPOINT, MM2_HEARTBEAT} <= classes


def test_mm2_offset_shapes_alter_rules_and_reset(kafka: KafkaBroker, worker: ConnectWorker, rest: Rest) -> None:
    run = uuid.uuid4().hex[:6]
    alias, upstream = f"east{run}", f"orders{run}"
    remote = f"{alias}.{upstream}"
    admin = AdminClient(kafka.admin_config())
    for future in admin.create_topics([NewTopic(upstream, 2, 1), NewTopic(remote, 2, 1)]).values():
        future.result(timeout=15)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    for i, partition in enumerate([0, 0, 0, 1, 1]):
        producer.produce(upstream, key=b"k%d" % i, value=b"v%d" % i, partition=partition)
        producer.flush(10)

    source, checkpoint, heartbeat = f"mm2-source-{run}", f"mm2-checkpoint-{run}", f"mm2-heartbeat-{run}"
    rest.put_config(
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
    rest.put_config(
        checkpoint,
        {
            "connector.class": MM2_CHECKPOINT,
            "source.cluster.alias": alias,
            "groups": "app",
            "topics": upstream,
            "partitions": "2",
        },
    )
    rest.put_config(
        heartbeat,
        {
            "connector.class": MM2_HEARTBEAT,
            "source.cluster.alias": alias,
            "target.cluster.alias": "west",
            # not `heartbeats`: real MirrorMaker 2 on the same broker makes that topic compacted,
            # which refuses this plugin's keyless records
            "heartbeats.topic": f"heartbeats-{run}",
        },
    )

    # MirrorSourceConnector: {"cluster","topic","partition"} -> the last replicated upstream offset
    source_offsets = [
        {"partition": {"cluster": alias, "partition": 0, "topic": upstream}, "offset": {"offset": 2}},
        {"partition": {"cluster": alias, "partition": 1, "topic": upstream}, "offset": {"offset": 1}},
    ]
    wait_for(lambda: rest.offsets(source) == source_offsets, timeout=60, what="source offsets")
    checkpoint_offsets = [
        {"partition": {"group": "app", "partition": p, "topic": upstream}, "offset": {"offset": 0}} for p in (0, 1)
    ]
    wait_for(lambda: rest.offsets(checkpoint) == checkpoint_offsets, timeout=60, what="checkpoint offsets")
    heartbeat_offsets = [
        {"partition": {"sourceClusterAlias": alias, "targetClusterAlias": "west"}, "offset": {"offset": 0}}
    ]
    wait_for(lambda: rest.offsets(heartbeat) == heartbeat_offsets, timeout=60, what="heartbeat offsets")
    replicated = count_records(kafka, remote, 2, 5)
    assert sorted(replicated) == [
        (0, b"k0", b"v0"),
        (0, b"k1", b"v1"),
        (0, b"k2", b"v2"),
        (1, b"k3", b"v3"),
        (1, b"k4", b"v4"),
    ]

    # The same offsets as raw records in the worker's offsets topic, where the adapter finds them.
    with KafkaOffsets(kafka.bootstrap, timeout_s=15) as ko:
        records = ko.read_connector_offsets(worker.offset_topic, {source, checkpoint, heartbeat})
    maps = sorted((r.connector or "", sorted((r.partition_map or {}).items())) for r in records if r.value)
    assert [m for m in maps if m[0] == source] == [
        (source, [("cluster", alias), ("partition", p), ("topic", upstream)]) for p in (0, 1)
    ]
    assert all(r.partition == java_partition(r.key, worker.offset_partitions) for r in records)

    # The runtime's own refusal, for contrast: a connector that is not STOPPED -> 400.
    running = rest.patch(checkpoint, [{"partition": checkpoint_offsets[0]["partition"], "offset": {"offset": 0}}])
    assert running.status_code == 400, running.text
    for name in (source, checkpoint, heartbeat):
        rest.stop(name)

    # Checkpoint and heartbeat connectors accept only offset 0 (tombstones always).
    rejected = rest.patch(checkpoint, [{"partition": checkpoint_offsets[0]["partition"], "offset": {"offset": 5}}])
    assert rejected.status_code == REJECTED_BY_CONNECTOR, rejected.text
    assert "the only accepted value is 0" in rejected.text
    accepted = rest.patch(checkpoint, [{"partition": checkpoint_offsets[0]["partition"], "offset": {"offset": 0}}])
    assert accepted.status_code == 200, accepted.text
    one = rest.patch(heartbeat, [{"partition": heartbeat_offsets[0]["partition"], "offset": {"offset": 1}}])
    assert one.status_code == REJECTED_BY_CONNECTOR
    missing_key = rest.patch(heartbeat, [{"partition": {"sourceClusterAlias": alias}, "offset": {"offset": 0}}])
    assert missing_key.status_code == REJECTED_BY_CONNECTOR
    assert "'targetClusterAlias' key, which is required" in missing_key.text
    tombstone = rest.patch(checkpoint, [{"partition": checkpoint_offsets[1]["partition"], "offset": None}])
    assert tombstone.status_code == 200, tombstone.text
    assert rest.offsets(checkpoint) == checkpoint_offsets[:1]

    # The source connector: non-negative offsets, MM2's keys.
    negative = rest.patch(source, [{"partition": source_offsets[0]["partition"], "offset": {"offset": -1}}])
    assert negative.status_code == REJECTED_BY_CONNECTOR
    assert "cannot be negative" in negative.text
    no_cluster = {"topic": upstream, "partition": 0}
    assert (
        "'cluster' key, which is required"
        in rest.patch(source, [{"partition": no_cluster, "offset": {"offset": 0}}]).text
    )
    # Rewind partition 0 to "offset 0 replicated": the task resumes at 1, replicating 2 records again.
    rewind = rest.patch(source, [{"partition": source_offsets[0]["partition"], "offset": {"offset": 0}}])
    assert rewind.status_code == 200, rewind.text
    rest.resume(source)
    wait_for(lambda: len(count_records(kafka, remote, 2, 7, timeout=3)) == 7, timeout=60, what="7 remote records")
    wait_for(lambda: rest.offsets(source) == source_offsets, timeout=60, what="source offsets caught up")

    # DELETE offsets (a full reset): with nothing stored MM2 replicates everything again.
    rest.stop(source)
    deleted = rest.call("DELETE", f"/connectors/{source}/offsets")
    assert deleted.status_code == 200, deleted.text
    assert rest.offsets(source) == []
    rest.resume(source)
    wait_for(lambda: len(count_records(kafka, remote, 2, 12, timeout=3)) == 12, timeout=60, what="12 remote records")
    assert rest.call("DELETE", f"/connectors/{checkpoint}/offsets").status_code == 200
    assert rest.offsets(checkpoint) == []
    for name in (source, checkpoint, heartbeat):
        rest.call("DELETE", f"/connectors/{name}")
