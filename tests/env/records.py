"""Reading a topic's records back, for assertions in tests and benchmarks."""

from __future__ import annotations

import time
import uuid
from typing import Any


def _read_topic(bootstrap: str, topic: str, idle: float, *, one_partition: bool = False) -> list[Any]:
    """Every record of ``topic`` (a missing topic has none), read from the start until it stays
    quiet for ``idle`` seconds (at most 30 s). ``one_partition``: the topic must have exactly one
    partition, so the records come in offset order."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10)
        if topic not in meta.topics or meta.topics[topic].error is not None:
            return []
        partitions = sorted(meta.topics[topic].partitions)
        if one_partition:
            assert partitions == [0], f"{topic} has partitions {partitions}: values are ordered per partition"
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[Any] = []
        quiet_since, deadline = time.monotonic(), time.monotonic() + 30
        while time.monotonic() - quiet_since < idle and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=1000, timeout=0.3)
            real = [m for m in batch if m.error() is None]
            if real:
                records.extend(real)
                quiet_since = time.monotonic()
        return records
    finally:
        consumer.close()


def topic_record_count(bootstrap: str, topic: str, idle: float = 2.0) -> int:
    """Records in ``topic``, counted by reading it from the start until it stays quiet.

    Not from watermarks: KafkaBroker reports a partition's end offset as the last *batch*'s base offset
    + 1 (a 3-record batch moves it by one), where Apache Kafka reports the next record's offset.
    """
    return len(_read_topic(bootstrap, topic, idle))


def topic_values(bootstrap: str, topic: str, idle: float = 2.0) -> list[str]:
    """Every record value of a one-partition ``topic``, in offset order, read from the start
    until it stays quiet (what a connector wrote, as a reader sees it)."""
    return [(m.value() or b"").decode() for m in _read_topic(bootstrap, topic, idle, one_partition=True)]


def batching_producer(bootstrap: str) -> Any:
    """A confluent-kafka Producer that batches as producers in production do (records lingered
    for 20 ms share a batch), so end offsets are tested after multi-record batches."""
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})


def partition_record_counts(bootstrap: str, topic: str, idle: float = 1.5) -> dict[int, int]:
    """Records per partition of ``topic``, counted by reading every record (never from watermarks)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    try:
        meta = consumer.list_topics(topic, timeout=10)
        partitions = sorted(meta.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        counts = dict.fromkeys(partitions, 0)
        quiet_since, deadline = time.monotonic(), time.monotonic() + 30
        while time.monotonic() - quiet_since < idle and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(num_messages=1000, timeout=0.3) if m.error() is None]
            for message in batch:
                counts[message.partition()] += 1
            if batch:
                quiet_since = time.monotonic()
        return counts
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """ListOffsets "latest" per partition, as the operator's toLatest and lag read them."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions})
    return {tp.partition: int(f.result(timeout=15).offset) for tp, f in futures.items()}


def assert_end_offsets_true(bootstrap: str, topic: str) -> dict[int, int]:
    """Fail unless the broker's end offset of every partition equals the records it holds.

    Called before a test trusts an end offset (toLatest, lag): the figure it checks then comes
    from records counted, not from the same broker answer the code under test reads."""
    counted = partition_record_counts(bootstrap, topic)
    reported = end_offsets(bootstrap, topic)
    assert reported == counted, (
        f"end offsets of {topic} are not true: the broker says {reported}, the partitions hold {counted} record(s)"
    )
    return reported


def records_up_to_now(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Any]:
    """Every record of ``topic`` from the start up to the end offsets it had when asked (each
    partition read to its end, whatever comes after), in partition then offset order. For a
    topic whose history is the truth (a worker's offsets or status topic): nothing later counts,
    and reading stops at the ends instead of waiting for quiet."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"history-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        seen = dict.fromkeys(partitions, 0)
        found: list[Any] = []
        deadline = time.monotonic() + timeout
        while any(seen[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen[msg.partition()] = msg.offset() + 1
            if msg.offset() < ends[msg.partition()]:
                found.append(msg)
        return sorted(found, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()
