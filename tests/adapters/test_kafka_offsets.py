"""The Kafka offsets adapter against a real Apache Kafka broker and real Kafka Connect workers.

Nothing is mocked: group membership, ListOffsets by time, end offsets after batches, DeleteRecords
and a fetch waiting at the log end are Apache Kafka's own behaviour.
"""

from __future__ import annotations

import json
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from connectops.adapters.kafka import (
    GroupActive,
    KafkaClientConfigInvalid,
    KafkaOffsets,
    KafkaOffsetsError,
    KafkaUnavailable,
    OffsetRecord,
    TombstoneVerificationFailed,
    TopicMissing,
    checkpoints_topic_name,
    java_partition,
    murmur2,
    offset_syncs_topic_name,
    parse_offset_key,
)
from tests.env.servers import FILESTREAM_SOURCE, ConnectFactory, ConnectWorker, KafkaBroker

pytestmark = pytest.mark.timeout(240)

FILESTREAM_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def wait_for(check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.25) -> Any:
    """The first truthy result of ``check`` within ``timeout`` seconds, else fail."""
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


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


class Rest:
    """Just enough of Connect's REST API for these tests (409s during rebalances are retried)."""

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

    def status(self, name: str) -> dict[str, Any]:
        response = self.call("GET", f"/connectors/{name}/status")
        return response.json() if response.status_code == 200 else {}

    def wait_running(self, name: str) -> None:
        def running() -> bool:
            st = self.status(name)
            tasks = st.get("tasks", [])
            return (
                st.get("connector", {}).get("state") == "RUNNING"
                and bool(tasks)
                and all(t["state"] == "RUNNING" for t in tasks)
            )

        wait_for(running, timeout=60, what=f"{name} RUNNING with running tasks")

    def stop(self, name: str) -> None:
        assert self.call("PUT", f"/connectors/{name}/stop").status_code == 204

        def stopped() -> bool:
            st = self.status(name)
            return st.get("connector", {}).get("state") == "STOPPED" and not st.get("tasks")

        wait_for(stopped, timeout=60, what=f"{name} STOPPED with no tasks")

    def resume(self, name: str) -> None:
        assert self.call("PUT", f"/connectors/{name}/resume").status_code == 202

    def offsets(self, name: str) -> list[dict[str, Any]]:
        response = self.call("GET", f"/connectors/{name}/offsets")
        assert response.status_code == 200, response.text
        return list(response.json()["offsets"])

    def delete(self, name: str) -> None:
        self.call("DELETE", f"/connectors/{name}")


def create_topic(kafka: KafkaBroker, topic: str, partitions: int) -> None:
    admin = AdminClient(kafka.admin_config())
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(timeout=15)
    kafka.wait_for_leaders(topic, partitions)


