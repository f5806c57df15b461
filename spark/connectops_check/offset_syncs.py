"""MirrorMaker 2's offset syncs, and what a consumer group failing over would read again.

Checkpoint lag (``collect``) is the group's committed offset on the source minus the
``upstreamOffset`` of its latest checkpoint. A consumer failing over does not start at that
upstream offset but at the checkpoint's DOWNSTREAM offset, which MM2 rounds:
``OffsetSyncStore.translateDownstream`` (connect-mirror 4.3.1) takes the latest offset sync at
or before the group's upstream offset and answers its downstream offset when they are equal,
one past it otherwise (it cannot know how many of the records between were replicated). So the
consumer reads again the checkpoint lag PLUS the records between that sync and the checkpointed
offset: this module counts both, per partition, from the offset syncs themselves.

The offset-syncs topic (``MirrorCheckpointConfig.offsetSyncsTopic``): ``mm2-offset-syncs<sep>
<alias><sep>internal``, where ``<alias>`` is the target's alias when ``offset-syncs.topic.location``
is ``source`` (the default; the topic is then on the source cluster) and the source's when it is
``target`` (on the target cluster); ``<sep>`` is the internal-topic separator. MM2 reads only its
partition 0. A record (``OffsetSync.java``, Kafka's protocol encoding): key ``(topic STRING,
partition INT32)`` naming the UPSTREAM partition, value ``(upstreamOffset INT64, offset INT64)``,
``offset`` being the downstream one. Decoded here: the job never imports the operator (the
import-linter contract), whose planner decodes the same records for GroupFailover.

Where a target offset is: MirrorSourceTask writes a sync whenever the upstream offsets skip one
(``OffsetSyncWriter.PartitionState.update``: ``skippedUpstreamRecord``), so between two syncs both
sides advance one record at a time, and upstream offset ``u`` is at target offset
``t.downstream + (u - t.upstream)`` for the latest sync ``t`` at or before it (at most the next
sync's downstream offset: ``u`` may fall in the gap the next sync marks). A sync below the
one before it (the source rewound: an MM2 reset) forgets the earlier ones, as the store does.
The count is then exact for a dense target; fewer records are read where the target has gaps
(transaction markers of an exactly-once worker), so it is an upper bound there.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from connectops_check.snapshot import FailoverReread

OFFSET_SYNCS_PREFIX = "mm2-offset-syncs"
#: ``offset-syncs.topic.location`` values (MirrorConnectorConfig); ``source`` is the default
LOCATION_SOURCE = "source"
LOCATION_TARGET = "target"
#: MirrorConnectorConfig's default aliases, used when the connector's config names none
DEFAULT_SOURCE_ALIAS = "source"
DEFAULT_TARGET_ALIAS = "target"


class OffsetSync(NamedTuple):
    """One record of MM2's offset-syncs topic (``org.apache.kafka.connect.mirror.OffsetSync``)."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int


def protocol_string(data: bytes, pos: int) -> tuple[str, int]:
    """Kafka protocol STRING: int16 length, then that many UTF-8 bytes (MM2's checkpoints too)."""
    (length,) = struct.unpack_from(">h", data, pos)
    end = pos + 2 + length
    if length < 0 or end > len(data):
        raise ValueError(f"bad string length {length} at byte {pos}")
    return data[pos + 2 : end].decode("utf-8"), end


def decode_offset_sync(key: bytes, value: bytes) -> OffsetSync:
    """``OffsetSync.deserializeRecord``; ValueError for a record that is not one."""
    try:
        topic, pos = protocol_string(key, 0)
        (partition,) = struct.unpack_from(">i", key, pos)
        upstream, downstream = struct.unpack_from(">qq", value, 0)
    except (struct.error, UnicodeDecodeError) as error:
        raise ValueError(str(error)) from error
    return OffsetSync(topic, partition, upstream, downstream)


def offset_syncs_location(config: Mapping[str, str]) -> str:
    """``offset-syncs.topic.location``: ``source`` or ``target``; ValueError for anything else
    (MM2 refuses it too: the setting has a ValidString validator)."""
    location = (config.get("offset-syncs.topic.location") or LOCATION_SOURCE).strip()
    if location not in (LOCATION_SOURCE, LOCATION_TARGET):
        raise ValueError(f"offset-syncs.topic.location {location!r}: MM2 knows only source and target")
    return location


def offset_syncs_topic(config: Mapping[str, str], internal_sep: str) -> str:
    """The topic the checkpoint connector reads its syncs from (module docstring)."""
    if offset_syncs_location(config) == LOCATION_SOURCE:
        other = config.get("target.cluster.alias") or DEFAULT_TARGET_ALIAS
    else:
        other = config.get("source.cluster.alias") or DEFAULT_SOURCE_ALIAS
    return f"{OFFSET_SYNCS_PREFIX}{internal_sep}{other}{internal_sep}internal"


class SyncLog:
    """The syncs of each upstream partition since its last rewind, in log order."""

    def __init__(self) -> None:
        self.by_partition: dict[tuple[str, int], list[OffsetSync]] = {}

    def add(self, sync: OffsetSync) -> None:
        kept = self.by_partition.setdefault((sync.topic, sync.partition), [])
        if kept and sync.upstream_offset < kept[-1].upstream_offset:
            kept.clear()  # OffsetSyncStore.updateSyncArray: an upstream rewind clears the store
        kept.append(sync)

    def extend(self, syncs: Iterable[OffsetSync]) -> None:
        for sync in syncs:
            self.add(sync)

    def target_position(self, topic: str, partition: int, upstream: int) -> int | None:
        """The target offset of the first record at or after upstream offset ``upstream``
        (module docstring); None when no sync is at or before it. An offset in a gap of the
        source (skipped between a sync and the next) is where the next sync's record landed."""
        syncs = self.by_partition.get((topic, partition), [])
        before = [i for i, s in enumerate(syncs) if s.upstream_offset <= upstream]
        if not before:
            return None
        sync = syncs[before[-1]]
        position = sync.downstream_offset + (upstream - sync.upstream_offset)
        later = syncs[before[-1] + 1 :]
        return min(position, later[0].downstream_offset) if later else position


def failover_reread(
    log: SyncLog,
    *,
    row: str,
    topic: str,
    partition: int,
    committed: int,
    checkpoint_downstream: int,
    target_end: int | None,
) -> FailoverReread:
    """The records a consumer starting at ``checkpoint_downstream`` on the target reads before it
    reaches what the group had processed on the source (``committed``, its next offset there):
    none when the checkpoint is at or past it (a group moved back on the source skips records
    instead, which a GroupFailover refuses)."""
    position = log.target_position(topic, partition, committed)
    if position is not None and target_end is not None:
        position = min(position, target_end)
    reread = None if position is None else max(0, position - checkpoint_downstream)
    return FailoverReread(row, partition, checkpoint_downstream, position, reread)
