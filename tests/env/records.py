"""Reading a topic's records back, for assertions in tests and benchmarks."""

from __future__ import annotations

import time
import uuid


def topic_record_count(bootstrap: str, topic: str, idle: float = 2.0) -> int:
    """Records in ``topic``, counted by reading it from the start until it stays quiet.

    Not from watermarks: Tansu reports a partition's end offset as the last *batch*'s base offset
    + 1 (a 3-record batch moves it by one), where Apache Kafka reports the next record's offset.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"count-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10)
        if topic not in meta.topics or meta.topics[topic].error is not None:
            return 0
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.topics[topic].partitions])
        count, quiet_since, deadline = 0, time.monotonic(), time.monotonic() + 30
        while time.monotonic() - quiet_since < idle and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=1000, timeout=0.3)
            real = [m for m in batch if m.error() is None]
            if real:
                count += len(real)
                quiet_since = time.monotonic()
        return count
    finally:
        consumer.close()