def produce(
    kafka: KafkaBroker,
    topic: str,
    records: list[tuple[int, bytes | None, bytes | None]],
    *,
    one_batch: bool = False,
    timestamps: list[int] | None = None,
) -> None:
    """Produce ``(partition, key, value)`` records; flushed one by one unless ``one_batch``."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50 if one_batch else 0})
    for i, (partition, key, value) in enumerate(records):
        ts = timestamps[i] if timestamps else 0
        producer.produce(topic, key=key, value=value, partition=partition, timestamp=ts)
        if not one_batch:
            assert producer.flush(10) == 0
    assert producer.flush(10) == 0


def read_all(kafka: KafkaBroker, topic: str, expect: int, timeout: float = 30) -> list[tuple[int, int, Any, Any]]:
    """``(partition, offset, key, value)`` of at least ``expect`` records of ``topic``."""
    admin = AdminClient(kafka.admin_config())
    parts = list(admin.list_topics(topic=topic, timeout=10).topics[topic].partitions)
    consumer = Consumer(kafka.consumer_config(unique("read-all"), **{"enable.auto.commit": False}))
    out: list[tuple[int, int, Any, Any]] = []
    try:
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in parts])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                assert msg.error() is None, msg.error()
                out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
            if len(out) >= expect:
                # Give records beyond the expected count a moment to show up too.
                for msg in consumer.consume(500, timeout=1.0):
                    out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
                break
    finally:
        consumer.close()
    return out


def offsets_key(connector: str, partition: dict[str, Any]) -> bytes:
    """A key as Connect's JsonConverter writes it (compact JSON, no spaces)."""
    return json.dumps([connector, partition], separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def ko(kafka: KafkaBroker) -> Iterator[KafkaOffsets]:
    with KafkaOffsets(kafka.bootstrap, timeout_s=15) as offsets:
        yield offsets


@pytest.fixture(scope="module")
def worker(connect_factory: ConnectFactory) -> Iterator[ConnectWorker]:
    """A worker group of its own (offsets topic with 25 partitions, the Connect default)."""
    started = connect_factory("kafka-offsets", offset_partitions=25)
    yield started
    started.stop()  # an idle JVM, and its fetches on the broker, for the rest of the session otherwise


@pytest.fixture
def rest(worker: ConnectWorker) -> Iterator[Rest]:
    client = Rest(worker)
    yield client
    client.client.close()


# --------------------------------------------------------------------------------------------------
# pure functions
# --------------------------------------------------------------------------------------------------

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (kafka-clients): the Java client's own vectors.
KAFKA_MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    bytes([ord("a"), ord("b"), ord("c")]): 479470107,
}


def test_murmur2_matches_kafka_utils_test_vectors() -> None:
    for data, expected in KAFKA_MURMUR2_VECTORS.items():
        assert murmur2(data) == expected, data


def test_java_partition_masks_the_sign_bit() -> None:
    # toPositive(n) is n & 0x7fffffff, not abs(n): for b"21" the two differ.
    h = murmur2(b"21")
    assert h < 0
    assert java_partition(b"21", 25) == (h & 0x7FFFFFFF) % 25 == 15
    assert java_partition(b"21", 25) != abs(h) % 25
    assert java_partition(b"", 1) == 0
    with pytest.raises(ValueError, match="positive"):
        java_partition(b"x", 0)


@pytest.mark.skipif(not hasattr(confluent_kafka, "murmur2"), reason="confluent-kafka < 2.16 has no murmur2")
def test_java_partition_agrees_with_confluent_kafka_murmur2() -> None:
    # confluent-kafka 2.16 ships a "Java-compatible" murmur2 partition helper: a second opinion.
    for i in range(500):
        key = bytes((i * 7 + j) % 256 for j in range(i % 67))
        for n in (1, 7, 25, 50):
            assert java_partition(key, n) == confluent_kafka.murmur2(key, n)


def test_offset_syncs_and_checkpoints_topic_names() -> None:
    # On the source cluster (the default since KIP-716): named after the TARGET alias.
    assert offset_syncs_topic_name("east", "west") == "mm2-offset-syncs.west.internal"
    # On the target cluster: named after the SOURCE alias.
    assert offset_syncs_topic_name("east", "west", "target") == "mm2-offset-syncs.east.internal"
    assert offset_syncs_topic_name("east", "west", separator="_") == "mm2-offset-syncs_west_internal"
    # replication.policy.internal.topic.separator.enabled=false: internal topics keep ".".
    assert (
        offset_syncs_topic_name("east", "west", separator="_", internal_separator_enabled=False)
        == "mm2-offset-syncs.west.internal"
    )
    assert checkpoints_topic_name("east") == "east.checkpoints.internal"
    assert checkpoints_topic_name("east", "_") == "east_checkpoints_internal"
    with pytest.raises(ValueError, match="location"):
        offset_syncs_topic_name("a", "b", "elsewhere")  # type: ignore[arg-type]


