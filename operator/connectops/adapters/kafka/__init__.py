"""Kafka-side offsets: Connect's offsets topics, sink consumer groups, MM2's offset-syncs topic.

Everything here talks to Kafka through confluent-kafka (librdkafka); there is no hand-written
protocol code. The adapter owns its wire format (the ``[connectorName, partitionMap]`` JSON keys of
Connect's offsets topics, the Java producer's murmur2 partitioner, MM2's topic naming) and turns
every failure into a typed :class:`KafkaOffsetsError` whose text never carries client config
values (``client_config`` may hold SASL passwords or key-store secrets).

Blocking by design: every public method is synchronous and may block for up to its timeout
(librdkafka calls block, and a full read of a big offsets topic takes seconds). Async callers run
them in a worker thread, e.g. ``await asyncio.to_thread(kafka.read_connector_offsets, topic,
{name})``. Methods are safe to call from several threads at once: each read or write uses its own
short-lived consumer or producer (their delivery callbacks and positions must not mix between
callers); only the thread-safe AdminClient is shared.

Written for, and tested against, Apache Kafka. Brokers that speak the protocol but implement
less of it surface as the same typed errors.

One module per concern, :class:`KafkaOffsets` composes them:

- :mod:`.errors`: the typed failures (:class:`KafkaOffsetsError` and its subclasses);
- :mod:`.codec`: the wire format: murmur2 partitioning, MM2 topic names, offsets keys, records;
- :mod:`.client`: client construction, error translation, topic metadata (shared by the rest);
- :mod:`.topics`: topic admin: partitions, offsets by spec, watermarks, deletion, truncation;
- :mod:`.reader`: the one loop that reads partitions to their end;
- :mod:`.offsets_topic`: Connect's offsets topics: scan, tombstones, restore, verification;
- :mod:`.groups`: sink connectors' consumer-group offsets.
"""

from __future__ import annotations

from connectops.adapters.kafka.codec import (
    OffsetRecord,
    RawRecord,
    WrittenRecord,
    checkpoints_topic_name,
    java_partition,
    murmur2,
    offset_syncs_topic_name,
    parse_offset_key,
)
from connectops.adapters.kafka.errors import (
    GroupActive,
    KafkaAccessDenied,
    KafkaClientConfigInvalid,
    KafkaOffsetsError,
    KafkaUnavailable,
    ProduceFailed,
    RestoreVerificationFailed,
    TombstoneVerificationFailed,
    TopicMissing,
    VerificationFailed,
)
from connectops.adapters.kafka.groups import ConsumerGroupOffsets
from connectops.adapters.kafka.mirror_topics import MirrorTopics, TopicRecord
from connectops.adapters.kafka.offsets_topic import ConnectOffsetsTopics, OffsetScan


class KafkaOffsets(ConnectOffsetsTopics, ConsumerGroupOffsets, MirrorTopics):
    """Kafka access for offset resets: Connect offsets topics, consumer groups, MM2 topics.

    ``client_config`` holds librdkafka properties (``security.protocol``, ``sasl.*``,
    ``ssl.*``…) applied to every client; ``bootstrap`` wins over any ``bootstrap.servers`` in it.
    ``timeout_s`` bounds each broker round trip and each write's delivery; full-topic reads get
    their own budget (``read_timeout_s``, default four times ``timeout_s``).

    The methods come from the concern classes: :class:`~.offsets_topic.ConnectOffsetsTopics`
    (with :class:`~.topics.TopicAdmin` and :class:`~.reader.TopicReader`) and
    :class:`~.groups.ConsumerGroupOffsets`, all on one :class:`~.client.KafkaClient`, so they
    share one AdminClient, one configuration and one redactor.
    """


__all__ = [
    "GroupActive",
    "KafkaAccessDenied",
    "KafkaClientConfigInvalid",
    "KafkaOffsets",
    "KafkaOffsetsError",
    "KafkaUnavailable",
    "OffsetRecord",
    "OffsetScan",
    "ProduceFailed",
    "RawRecord",
    "RestoreVerificationFailed",
    "TombstoneVerificationFailed",
    "TopicMissing",
    "TopicRecord",
    "VerificationFailed",
    "WrittenRecord",
    "checkpoints_topic_name",
    "java_partition",
    "murmur2",
    "offset_syncs_topic_name",
    "parse_offset_key",
]
