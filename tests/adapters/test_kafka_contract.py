"""The Kafka calls of an offset reset (``reset_run.KafkaApi``), one contract for ``FakeKafka`` and
for ``KafkaOffsets`` against a real Apache Kafka broker: same values, same errors. Groups are
written only through the admin API.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from connectops.adapters.kafka import KafkaOffsets, TopicMissing
from connectops.reconcilers.reset_run import KafkaApi
from tests.doubles.kafka import FakeKafka
from tests.env.servers import KafkaBroker

pytestmark = pytest.mark.timeout(120)


@dataclass
class Backend:
    api: KafkaApi
    fake: FakeKafka | None
    broker: KafkaBroker | None = None

    def create_topic(self, topic: str, partitions: int) -> None:
        if self.fake is not None:
            self.fake.create_topic(topic, partitions)
            return
        assert self.broker is not None
        admin = AdminClient(self.broker.admin_config())
        for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
            future.result(timeout=15)
        self.broker.wait_for_leaders(topic, partitions)

    def produce(self, topic: str, partition: int, count: int) -> None:
        """``count`` records, batched as a producer does."""
        if self.fake is not None:
            self.fake.produce(topic, partition, count)
            return
        assert self.broker is not None
        producer = Producer({"bootstrap.servers": self.broker.bootstrap, "linger.ms": 20})
        for i in range(count):
            producer.produce(topic, value=b"%d" % i, partition=partition)
        assert producer.flush(10) == 0


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.e2e)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "fake":
        fake = FakeKafka()
        yield Backend(fake, fake)
        return
    broker: KafkaBroker = request.getfixturevalue("kafka")
    with KafkaOffsets(broker.bootstrap, timeout_s=15) as offsets:
        yield Backend(offsets, None, broker)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_partitions_and_list_offsets(backend: Backend) -> None:
    prefix = unique("kc")
    a, b = f"{prefix}-a", f"{prefix}-b"
    backend.create_topic(a, 2)
    backend.create_topic(b, 1)
    backend.produce(a, 0, 3)
    backend.produce(a, 1, 1)
    api = backend.api
    parts = api.partitions_for([a, b, a])
    assert parts == [(a, 0), (a, 1), (b, 0)]
    assert api.list_offsets(parts, "earliest") == dict.fromkeys(parts, 0)
    assert api.list_offsets(parts, "latest") == {(a, 0): 3, (a, 1): 1, (b, 0): 0}
    assert api.list_offsets([], "latest") == {}
    assert api.topics_matching(rf"{prefix}-.*") == [a, b]
    assert api.topics_matching(prefix) == []  # a full match, as Java's Pattern.matches()
    with pytest.raises(ValueError, match="spec"):
        api.list_offsets(parts, "yesterday")
    with pytest.raises(TopicMissing, match=f"topic '{prefix}-none' does not exist"):
        api.partitions_for([a, f"{prefix}-none"])


def test_consumer_group_offsets(backend: Backend) -> None:
    topic, group = unique("kc-g"), unique("connect-sink")
    backend.create_topic(topic, 2)
    backend.produce(topic, 0, 4)
    backend.produce(topic, 1, 2)
    api = backend.api
    assert api.group_offsets(group) == {}
    assert api.delete_group(group) is False  # no group: nothing to reset, a success

    api.alter_group_offsets(group, {(topic, 0): 2, (topic, 1): 1})  # creates the group
    assert api.group_offsets(group) == {(topic, 0): 2, (topic, 1): 1}
    api.alter_group_offsets(group, {(topic, 0): 3})  # only the named partition changes
    assert api.group_offsets(group) == {(topic, 0): 3, (topic, 1): 1}
    api.alter_group_offsets(group, {})  # nothing to commit: no call
    assert api.group_offsets(group) == {(topic, 0): 3, (topic, 1): 1}
    with pytest.raises(ValueError, match="must be >= 0"):
        api.alter_group_offsets(group, {(topic, 1): -1})
    assert api.group_offsets(group) == {(topic, 0): 3, (topic, 1): 1}

    assert api.delete_group(group) is True
    assert api.group_offsets(group) == {}
    assert api.delete_group(group) is False


def test_delete_topic(backend: Backend) -> None:
    topic = unique("kc-syncs")
    backend.create_topic(topic, 1)
    backend.produce(topic, 0, 2)
    api = backend.api
    assert api.partitions_for([topic]) == [(topic, 0)]
    assert api.topic_exists(topic) is True
    assert api.delete_topic(topic) is True
    with pytest.raises(TopicMissing):
        api.partitions_for([topic])
    assert api.topic_exists(topic) is False
    assert api.delete_topic(topic) is False  # gone already: a success