def test_parse_offset_key_shapes() -> None:
    assert parse_offset_key(b'["c1",{"filename":"/x"}]') == ("c1", {"filename": "/x"})
    assert parse_offset_key('["naïve \\"q\\" \\\\ ,",{"a":1}]'.encode()) == ('naïve "q" \\ ,', {"a": 1})
    for bad in (None, b"", b"not json", b'{"a":1}', b'["c1"]', b'["c1",[1]]', b"[1,{}]"):
        assert parse_offset_key(bad) is None


def test_errors_never_carry_client_config_values(kafka: KafkaBroker) -> None:
    secret = "hunter2-sasl-password-value"
    bad = KafkaOffsets(kafka.bootstrap, {"sasl.password": secret, "security.protocol": "bogus-proto-x"})
    with pytest.raises(KafkaClientConfigInvalid) as info:
        bad.partitions_for(["anything"])
    assert secret not in str(info.value)
    assert "bogus-proto-x" not in str(info.value)
    assert "sasl.password" in str(info.value)  # names are fine, values are not
    assert not info.value.retryable

    dead = KafkaOffsets("127.0.0.1:1", {"sasl.password": secret, "client.id": "cid-hunter2"}, timeout_s=2)
    with pytest.raises(KafkaUnavailable) as unavailable:
        dead.list_offsets([("t", 0)], "latest")
    dead.close()
    assert unavailable.value.retryable
    assert secret not in str(unavailable.value)
    assert "cid-hunter2" not in str(unavailable.value)


# --------------------------------------------------------------------------------------------------
# offsets topics: read, tombstone, verify, restore (synthetic records, exact Connect key format)
# --------------------------------------------------------------------------------------------------


def test_librdkafka_default_partitioner_is_not_the_java_one(kafka: KafkaBroker) -> None:
    """Why tombstones go to an explicit partition: without one, librdkafka hashes with CRC32."""
    topic = unique("partitioner")
    create_topic(kafka, topic, 25)
    key = next(
        k
        for k in (offsets_key("c", {"filename": f"/f{i}"}) for i in range(100))
        if zlib.crc32(k) % 25 != java_partition(k, 25)
    )
    delivered: list[int] = []
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(topic, key=key, value=None, on_delivery=lambda err, msg: delivered.append(msg.partition()))
    assert producer.flush(10) == 0
    assert delivered == [zlib.crc32(key) % 25]  # consistent_random = CRC32: not where Connect put it


