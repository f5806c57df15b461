"""MirrorMaker 2's internal topics read whole: the checkpoints and the offset-syncs topics.

Both are small (one partition each; one record per group partition whose translated offset
moved, one per sync) and compacted: a failover reads them from their low watermark to their end,
as ``MirrorClient.remoteConsumerOffsets`` reads the checkpoints topic (from the beginning of
partition 0 to its end offset). Records come back as bytes with their timestamps; decoding MM2's
format is the planner's (connectops.planning.group_failover), which knows what a checkpoint means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Message

from connectops.adapters.kafka.errors import TopicMissing
from connectops.adapters.kafka.reader import TopicReader
from connectops.adapters.kafka.topics import TopicAdmin


@dataclass(frozen=True)
class TopicRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


class MirrorTopics(TopicReader, TopicAdmin):
    """Whole reads of MM2's internal topics."""

    def read_topic(self, topic: str) -> list[TopicRecord] | None:
        """Every record of ``topic`` now (its end offsets as listed at the call), in (partition,
        offset) order; None when the topic does not exist."""
        operation = f"read topic {topic!r}"
        try:
            marks = self.watermarks(topic)
        except TopicMissing:
            return None
        ranges = {p: (low, end) for p, (low, end) in marks.items() if end > low}
        out: list[TopicRecord] = []

        def take(batch: list[Message]) -> None:
            for msg in batch:
                partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
                if offset < ranges[partition][1]:
                    _, ts = msg.timestamp()
                    out.append(TopicRecord(partition, offset, msg.key(), msg.value(), int(ts)))

        if ranges:
            budget = self.read_timeout_s
            self._read_to_end(
                topic,
                ranges,
                take,
                budget=budget,
                operation=operation,
                stalled=lambda read, _unfinished: (
                    f"{operation}: not read to the end after {budget:.0f}s ({read} records)"
                ),
            )
        return sorted(out, key=lambda r: (r.partition, r.offset))

    def count_records(self, topic: str, ranges: Mapping[int, tuple[int, int]]) -> dict[int, int]:
        """How many records ``topic`` holds in each partition's ``[start, end)`` of ``ranges``
        (read committed: transaction markers and aborted records are none), within the log now
        (log start to last stable offset); 0 for a partition or topic that is not there. A
        failback counts a few records of a remote topic this way (MM2's syncs are at most
        ``offset.lag.max`` records apart)."""
        operation = f"count records of topic {topic!r}"
        counts = dict.fromkeys(ranges, 0)
        try:
            marks = self.watermarks(topic, read_committed=True)
        except TopicMissing:
            return counts
        windows: dict[int, tuple[int, int]] = {}
        for p, (start, end) in ranges.items():
            low, high = marks.get(p, (0, 0))
            if min(end, high) > max(start, low):
                windows[p] = (max(start, low), min(end, high))

        def take(batch: list[Message]) -> None:
            for msg in batch:
                partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
                start, end = windows.get(partition, (0, 0))
                if start <= offset < end:
                    counts[partition] += 1

        if windows:
            budget = self.read_timeout_s
            self._read_to_end(
                topic,
                windows,
                take,
                budget=budget,
                operation=operation,
                stalled=lambda read, _unfinished: (
                    f"{operation}: not read to the end after {budget:.0f}s ({read} records)"
                ),
            )
        return counts


__all__ = ["MirrorTopics", "TopicRecord"]
