"""The job's reading of MM2's offset syncs, and its count of what a failing-over consumer reads
again, against a mirror simulated here record by record.

The simulation follows connect-mirror 4.3.1, independently of ``connectops_check.offset_syncs``:
MirrorSourceTask copies each upstream record to the next target offset, and writes a sync for
the first record it copies, whenever the upstream offsets skip one (OffsetSyncWriter's
``skippedUpstreamRecord``) and at some other records (its delayed syncs, at commits); the
checkpoint is ``OffsetSyncStore.translateDownstream`` of the group's offset over those syncs.
The count to match is then taken from the simulated target's records: those at or after the
checkpoint's downstream offset whose upstream offset the group had already passed. The real
clusters: tests/e2e/test_mm2_check.py.
"""

from __future__ import annotations

import random
import struct

import pytest

from connectops_check.offset_syncs import (
    OffsetSync,
    SyncLog,
    decode_offset_sync,
    failover_reread,
    offset_syncs_topic,
)
from connectops_check.serialize import to_json
from connectops_check.snapshot import ConnectorKind, FailoverReread, Snapshot
from connectops_check.verdict import failover_block

TOPIC = "orders"


def record_key(topic: str, partition: int) -> bytes:
    # OffsetSync.KEY_SCHEMA: topic STRING (int16 length + UTF-8), partition INT32, big-endian
    raw = topic.encode()
    return struct.pack(">h", len(raw)) + raw + struct.pack(">i", partition)


def record_value(upstream: int, downstream: int) -> bytes:
    # OffsetSync.VALUE_SCHEMA: upstreamOffset INT64, offset INT64
    return struct.pack(">qq", upstream, downstream)


def test_decode_reads_the_protocol_encoding() -> None:
    sync = decode_offset_sync(record_key("é-orders", 7), record_value(41, 1042))
    assert sync == OffsetSync("é-orders", 7, 41, 1042)
    with pytest.raises(ValueError, match="bad string length"):
        decode_offset_sync(struct.pack(">h", 50) + b"short", record_value(1, 2))
    with pytest.raises(ValueError, match="at least 16 bytes"):
        decode_offset_sync(record_key(TOPIC, 0), b"\x00\x01")


@pytest.mark.parametrize(
    ("config", "sep", "topic"),
    [
        ({"source.cluster.alias": "east", "target.cluster.alias": "west"}, ".", "mm2-offset-syncs.west.internal"),
        (
            {"source.cluster.alias": "east", "target.cluster.alias": "west", "offset-syncs.topic.location": "target"},
            ".",
            "mm2-offset-syncs.east.internal",
        ),
        ({"source.cluster.alias": "east"}, "_", "mm2-offset-syncs_target_internal"),
        ({"offset-syncs.topic.location": "target"}, ".", "mm2-offset-syncs.source.internal"),
    ],
)
def test_offset_syncs_topic_follows_the_location(config: dict[str, str], sep: str, topic: str) -> None:
    assert offset_syncs_topic(config, sep) == topic


def test_an_unknown_location_is_refused() -> None:
    with pytest.raises(ValueError, match="only source and target"):
        offset_syncs_topic({"offset-syncs.topic.location": "both"}, ".")


class Mirror:
    """One upstream partition mirrored to a target partition that held ``shift`` records first."""

    def __init__(self, rng: random.Random, records: int, shift: int) -> None:
        offset, self.upstream = 0, []
        for _ in range(records):
            offset += 1 if rng.random() < 0.8 else rng.randint(2, 4)  # gaps: markers, compaction
            self.upstream.append(offset)
        self.target: list[tuple[int, int | None]] = [(d, None) for d in range(shift)]  # (offset, upstream)
        self.syncs: list[OffsetSync] = []
        previous: int | None = None
        for u in self.upstream:
            downstream = len(self.target)
            self.target.append((downstream, u))
            if previous is None or u - previous != 1 or rng.random() < 0.1:
                self.syncs.append(OffsetSync(TOPIC, 0, u, downstream))
            previous = u

    def translate(self, upstream: int) -> int:
        """OffsetSyncStore.translateDownstream, with every sync in the store."""
        sync = [s for s in self.syncs if s.upstream_offset <= upstream][-1]
        return sync.downstream_offset + (0 if sync.upstream_offset == upstream else 1)

    def read_again(self, start: int, committed: int) -> int:
        """From the target's records: read from ``start``, already processed on the source."""
        return sum(1 for d, u in self.target if d >= start and u is not None and u < committed)


