"""Real MirrorMaker 2 in the test environment: its connector configs, and its internal topics read back.

The connectors are Apache Kafka's own (``connect-mirror`` on the Connect worker's classpath, at
the broker's version). What a test asserts about MM2 is read here from the clusters, decoded as
connect-mirror-client encodes it, never taken from the operator:

- ``OffsetSync`` (the offset-syncs topic): key = topic (int16-length string) + partition (int32),
  value = upstream offset (int64) + downstream offset (int64); ``OffsetSync.recordKey/Value``.
- ``Checkpoint`` (``<source>.checkpoints.internal`` on the target): key = group + topic (strings)
  + partition (int32), value = version (int16, 0) + upstream (int64) + downstream (int64) +
  metadata (string); ``Checkpoint.recordKey/Value``. Its topic is the REMOTE topic (``a.orders``).
- :func:`translate_downstream`: ``OffsetSyncStore.translateDownstream`` for the few syncs a test
  writes, so a checkpoint can be checked against the syncs it was computed from.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

MIRROR_SOURCE: Final = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
MIRROR_CHECKPOINT: Final = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
MIRROR_HEARTBEAT: Final = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"
BYTES_CONVERTER: Final = "org.apache.kafka.connect.converters.ByteArrayConverter"

#: The MM2 intervals the tests shorten, and why (MM2's defaults in the comments). Everything
#: else keeps MM2's defaults.
SHORT_INTERVALS: Final = {
    # 60 s: a checkpoint task sleeps this long before each round, its first one included, so
    # every checkpoint would come a minute after each start (and after each reset's restart)
    "emit.checkpoints.interval.seconds": "1",
    # 60 s (and off by default): the translated offsets written to the target's group
    "sync.group.offsets.interval.seconds": "1",
}
# Not shortened: refresh.topics.interval.seconds (600 s) and refresh.groups.interval.seconds
# (600 s). The tests create their topic and commit their group's offsets before the connectors
# start, and MirrorSourceConnector/MirrorCheckpointConnector list topics and groups once when
# they start (again at every restart after a reset); a refresh would only find them again.
# emit.heartbeats.interval.seconds is 1 s already.


def mirror_configs(
    *,
    source_alias: str,
    target_alias: str,
    source_bootstrap: str,
    target_bootstrap: str,
    topics: str,
    groups: str,
    location: str = "source",
    short_intervals: bool = True,
) -> dict[str, dict[str, str]]:
    """The three connectors' configs (``source``, ``checkpoint``, ``heartbeat``) for one flow.

    Replication factors 1 everywhere (MM2's defaults are 2 and 3: a single broker cannot hold
    them); explicit ``topics``, so nothing else (the other flows' topics, MM2's own) is mirrored;
    ``heartbeats.replication.enabled=false``, so the source cluster's ``heartbeats`` topic (were
    there one) is not mirrored back; the default replication policy (``a.orders``), never the
    identity policy. The checkpoint connector reads the offset-syncs topic where the source
    connector writes it, so both get the same ``offset-syncs.topic.location``.
    """
    common = {
        "source.cluster.alias": source_alias,
        "target.cluster.alias": target_alias,
        "source.cluster.bootstrap.servers": source_bootstrap,
        "target.cluster.bootstrap.servers": target_bootstrap,
        # MM2's records are bytes: the worker's JsonConverter would wrap them in JSON strings
        "key.converter": BYTES_CONVERTER,
        "value.converter": BYTES_CONVERTER,
        "offset-syncs.topic.location": location,
    }
    return {
        "source": {
            **common,
            "topics": topics,
            "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "heartbeats.replication.enabled": "false",
            # no authorizer on the test brokers: ACL sync would fail (and log) every 10 minutes
            "sync.topic.acls.enabled": "false",
        },
        "checkpoint": {
            **common,
            "topics": topics,
            "groups": groups,
            "checkpoints.topic.replication.factor": "1",
            "sync.group.offsets.enabled": "true",
            **(SHORT_INTERVALS if short_intervals else {}),
        },
        "heartbeat": {**common, "heartbeats.topic.replication.factor": "1"},
    }


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def read_records(bootstrap: str, topic: str, timeout: float = 30) -> list[Record]:
    """Every record of ``topic`` (none when it does not exist), read from the start of each
    partition to its end offset as the broker reports it now (Apache Kafka's end offsets are
    true: the next record's offset), in (partition, offset) order."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"mm2-read-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "allow.auto.create.topics": False,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(ends) if ends[p] > 0])
        # position = next offset to read; a compacted or truncated partition can end in a gap
        position = dict.fromkeys(ends, 0)
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        while any(position[p] < end for p, end in ends.items()):
            assert time.monotonic() < deadline, f"{topic}: read up to {position}, end offsets {ends}"
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                partition, offset = int(m.partition() or 0), int(m.offset() or 0)
                if m.error() is None and offset < ends[partition]:
                    records.append(Record(partition, offset, m.key(), m.value()))
                    position[partition] = offset + 1
            for tp in consumer.position([TopicPartition(topic, p) for p in ends if ends[p] > 0]):
                if tp.offset >= 0:
                    position[tp.partition] = max(position[tp.partition], tp.offset)
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def values_by_partition(records: Iterable[Record]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for record in records:
        out.setdefault(record.partition, []).append(record.value or b"")
    return out


def _string(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    start = at + 2
    return data[start : start + length].decode(), start + length


@dataclass(frozen=True)
class OffsetSync:
    topic: str
    partition: int
    upstream: int
    downstream: int


def decode_offset_sync(record: Record) -> OffsetSync:
    assert record.key is not None, record
    assert record.value is not None, record
    topic, at = _string(record.key, 0)
    (partition,) = struct.unpack_from(">i", record.key, at)
    upstream, downstream = struct.unpack(">qq", record.value)
    return OffsetSync(topic, partition, upstream, downstream)


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str
    partition: int
    upstream: int
    downstream: int
    metadata: str


def decode_checkpoint(record: Record) -> Checkpoint:
    assert record.key is not None, record
    assert record.value is not None, record
    group, at = _string(record.key, 0)
    topic, at = _string(record.key, at)
    (partition,) = struct.unpack_from(">i", record.key, at)
    version, upstream, downstream = struct.unpack_from(">hqq", record.value, 0)
    assert version == 0, f"checkpoint value version {version}"
    metadata, _ = _string(record.value, 18)
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


def offset_syncs(bootstrap: str, topic: str, upstream_topic: str) -> dict[int, list[OffsetSync]]:
    """The syncs of ``upstream_topic``'s partitions in the offset-syncs ``topic``, in log order."""
    out: dict[int, list[OffsetSync]] = {}
    for record in read_records(bootstrap, topic):
        sync = decode_offset_sync(record)
        if sync.topic == upstream_topic:
            out.setdefault(sync.partition, []).append(sync)
    return out


def checkpoints(bootstrap: str, topic: str, group: str) -> dict[int, list[Checkpoint]]:
    """``group``'s checkpoints by partition of the remote topic, in log order."""
    out: dict[int, list[Checkpoint]] = {}
    for record in read_records(bootstrap, topic):
        checkpoint = decode_checkpoint(record)
        if checkpoint.group == group:
            out.setdefault(checkpoint.partition, []).append(checkpoint)
    return out


def translate_downstream(syncs: Iterable[OffsetSync], upstream: int) -> int | None:
    """``OffsetSyncStore.translateDownstream`` over ``syncs`` (one partition's, in log order).

    A sync whose upstream offset is below the one before it (the source rewound: a reset) clears
    the store, so only the syncs after the last rewind count. Then the latest sync at or before
    ``upstream`` translates it: to its downstream offset when equal, one past it when the group
    is further (MM2 cannot know how many of the records between were replicated); -1 when every
    sync is past the group (too old to translate); None with no sync at all. Exact for the few
    syncs a test writes (the store thins out syncs only when it holds more than 64 per partition).
    """
    kept: list[OffsetSync] = []
    for sync in syncs:
        if kept and sync.upstream < kept[-1].upstream:
            kept = []
        kept.append(sync)
    if not kept:
        return None
    at_or_before = [s for s in kept if s.upstream <= upstream]
    if not at_or_before:
        return -1
    sync = at_or_before[-1]
    return sync.downstream + (0 if sync.upstream == upstream else 1)


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """``group``'s committed offsets of ``topic`` (OffsetFetch), partitions without one left out."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in committed if tp.offset >= 0}
    finally:
        consumer.close()


def consume_and_commit(bootstrap: str, group: str, topic: str, upto: Mapping[int, int]) -> dict[int, list[bytes]]:
    """A consumer of ``group`` reads each partition from the start up to ``upto[p]`` (exclusive)
    and commits that position, as an application that processed those records; returns what it
    read. It leaves the group with no member (an inactive group, as MM2's group sync wants)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    read: dict[int, list[bytes]] = {p: [] for p in upto}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in upto])
        deadline = time.monotonic() + 30
        while any(len(read[p]) < n for p, n in upto.items()) and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=100, timeout=0.5):
                partition = int(m.partition() or 0)
                if m.error() is None and len(read[partition]) < upto[partition]:
                    read[partition].append(m.value() or b"")
        assert all(len(read[p]) == n for p, n in upto.items()), f"read {read}, wanted {dict(upto)}"
        commit_retrying(consumer, [TopicPartition(topic, p, n) for p, n in upto.items()])
    finally:
        consumer.close()
    return read


def commit_retrying(consumer: Any, offsets: list[Any], timeout: float = 30) -> None:
    """A synchronous commit, again while the error is retriable: a broker just started answers
    COORDINATOR_LOAD_IN_PROGRESS until it has loaded its __consumer_offsets partitions."""
    from confluent_kafka import KafkaError, KafkaException

    waits = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR}
    deadline = time.monotonic() + timeout
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            code = error.args[0]
            if not (code.retriable() or code.code() in waits) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        else:
            return


def topic_config(bootstrap: str, topic: str) -> dict[str, Any]:
    """The topic's configs as the broker describes them."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    configs = next(iter(futures.values())).result(timeout=15)
    return {name: entry.value for name, entry in configs.items()}
