"""Sink connectors' offsets: the consumer group each sink reads as, through the AdminClient.

A sink connector's offsets are not in Connect's offsets topics but in its consumer group
(``connect-<name>`` unless overridden), so resetting one means deleting the group or committing
new offsets to it, which Kafka allows only while the group has no members. This module reads,
describes, deletes and alters groups and names the members that block a change.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from connectops import fence
from connectops.adapters.kafka.client import KafkaClient
from connectops.adapters.kafka.errors import GroupActive, KafkaOffsetsError, KafkaUnavailable
from connectops.adapters.kafka.topics import TopicPartitionKey

log = logging.getLogger(__name__)

#: What one admin commit may carry, estimated. Kafka writes an OffsetCommit as ONE batch to
#: ``__consumer_offsets``, under that topic's ``max.message.bytes`` (1 MiB by default): a commit of
#: ~10,000 partitions is refused whole (an UNKNOWN error on every partition, nothing committed),
#: measured on Apache Kafka 4.3.1 (benchmarks/README.md, the sink over 19,250 partitions). Half
#: of the default leaves room for the record framing the estimate does not count.
COMMIT_BATCH_BYTES = 512 * 1024
#: per partition beyond its group and topic names: the key's and value's fixed fields, the
#: commit timestamp, the empty metadata and the record's framing (~60 bytes measured), rounded up
COMMIT_RECORD_OVERHEAD = 80


def commit_chunks(
    group: str, offsets: Mapping[TopicPartitionKey, int], budget: int = COMMIT_BATCH_BYTES
) -> list[list[TopicPartition]]:
    """``offsets`` in commits that each fit ``budget`` bytes, in partition order."""
    chunks: list[list[TopicPartition]] = []
    current: list[TopicPartition] = []
    size = 0
    for (topic, partition), offset in sorted(offsets.items()):
        cost = len(group.encode()) + len(topic.encode()) + COMMIT_RECORD_OVERHEAD
        if current and size + cost > budget:
            chunks.append(current)
            current, size = [], 0
        current.append(TopicPartition(topic, partition, offset))
        size += cost
    if current:
        chunks.append(current)
    return chunks


class ConsumerGroupOffsets(KafkaClient):
    """Committed offsets, members and deletion of consumer groups."""

    def group_offsets(self, group: str) -> dict[TopicPartitionKey, int]:
        """Committed offsets of ``group``; ``{}`` when the group does not exist or has none."""
        operation = f"list offsets of group {group!r}"
        admin = self._admin_client()
        futures = self._call(
            operation,
            lambda: admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s
            ),
        )
        result = self._result(futures[group], operation)
        out: dict[TopicPartitionKey, int] = {}
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise self._error(tp.error, operation, f"{tp.topic}[{tp.partition}]")
            if tp.offset >= 0:  # -1001 (OFFSET_INVALID): nothing committed for that partition
                out[(str(tp.topic), int(tp.partition))] = int(tp.offset)
        return out

    def group_members(self, group: str) -> list[str] | None:
        """Client ids (``client@host``) of the group's members; ``None`` if the group is unknown."""
        operation = f"describe group {group!r}"
        admin = self._admin_client()
        futures = self._call(operation, lambda: admin.describe_consumer_groups([group], request_timeout=self.timeout_s))
        try:
            desc = futures[group].result(timeout=self.timeout_s + 5)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return None
            raise self._from_exception(exc, operation) from None
        except Exception as exc:
            raise self._from_exception(exc, operation) from None
        if getattr(desc.state, "name", "") == "DEAD":
            return None
        return [f"{m.client_id}@{m.host}" for m in desc.members or []]

    def group_exists(self, group: str) -> bool:
        """Whether the cluster lists ``group`` (in any state, including Empty with offsets)."""
        operation = "list consumer groups"
        admin = self._admin_client()
        future = self._call(operation, lambda: admin.list_consumer_groups(request_timeout=self.timeout_s))
        result = self._result(future, operation)
        if result.errors:
            # Partial answers (one broker failed) cannot prove absence.
            raise self._from_exception(result.errors[0], operation)
        return any(g.group_id == group for g in result.valid or [])

    def _group_active(self, group: str, operation: str, cause: KafkaOffsetsError) -> GroupActive:
        """The broker said the group has members: name them if a describe can (best effort)."""
        try:
            members = self.group_members(group)
        except KafkaOffsetsError:
            members = None
        who = f" ({', '.join(sorted(members)[:5])})" if members else ""
        return GroupActive(
            f"{operation}: group {group!r} still has members{who}; Kafka answered {cause.code}",
            operation=operation,
            code=cause.code,
        )

    def delete_group(self, group: str) -> bool:
        """Delete consumer group ``group`` and with it all its committed offsets (a sink reset).

        Returns False when the group did not exist (a success: nothing to reset). Raises
        :class:`GroupActive` while it has members (DeleteGroups answers NON_EMPTY_GROUP), e.g. a
        sink whose tasks have not left the group yet. The group is looked up with ListGroups
        first instead of relying on DeleteGroups' GROUP_ID_NOT_FOUND alone: some Kafka-protocol
        brokers never answer DeleteGroups for an unknown group.
        """
        fence.check()
        operation = f"delete group {group!r}"
        if not self.group_exists(group):
            return False
        admin = self._admin_client()
        futures = self._call(operation, lambda: admin.delete_consumer_groups([group], request_timeout=self.timeout_s))
        try:
            futures[group].result(timeout=self.timeout_s + 5)
        except Exception as exc:
            err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return False
            mapped = self._from_exception(exc, operation)
            if isinstance(mapped, GroupActive):
                raise self._group_active(group, operation, mapped) from None
            raise mapped from None
        return True

    def alter_group_offsets(self, group: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Commit ``offsets`` for ``group`` (creating the group if needed).

        Kafka accepts admin commits only while the group has no members: otherwise this raises
        :class:`GroupActive` (UNKNOWN_MEMBER_ID per partition from the coordinator). A commit is
        idempotent, so one dropped connection is retried here at once.

        Many partitions go in several commits (:func:`commit_chunks`), since Kafka refuses one
        larger than ``__consumer_offsets``' message size whole. No consumer sees the halfway
        state (the group has no members while this runs), and a failure between two commits
        leaves the earlier ones in place: the caller reads the group back, as after any failed
        change, and a rerun commits them all again.
        """
        fence.check()
        operation = f"alter offsets of group {group!r}"
        if not offsets:
            return
        for (topic, partition), offset in offsets.items():
            if offset < 0:
                raise ValueError(f"offset for {topic}[{partition}] must be >= 0, not {offset}")
        for chunk in commit_chunks(group, offsets):
            self._alter_chunk(group, ConsumerGroupTopicPartitions(group, chunk), operation)

    def _alter_chunk(self, group: str, request: ConsumerGroupTopicPartitions, operation: str) -> None:
        for attempt in (1, 2):
            try:
                self._alter_once(group, request, operation)
            except GroupActive as exc:
                raise self._group_active(group, operation, exc) from None
            except KafkaUnavailable as exc:
                if attempt == 2 or exc.code != "_TRANSPORT":
                    raise
                log.info("%s: connection dropped, retrying once", operation)
            else:
                return

    def _alter_once(self, group: str, request: ConsumerGroupTopicPartitions, operation: str) -> None:
        admin = self._admin_client()
        futures = self._call(
            operation, lambda: admin.alter_consumer_group_offsets([request], request_timeout=self.timeout_s)
        )
        result = self._result(futures[group], operation)
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise self._error(tp.error, operation, f"{tp.topic}[{tp.partition}]")


__all__ = ["COMMIT_BATCH_BYTES", "ConsumerGroupOffsets", "commit_chunks"]