@pytest.mark.parametrize("seed", range(20))
def test_the_count_equals_the_records_read_again_on_the_target(seed: int) -> None:
    rng = random.Random(seed)
    mirror = Mirror(rng, records=rng.randint(5, 60), shift=rng.randint(0, 5))
    log = SyncLog()
    log.extend(mirror.syncs)
    first = mirror.upstream[0]
    checked = 0
    for _ in range(30):
        at = rng.randint(first, mirror.upstream[-1] + 1)  # the checkpointed offset
        committed = rng.randint(at, mirror.upstream[-1] + 1)  # the group moved on since
        downstream = mirror.translate(at)
        got = failover_reread(
            log,
            row="g:orders",
            topic=TOPIC,
            partition=0,
            committed=committed,
            checkpoint_downstream=downstream,
            target_end=len(mirror.target),
        )
        want = mirror.read_again(downstream, committed)
        assert got.reread == want, (at, committed, downstream, mirror.syncs)
        assert got.target_offset == downstream
        # the checkpoint lag alone (committed - at) misses the rounding whenever a record lies
        # between the sync and the checkpointed offset
        checked += want > committed - at
    assert checked, "no draw rounded: the test would not show the gap"


def test_syncs_before_a_rewind_are_forgotten() -> None:
    log = SyncLog()
    # replicated 0..9 to 0..9, then MM2 was reset: 0..9 again, to 10..19
    log.extend([OffsetSync(TOPIC, 0, 0, 0), OffsetSync(TOPIC, 0, 9, 9), OffsetSync(TOPIC, 0, 0, 10)])
    got = failover_reread(
        log, row="g:orders", topic=TOPIC, partition=0, committed=6, checkpoint_downstream=11, target_end=20
    )
    assert (got.target_position, got.reread) == (16, 5)


def test_the_target_log_end_caps_the_count_and_no_sync_is_unknown() -> None:
    log = SyncLog()
    log.add(OffsetSync(TOPIC, 0, 5, 100))
    # the group is at 20 on the source, MM2 has copied up to upstream 9 (target end 105)
    got = failover_reread(
        log, row="g:orders", topic=TOPIC, partition=0, committed=20, checkpoint_downstream=101, target_end=105
    )
    assert (got.target_position, got.reread) == (105, 4)
    # a checkpoint past the group's offset (moved back on the source): nothing is read again
    back = failover_reread(
        log, row="g:orders", topic=TOPIC, partition=0, committed=6, checkpoint_downstream=103, target_end=None
    )
    assert (back.target_position, back.reread) == (101, 0)
    unknown = failover_reread(
        log, row="g:orders", topic=TOPIC, partition=0, committed=4, checkpoint_downstream=100, target_end=None
    )
    assert (unknown.target_position, unknown.reread) == (None, None)
    other = failover_reread(
        log, row="g:other", topic="other", partition=0, committed=9, checkpoint_downstream=0, target_end=None
    )
    assert other.reread is None


def test_the_snapshot_keeps_the_counts_and_the_verdict_reports_them() -> None:
    snap = Snapshot(
        connector="mm2-checkpoint",
        kind=ConnectorKind.MIRROR_CHECKPOINT,
        failover=[
            FailoverReread("g:orders", 1, 10, None, None),
            FailoverReread("g:orders", 0, 3, 9, 6),
        ],
    )
    again = Snapshot.from_dict(snap.to_dict())
    assert again.failover == snap.failover
    assert to_json(failover_block(again)) == {
        "total": 6,
        "unknown": 1,
        "partitions": [
            {"topic": "g:orders", "partition": 0, "targetOffset": 3, "targetPosition": 9, "reread": 6},
            {"topic": "g:orders", "partition": 1, "targetOffset": 10, "targetPosition": None, "reread": None},
        ],
    }
    # a snapshot written before the counts were collected reads as none known
    old = snap.to_dict()
    del old["failover"]
    assert Snapshot.from_dict(old).failover == []
    assert failover_block(Snapshot.from_dict(old)) is None
    assert failover_block(Snapshot(connector="s", kind=ConnectorKind.MIRROR_SOURCE, failover=snap.failover)) is None