def test_scan_finds_latest_record_per_key(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    topic = unique("offsets-synthetic")
    partitions = 5
    create_topic(kafka, topic, partitions)
    a1, a2 = offsets_key("conn-a", {"file": "1"}), offsets_key("conn-a", {"file": "2"})
    b1 = offsets_key("conn-b", {"file": "1"})
    esc = offsets_key('conn-a "quoted"', {"file": "1"})  # escapes: the slow path of the key filter
    records: list[tuple[int, bytes | None, bytes | None]] = []
    for n in range(1, 6):
        records += [
            (java_partition(a1, partitions), a1, b'{"position":%d}' % n),
            (java_partition(a2, partitions), a2, b'{"position":%d}' % (n * 10)),
            (java_partition(b1, partitions), b1, b'{"position":%d}' % n),
        ]
    records += [
        (java_partition(a2, partitions), a2, None),  # conn-a's file 2: already reset
        (java_partition(esc, partitions), esc, b'{"position":7}'),
        (0, b"garbage", b"x"),
        (1, None, b"no key"),
        # the same key in a partition the Java partitioner would not pick (a buggy tool's write)
        ((java_partition(a1, partitions) + 1) % partitions, a1, b'{"position":99}'),
    ]
    # One batch per partition, as a batching producer writes them: the scan must see every
    # record of a batch.
    produce(kafka, topic, records, one_batch=True)

    scan = ko.scan_connector_offsets(topic, {"conn-a", 'conn-a "quoted"'})
    assert scan.scanned == len(records)
    assert scan.unparseable == 2
    assert scan.matched == 10 + 3  # conn-a x 10, its tombstone, its misplaced copy, the escaped name
    assert scan.partitions == partitions
    by = {(r.partition, r.key): r for r in scan.records}
    assert len(by) == len(scan.records) == 4
    home = java_partition(a1, partitions)
    assert by[(home, a1)].value == b'{"position":5}'
    assert by[(home, a1)].connector == "conn-a"
    assert by[(home, a1)].partition_map == {"file": "1"}
    assert by[(home, a1)].source_offset() == {"position": 5}
    assert by[((home + 1) % partitions, a1)].value == b'{"position":99}'
    assert by[(java_partition(a2, partitions), a2)].is_tombstone
    assert by[(java_partition(esc, partitions), esc)].connector == 'conn-a "quoted"'
    assert [r.key for r in scan.live].count(a1) == 2
    # read_connector_offsets is the list-only form
    only_b = ko.read_connector_offsets(topic, {"conn-b"})
    assert [(r.partition, r.key, r.value) for r in only_b] == [(java_partition(b1, partitions), b1, b'{"position":5}')]
    assert ko.read_connector_offsets(topic, {"nobody"}) == []


def test_tombstones_go_to_the_partition_read_and_are_verified(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    topic = unique("offsets-tomb")
    create_topic(kafka, topic, 25)
    keys = [offsets_key("tomb", {"file": str(i)}) for i in range(6)]
    produce(kafka, topic, [(java_partition(k, 25), k, b'{"position":1}') for k in keys], one_batch=True)
    live = ko.read_connector_offsets(topic, {"tomb"})
    assert len(live) == 6

    written = ko.write_tombstones(live)
    assert sorted((w.partition, w.key, w.value) for w in written) == sorted((r.partition, r.key, None) for r in live)
    ko.verify_tombstones(topic, live)
    after = ko.read_connector_offsets(topic, {"tomb"})
    assert len(after) == 6
    assert all(r.is_tombstone for r in after)
    assert ko.write_tombstones(after) == []  # nothing live: nothing written

    # A connector that was not really stopped commits again after the tombstone:
    produce(kafka, topic, [(java_partition(keys[0], 25), keys[0], b'{"position":2}')])
    with pytest.raises(TombstoneVerificationFailed) as info:
        ko.verify_tombstones(topic, live)
    assert [(m[2], m[4]) for m in info.value.mismatches] == [(keys[0], b'{"position":2}')]
    assert not info.value.retryable
    with pytest.raises(ValueError, match="topic"):
        ko.verify_tombstones("another-topic", live)


def test_restore_records_writes_back_raw_bytes(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    topic = unique("offsets-restore")
    create_topic(kafka, topic, 25)
    keys = [offsets_key("rest", {"f": str(i)}) for i in range(3)]
    produce(kafka, topic, [(java_partition(k, 25), k, b'{"position":%d}' % i) for i, k in enumerate(keys)])
    backup = ko.read_connector_offsets(topic, {"rest"})
    ko.write_tombstones(backup)
    ko.verify_tombstones(topic, backup)

    # A backup as the operator stores it: raw key/value bytes and the partition, no offset.
    restored = [OffsetRecord(r.topic, r.partition, -1, r.key, r.value) for r in backup]
    written = ko.restore_records(restored)
    assert len(written) == 3
    again = {r.key: r.value for r in ko.read_connector_offsets(topic, {"rest"})}
    assert again == {r.key: r.value for r in backup}
    # Restore also writes tombstones (value None) and verifies them.
    ko.restore_records([OffsetRecord(topic, backup[0].partition, -1, backup[0].key, None)])
    assert {r.key: r.value for r in ko.read_connector_offsets(topic, {"rest"})}[backup[0].key] is None


def test_scan_of_a_large_topic_is_batched(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    """~200k records: the scan must go at consume(num_messages=...) speed, not per-poll speed."""
    topic = unique("offsets-large")
    create_topic(kafka, topic, 25)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20, "batch.num.messages": 5000})
    keys = [offsets_key(f"bulk-{c}", {"file": f"/data/{f}"}) for c in range(20) for f in range(50)]
    total = 200_000
    for i in range(total):
        key = keys[i % len(keys)]
        while True:
            try:
                producer.produce(topic, key=key, value=b'{"position":%d}' % i, partition=java_partition(key, 25))
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0
    started = time.monotonic()
    scan = ko.scan_connector_offsets(topic, {"bulk-3", "bulk-7"})
    seconds = time.monotonic() - started
    assert scan.scanned == total
    assert len(scan.records) == 100
    assert scan.matched == total // 10
    # keys[150] (bulk-3) got every 1000th value; its last one is the latest
    assert {r.key: r.value for r in scan.records}[keys[150]] == b'{"position":%d}' % (total - 1000 + 150)
    print(f"scanned {scan.scanned} records in {seconds:.2f}s ({scan.scanned / seconds:,.0f}/s)")
    assert seconds < 60


def test_missing_topic_is_typed(ko: KafkaOffsets) -> None:
    with pytest.raises(TopicMissing) as info:
        ko.read_connector_offsets(unique("no-such-topic"), {"x"})
    assert not info.value.retryable
    with pytest.raises(TopicMissing):
        ko.partitions_for([unique("no-such-topic")])


# --------------------------------------------------------------------------------------------------
# a real FileStreamSource connector: offsets written by Connect itself
# --------------------------------------------------------------------------------------------------


def test_filestream_source_reset_by_tombstones(
    kafka: KafkaBroker, ko: KafkaOffsets, worker: ConnectWorker, rest: Rest, tmp_path: Path
) -> None:
    names = [unique("fs-src") for _ in range(2)]  # each connector costs a rebalance
    files: dict[str, Path] = {}
    target = unique("fs-src-out")
    create_topic(kafka, target, 1)
    for name in names:
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text("alpha\nbeta\ngamma\n")
        rest.put_config(
            name,
            {
                "connector.class": FILESTREAM_SOURCE,
                "tasks.max": "1",
                "file": str(files[name]),
                "topic": target,
            },
        )
    # the whole file read and committed: a busy worker may commit after its first line first
    # (CI27 saw position 6), so wait for the offset of the end, not for any offset
    for name in names:
        wait_for(
            lambda name=name: (
                rest.offsets(name)
                == [{"partition": {"filename": str(files[name])}, "offset": {"position": len("alpha\nbeta\ngamma\n")}}]
            ),
            timeout=60,
            what=f"{name}'s whole file committed, via GET /connectors/{name}/offsets",
        )
    assert len(read_all(kafka, target, 6)) == 6
    victim = names[0]
    rest.stop(victim)

    scan = ko.scan_connector_offsets(worker.offset_topic, {victim})
    assert scan.partitions == worker.offset_partitions == 25
    assert len(scan.records) == 1
    record = scan.records[0]
    assert record.connector == victim
    assert record.partition_map == {"filename": str(files[victim])}
    assert record.source_offset() == {"position": len("alpha\nbeta\ngamma\n")}
    # Connect's Java producer placed the key by murmur2: the adapter's java_partition agrees ...
    assert record.partition == java_partition(record.key, 25)
    # ... and so does every other record Connect wrote to this offsets topic.
    everything = ko.scan_connector_offsets(worker.offset_topic, set(names))
    assert len(everything.records) == 2
    assert all(r.partition == java_partition(r.key, 25) for r in everything.records)

    written = ko.write_tombstones(scan.records)
    assert [(w.partition, w.key) for w in written] == [(record.partition, record.key)]
    ko.verify_tombstones(worker.offset_topic, scan.records)

    # KIP-875 GET on a STOPPED connector reads the offsets topic afresh: the reset shows at once,
    # no worker restart needed.
    assert rest.offsets(victim) == []
    # The other connectors keep theirs.
    assert rest.offsets(names[1]) != []

    rest.resume(victim)
    rest.wait_running(victim)
    # With no stored position the task reads its file from the start again: 3 more records.
    wait_for(lambda: len(read_all(kafka, target, 9, timeout=5)) >= 9, timeout=60, what="9 records")
    values = [json.loads(v) for _, _, _, v in read_all(kafka, target, 9)]
    assert sorted(values) == sorted(["alpha", "beta", "gamma"] * 3)
    wait_for(lambda: rest.offsets(victim), timeout=60, what="new offsets after resume")
    for name in names:
        rest.delete(name)


# --------------------------------------------------------------------------------------------------
# sink connectors: consumer group offsets
# --------------------------------------------------------------------------------------------------


def test_filestream_sink_group_delete_and_alter(
    kafka: KafkaBroker, ko: KafkaOffsets, worker: ConnectWorker, rest: Rest, tmp_path: Path
) -> None:
    name = unique("fs-sink")
    group = f"connect-{name}"
    topic = unique("fs-sink-in")
    create_topic(kafka, topic, 2)
    produce(kafka, topic, [(i % 2, None, json.dumps(f"line-{i}").encode()) for i in range(6)])
    out = tmp_path / "sink.txt"
    rest.put_config(name, {"connector.class": FILESTREAM_SINK, "tasks.max": "1", "file": str(out), "topics": topic})
    wait_for(lambda: out.exists() and len(out.read_text().splitlines()) == 6, timeout=90, what="6 sink lines")
    wait_for(lambda: ko.group_offsets(group) == {(topic, 0): 3, (topic, 1): 3}, timeout=60, what="committed")
    # the running sink task's consumer is a member of the group (DescribeConsumerGroups)
    assert len(ko.group_members(group)) == 1

    rest.stop(name)
    assert ko.group_exists(group)
    assert ko.delete_group(group) is True
    assert ko.group_offsets(group) == {}
    assert ko.delete_group(group) is False  # missing group: success
    assert rest.offsets(name) == []

    ko.alter_group_offsets(group, {(topic, 0): 1})
    assert ko.group_offsets(group) == {(topic, 0): 1}
    assert rest.offsets(name) == [
        {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 1}}
    ]
    rest.resume(name)
    # Partition 0 resumes at offset 1 (2 more lines), partition 1 has no offset: earliest (3 more).
    wait_for(lambda: len(out.read_text().splitlines()) == 11, timeout=90, what="11 sink lines")
    wait_for(lambda: ko.group_offsets(group) == {(topic, 0): 3, (topic, 1): 3}, timeout=60, what="re-committed")
    rest.delete(name)


def test_active_group_is_not_deleted(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    topic, group = unique("active"), unique("active-group")
    create_topic(kafka, topic, 1)
    produce(kafka, topic, [(0, None, b"x")])
    consumer = Consumer(kafka.consumer_config(group, **{"enable.auto.commit": False}))
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.5) is not None, timeout=30, what="a record")
        consumer.commit(asynchronous=False)
        members = ko.group_members(group)
        outcome: object
        try:
            outcome = ko.delete_group(group)
        except GroupActive as exc:
            outcome = exc
        assert members, "an active group lists its members"
        assert isinstance(outcome, GroupActive), outcome
        assert outcome.retryable
    finally:
        consumer.close()


