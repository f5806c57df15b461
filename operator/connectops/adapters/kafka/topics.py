"""Topic administration: partitions, offsets by time or position, existence, deletion, truncation.

Used by every other concern (an offsets-topic read starts from the watermarks, a write checks the
partition count, a sink reset may start from offsets at a timestamp) and by the MirrorMaker 2
reset, which deletes or truncates MM2's offset-syncs topic. No records are read here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition

# isort: off
# confluent_kafka.admin re-exports these without declaring them public (no __all__ entry).
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    OffsetSpec,
    ResourceType,
)
# isort: on

from connectops.adapters.kafka.client import KafkaClient
from connectops.adapters.kafka.errors import TopicMissing

#: ``(topic, partition)``
TopicPartitionKey = tuple[str, int]
#: ``"earliest"``, ``"latest"`` or a timestamp in ms (checked at run time: plans carry plain strings)
OffsetSpecArg = str | int


class TopicAdmin(KafkaClient):
    """Topic metadata, offsets and deletion through the shared AdminClient."""

    def partition_count(self, topic: str) -> int:
        """Number of partitions of ``topic``; :class:`TopicMissing` if it does not exist."""
        return len(self._partitions(topic, "describe topic"))

    def partitions_for(self, topics: Iterable[str]) -> list[TopicPartitionKey]:
        """All ``(topic, partition)`` of the given topics, sorted; :class:`TopicMissing` if one is absent."""
        out: list[TopicPartitionKey] = []
        for topic in dict.fromkeys(topics):
            out.extend((topic, p) for p in self._partitions(topic, "list partitions"))
        return out

    def topics_matching(self, regex: str) -> list[str]:
        """Topic names that fully match ``regex`` (as Java's ``Pattern.matcher(t).matches()``,
        which Connect's ``topics.regex`` and MM2's filters use), sorted."""
        pattern = re.compile(regex)
        md = self._metadata("list topics")
        return sorted(str(t) for t in md.topics if pattern.fullmatch(str(t)))

    def topic_exists(self, topic: str) -> bool:
        md = self._metadata("list topics")
        return topic in md.topics

    def list_offsets(
        self,
        topic_partitions: Iterable[TopicPartitionKey],
        spec: OffsetSpecArg,
        *,
        read_committed: bool = False,
    ) -> dict[TopicPartitionKey, int]:
        """Offsets per partition for ``spec``: ``"earliest"``, ``"latest"`` or a timestamp in ms.

        For a timestamp the answer is the first offset whose record timestamp is at or after it;
        where no such record exists Kafka answers -1, and this returns the partition's end offset
        instead (where a consumer positioned "at that time" would start, as
        ``kafka-consumer-groups --to-datetime`` does).
        """
        tps = list(dict.fromkeys(topic_partitions))
        if not tps:
            return {}
        offset_spec: Any
        if spec == "earliest":
            offset_spec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        elif spec == "latest":
            offset_spec = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        elif isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
            offset_spec = OffsetSpec.for_timestamp(spec)
        else:
            raise ValueError(f"spec must be 'earliest', 'latest' or a timestamp in ms, not {spec!r}")
        operation = f"list offsets ({spec})"
        admin = self._admin_client()
        level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        futures = self._call(
            operation,
            lambda: admin.list_offsets(
                {TopicPartition(t, p): offset_spec for t, p in tps},
                isolation_level=level,
                request_timeout=self.timeout_s,
            ),
        )
        out: dict[TopicPartitionKey, int] = {}
        for tp, future in futures.items():
            info = self._result(future, operation, f"{tp.topic}[{tp.partition}]")
            out[(str(tp.topic), int(tp.partition))] = int(info.offset)
        if isinstance(spec, int):
            beyond = [tp for tp, offset in out.items() if offset < 0]
            if beyond:
                out.update(self.list_offsets(beyond, "latest", read_committed=read_committed))
        return out

    def watermarks(self, topic: str, *, read_committed: bool = False) -> dict[int, tuple[int, int]]:
        """``{partition: (low watermark, end offset)}`` for every partition of ``topic``."""
        tps = [(topic, p) for p in self._partitions(topic, "read watermarks")]
        low = self.list_offsets(tps, "earliest")
        high = self.list_offsets(tps, "latest", read_committed=read_committed)
        return {p: (low[(topic, p)], high[(topic, p)]) for _, p in tps}

    # -- deletion -------------------------------------------------------------------------------

    def delete_topic(self, topic: str) -> bool:
        """Delete ``topic``; False when it did not exist (a success)."""
        operation = f"delete topic {topic!r}"
        admin = self._admin_client()
        futures = self._call(
            operation,
            lambda: admin.delete_topics([topic], operation_timeout=self.timeout_s, request_timeout=self.timeout_s),
        )
        try:
            self._result(futures[topic], operation)
        except TopicMissing:
            return False
        return True

    def truncate_topic(self, topic: str) -> dict[int, int]:
        """Delete every record of ``topic`` (DeleteRecords up to each partition's end offset).

        Returns ``{partition: new low watermark}``; ``{}`` when the topic does not exist (nothing
        to truncate). The topic itself, its configs and ACLs stay, unlike :meth:`delete_topic`.

        The broker refuses DeleteRecords (POLICY_VIOLATION) on a topic whose ``cleanup.policy``
        has no ``delete``, and MirrorMaker 2 creates its offset-syncs topic compact-only. For such
        a topic ``delete`` is added to the policy for the call and taken away again afterwards:
        the window cannot cost records (every record is being deleted anyway), but an operator
        that dies inside it leaves ``compact,delete`` on the topic.
        """
        operation = f"truncate topic {topic!r}"
        try:
            marks = self.watermarks(topic)
        except TopicMissing:
            return {}
        targets = [TopicPartition(topic, p, end) for p, (low, end) in sorted(marks.items()) if end > low]
        out = {p: low for p, (low, _) in marks.items()}
        if not targets:
            return out
        if "delete" in self._cleanup_policy(topic):
            return {**out, **self._delete_records(targets, operation)}
        self._alter_cleanup_policy(topic, AlterConfigOpType.APPEND)
        try:
            return {**out, **self._delete_records(targets, operation)}
        finally:
            self._alter_cleanup_policy(topic, AlterConfigOpType.SUBTRACT)

    def _delete_records(self, targets: list[TopicPartition], operation: str) -> dict[int, int]:
        admin = self._admin_client()
        futures = self._call(
            operation,
            lambda: admin.delete_records(targets, operation_timeout=self.timeout_s, request_timeout=self.timeout_s),
        )
        out = {}
        for tp, future in futures.items():
            deleted = self._result(future, operation, f"partition {tp.partition}")
            out[int(tp.partition)] = int(deleted.low_watermark)
        return out

    def _cleanup_policy(self, topic: str) -> set[str]:
        """The topic's ``cleanup.policy`` values (``{"compact"}``, ``{"delete"}``, both)."""
        operation = f"describe configs of topic {topic!r}"
        admin = self._admin_client()
        resource = ConfigResource(ResourceType.TOPIC, topic)
        futures = self._call(operation, lambda: admin.describe_configs([resource], request_timeout=self.timeout_s))
        configs = self._result(next(iter(futures.values())), operation)
        entry = configs.get("cleanup.policy")
        value = str(entry.value) if entry is not None and entry.value is not None else "delete"
        return {v.strip() for v in value.split(",") if v.strip()}

    def _alter_cleanup_policy(self, topic: str, op: AlterConfigOpType) -> None:
        """Add (APPEND) or take away (SUBTRACT) ``delete`` in the topic's ``cleanup.policy``,
        leaving its other values as they are."""
        operation = f"{'add' if op is AlterConfigOpType.APPEND else 'remove'} cleanup.policy delete on topic {topic!r}"
        admin = self._admin_client()
        resource = ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[ConfigEntry("cleanup.policy", "delete", incremental_operation=op)],
        )
        futures = self._call(
            operation, lambda: admin.incremental_alter_configs([resource], request_timeout=self.timeout_s)
        )
        self._result(next(iter(futures.values())), operation)


__all__ = ["OffsetSpecArg", "TopicAdmin", "TopicPartitionKey"]
