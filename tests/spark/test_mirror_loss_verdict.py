"""The check's MIRROR_RECORDS_LOST rule on hand-made snapshots (the real one, against real
MirrorMaker 2 after DeleteRecords, is tests/e2e/test_mm2_loss.py): only the last sample counts,
a partition MM2 never stored an offset for cannot have lost anything MM2 was meant to copy, and
MM2 exactly at the log-start lost nothing."""

from __future__ import annotations

from connectops_check.serialize import to_json
from connectops_check.snapshot import ConnectorKind, PartitionSample, Sample, Snapshot
from connectops_check.verdict import Settings, build


def snapshot(*samples: list[PartitionSample]) -> Snapshot:
    return Snapshot(
        connector="mm2",
        kind=ConnectorKind.MIRROR_SOURCE,
        samples=[Sample(ts_ms=1000 * i, partitions=list(rows)) for i, rows in enumerate(samples)],
    )


def test_loss_per_partition_from_the_last_sample() -> None:
    first = [PartitionSample("t", 0, 20, stored=9, log_start=15)]
    last = [
        PartitionSample("t", 0, 20, stored=14, log_start=15),  # resumed at the log-start: nothing lost now
        PartitionSample("t", 1, 12, stored=5, log_start=9),  # next offset 6, log-start 9: 3 lost
        PartitionSample("t", 2, 12, stored=None, log_start=9),  # never stored: MM2 starts at earliest
        PartitionSample("u", 0, 30, stored=19, log_start=25),  # 5 lost
    ]
    doc = to_json(build(snapshot(first, last), None, Settings()))
    assert doc["loss"] == {
        "total": 8,
        "partitions": [
            {"topic": "t", "partition": 1, "firstLost": 6, "logStart": 9, "lost": 3},
            {"topic": "u", "partition": 0, "firstLost": 20, "logStart": 25, "lost": 5},
        ],
    }
    reason = next(r for r in doc["reasons"] if r["code"] == "MIRROR_RECORDS_LOST")
    assert reason["severity"] == "UNHEALTHY"
    assert "8 records" in reason["message"]
    assert "t-1: 3, u-0: 5" in reason["message"]


def test_no_loss_block_for_other_kinds_and_no_reason_when_nothing_is_lost() -> None:
    healthy = to_json(build(snapshot([PartitionSample("t", 0, 20, stored=14, log_start=15)]), None, Settings()))
    assert healthy["loss"] == {"total": 0, "partitions": []}
    assert not any(r["code"] == "MIRROR_RECORDS_LOST" for r in healthy["reasons"])
    sink = Snapshot(connector="s", kind=ConnectorKind.SINK, samples=[Sample(0, [PartitionSample("t", 0, 5, 1)])])
    assert build(sink, None, Settings()).loss is None
