"""KafkaOffsets.count_records against a real Apache Kafka broker: what a failback counts in a
remote topic between an offset sync and the group's position (planning.group_failover's
plan_failback). A transactional producer writes as an exactly-once MM2 worker does: each
transaction ends with a marker that occupies an offset and is no record, and an aborted
transaction's records are none either (read committed, as an application reading the topic).
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from connectops.adapters.kafka import KafkaOffsets
from tests.env.servers import KafkaBroker

pytestmark = pytest.mark.timeout(120)


def test_markers_and_aborted_records_are_not_counted(kafka: KafkaBroker) -> None:
    topic = f"remote-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(kafka.admin_config())  # held: a dropped client never answers its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    kafka.wait_for_leaders(topic, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"t-{topic}"})
    producer.init_transactions(30)
    # offsets: 0 1 2 records, 3 marker; 4 5 aborted, 6 marker; 7 8 records, 9 marker
    for values, commit in (([b"r0", b"r1", b"r2"], True), ([b"x4", b"x5"], False), ([b"r7", b"r8"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value, partition=0)
        if commit:
            producer.commit_transaction(30)
        else:
            assert producer.flush(30) == 0  # on the broker first: abort_transaction drops what is queued
            producer.abort_transaction(30)
    producer.flush(10)
    del producer
    with KafkaOffsets(kafka.bootstrap, timeout_s=15) as ko:
        # the coordinator writes the markers after commit_transaction returns: the last stable
        # offset reaches the end a moment later
        deadline = time.monotonic() + 30
        while ko.watermarks(topic, read_committed=True) != {0: (0, 10)}:
            assert time.monotonic() < deadline, ko.watermarks(topic, read_committed=True)
            time.sleep(0.2)
        assert ko.count_records(topic, {0: (0, 10)}) == {0: 5}
        assert ko.count_records(topic, {0: (1, 8)}) == {0: 3}  # r1 r2 r7
        assert ko.count_records(topic, {0: (3, 7)}) == {0: 0}  # a marker, aborted records, a marker
        # past the log end: counted up to it (a group's offset cannot be further); no partition, none
        assert ko.count_records(topic, {0: (7, 50), 3: (0, 5)}) == {0: 2, 3: 0}
        assert ko.count_records(f"{topic}-missing", {0: (0, 5)}) == {0: 0}