# --------------------------------------------------------------------------------------------------
# ListOffsets, topics
# --------------------------------------------------------------------------------------------------


def test_list_offsets_earliest_latest_and_topics(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    prefix = unique("lo")
    topic = f"{prefix}-a"
    create_topic(kafka, topic, 2)
    create_topic(kafka, f"{prefix}-b", 1)
    produce(kafka, topic, [(0, None, b"a"), (0, None, b"b"), (0, None, b"c"), (1, None, b"d")])
    parts = ko.partitions_for([topic, f"{prefix}-b", topic])
    assert parts == [(topic, 0), (topic, 1), (f"{prefix}-b", 0)]
    assert ko.list_offsets(parts, "earliest") == dict.fromkeys(parts, 0)
    assert ko.list_offsets(parts, "latest") == {(topic, 0): 3, (topic, 1): 1, (f"{prefix}-b", 0): 0}
    assert ko.topics_matching(rf"{prefix}-.*") == [topic, f"{prefix}-b"]
    assert ko.topics_matching(rf"{prefix}") == []  # full match, as Java's Pattern.matches()
    assert ko.list_offsets([], "latest") == {}
    with pytest.raises(ValueError, match="spec"):
        ko.list_offsets(parts, "yesterday")


def test_list_offsets_by_timestamp(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    topic = unique("lo-ts")
    create_topic(kafka, topic, 1)
    base = 1_700_000_000_000
    produce(kafka, topic, [(0, None, b"%d" % i) for i in range(5)], timestamps=[base + i * 1000 for i in range(5)])
    tp = [(topic, 0)]
    # first record at or after the timestamp; past the last record: the end offset
    assert [ko.list_offsets(tp, ts)[(topic, 0)] for ts in (base - 1, base + 2500, base + 4000, base + 9000)] == [
        0,
        3,
        4,
        5,
    ]


def test_latest_offset_after_a_batched_produce(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    topic = unique("lo-batch")
    create_topic(kafka, topic, 1)
    produce(kafka, topic, [(0, None, b"%d" % i) for i in range(5)], one_batch=True)
    assert len(read_all(kafka, topic, 5)) == 5
    assert ko.list_offsets([(topic, 0)], "latest") == {(topic, 0): 5}


def test_a_waiting_fetch_is_answered_when_a_record_arrives(kafka: KafkaBroker) -> None:
    topic = unique("fetch-wait")
    create_topic(kafka, topic, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    # a long wait, so a fetch in flight is still waiting when the record is produced
    consumer = Consumer(kafka.consumer_config(unique("fetch-wait"), **{"fetch.wait.max.ms": 4000}))
    seen: list[float] = []
    try:
        consumer.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        for i in range(3):
            # a record read: the consumer's next fetch is sent at once and waits at the log end
            producer.produce(topic, value=b"%d" % (2 * i))
            producer.flush(10)
            wait_for(lambda: consumer.poll(0.5) is not None, timeout=30, what="the first record")
            time.sleep(0.3)
            producer.produce(topic, value=b"%d" % (2 * i + 1))
            producer.flush(10)
            sent = time.monotonic()
            wait_for(lambda: consumer.poll(0.05) is not None, timeout=30, what="the second record", interval=0)
            seen.append(time.monotonic() - sent)
    finally:
        consumer.close()
    assert max(seen) < 0.5, f"produce -> consume {[round(s, 3) for s in seen]} s"


# --------------------------------------------------------------------------------------------------
# MM2 offset-syncs topic: delete, truncate
# --------------------------------------------------------------------------------------------------


def test_delete_offset_syncs_topic(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    topic = offset_syncs_topic_name(unique("src"), unique("tgt"))
    create_topic(kafka, topic, 1)
    produce(kafka, topic, [(0, b"k", b"v")])
    assert ko.topic_exists(topic)
    assert ko.delete_topic(topic) is True
    wait_for(lambda: not ko.topic_exists(topic), timeout=15, what="topic gone")
    assert ko.delete_topic(topic) is False  # missing: success


def test_truncate_offset_syncs_topic(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    topic = offset_syncs_topic_name(unique("src"), unique("tgt"), "target", separator="_")
    create_topic(kafka, topic, 1)
    produce(kafka, topic, [(0, b"k", b"%d" % i) for i in range(3)])
    high = ko.list_offsets([(topic, 0)], "latest")[(topic, 0)]
    assert high == 3
    assert ko.truncate_topic(topic) == {0: high}
    assert ko.watermarks(topic) == {0: (high, high)}  # low watermark == previous high watermark
    assert ko.truncate_topic(unique("no-such-topic")) == {}


def test_truncate_compacted_offset_syncs_topic_keeps_its_policy(kafka: KafkaBroker, ko: KafkaOffsets) -> None:
    """MirrorMaker 2 creates its offset-syncs topic compact-only, and the broker refuses
    DeleteRecords on such a topic (POLICY_VIOLATION): the truncation adds ``delete`` to the
    policy for the call and leaves the policy as it found it."""
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    topic = offset_syncs_topic_name(unique("src"), unique("tgt"))
    admin = AdminClient(kafka.admin_config())
    new = NewTopic(topic, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"})
    for future in admin.create_topics([new]).values():
        future.result(timeout=15)
    kafka.wait_for_leaders(topic, 1)
    produce(kafka, topic, [(0, b"k%d" % i, b"%d" % i) for i in range(3)])

    def policy() -> str:
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
        return str(next(iter(futures.values())).result(timeout=15)["cleanup.policy"].value)

    assert policy() == "compact"
    assert ko.truncate_topic(topic) == {0: 3}
    assert ko.watermarks(topic) == {0: (3, 3)}
    assert policy() == "compact"


def test_a_commit_larger_than_the_offsets_topic_takes_goes_in_pieces(
    kafka: KafkaBroker, ko: KafkaOffsets, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka writes one OffsetCommit as one batch to __consumer_offsets: past its
    max.message.bytes (1 MiB by default, ~10,000 partitions) the commit is refused whole. Here
    the limit is scaled down on the real broker (16 KiB: a commit of 400 partitions is ~40 KiB)
    so the same refusal comes from a few hundred partitions; the adapter's budget is scaled with
    it, as COMMIT_BATCH_BYTES is half of the default."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    from connectops.adapters.kafka import groups

    topic, group = unique("wide"), unique("wide-group")
    create_topic(kafka, topic, 400)
    wanted = {(topic, p): 7 + p for p in range(400)}
    admin = AdminClient(kafka.admin_config())

    def limit(value: str | None) -> None:
        op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
        entry = ConfigEntry("max.message.bytes", value or "", incremental_operation=op)
        target = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets", incremental_configs=[entry])
        for future in admin.incremental_alter_configs([target]).values():
            future.result(timeout=15)

    first = unique("first")

    def committed() -> bool:  # __consumer_offsets exists from here (its coordinator may be loading)
        try:
            ko.alter_group_offsets(first, {(topic, 0): 1})
        except KafkaUnavailable:
            return False
        return True

    wait_for(committed, timeout=60, what="a first commit")
    limit("16384")
    try:
        # one commit of them all: refused whole, nothing committed
        monkeypatch.setattr(groups.commit_chunks, "__defaults__", (1 << 30,))
        with pytest.raises(KafkaOffsetsError):
            ko.alter_group_offsets(group, wanted)
        assert ko.group_offsets(group) == {}
        # in pieces under the limit: every partition committed, as asked
        monkeypatch.setattr(groups.commit_chunks, "__defaults__", (8192,))
        assert len(groups.commit_chunks(group, wanted)) > 4
        ko.alter_group_offsets(group, wanted)
        assert ko.group_offsets(group) == wanted
    finally:
        limit(None)


def test_commit_chunks_fit_the_default_limit_at_twenty_thousand_partitions() -> None:
    from connectops.adapters.kafka.groups import COMMIT_BATCH_BYTES, commit_chunks

    group = "connect-" + "s" * 200
    offsets = {(f"topic-with-a-long-name-{t:04d}", p): 10**12 for t in range(100) for p in range(200)}
    chunks = commit_chunks(group, offsets)
    assert sorted((c.topic, c.partition) for chunk in chunks for c in chunk) == sorted(offsets)
    # each under half of Kafka's default 1 MiB, counted generously per partition
    for chunk in chunks:
        assert sum(len(group) + len(c.topic) + 80 for c in chunk) <= COMMIT_BATCH_BYTES
    assert len(chunks) < 20
