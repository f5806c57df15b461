"""Hand-built snapshots for known-answer tests, and a way to run either metric engine.

A partition's history is written as two lists (log-end per sample, committed per sample), so
each test shows the exact numbers its expected answer is worked out from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from connectops_check import metrics, reference
from connectops_check.frames import snapshot_tables
from connectops_check.results import MetricResults
from connectops_check.snapshot import (
    ConnectorKind,
    Member,
    PartitionSample,
    Sample,
    Snapshot,
    TaskInfo,
    TopicPartition,
    WindowStartOffset,
)

INTERVAL_MS = 10_000


@dataclass(frozen=True)
class History:
    topic: str
    partition: int
    log_end: Sequence[int]
    offsets: Sequence[int | None]  # committed (sink) or stored (MM2) per sample
    log_start: int | None = 0


def snapshot(
    histories: Sequence[History],
    *,
    kind: ConnectorKind = ConnectorKind.SINK,
    members: list[Member] | None = None,
    tasks: list[TaskInfo] | None = None,
    window_start: Sequence[tuple[str, int, int]] = (),
    connector_state: str = "RUNNING",
) -> Snapshot:
    n = len(histories[0].log_end)
    samples = []
    for i in range(n):
        parts = []
        for h in histories:
            assert len(h.log_end) == n, "every history needs one log-end per sample"
            assert len(h.offsets) == n, "every history needs one offset per sample"
            off = h.offsets[i]
            parts.append(
                PartitionSample(
                    h.topic,
                    h.partition,
                    h.log_end[i],
                    committed=off if kind is ConnectorKind.SINK else None,
                    stored=off if kind is ConnectorKind.MIRROR_SOURCE else None,
                    log_start=h.log_start,
                )
            )
        samples.append(Sample(ts_ms=i * INTERVAL_MS, partitions=parts))
    return Snapshot(
        connector="c1",
        kind=kind,
        connector_class="org.apache.kafka.connect.file.FileStreamSinkConnector",
        connector_state=connector_state,
        tasks=tasks if tasks is not None else [TaskInfo(0, "w:8083", "RUNNING")],
        samples=samples,
        window_start_ms=0,
        window_start_offsets=[WindowStartOffset(t, p, o) for t, p, o in window_start],
        members=members,
        group_id="connect-c1",
    )


def member(task_id: int | None, *tps: tuple[str, int], name: str | None = None) -> Member:
    member_id = name or f"m{task_id}"
    return Member(
        member_id=member_id,
        client_id=f"connector-consumer-c1-{task_id}" if task_id is not None else member_id,
        task_id=task_id,
        assignment=[TopicPartition(t, p) for t, p in tps],
    )


def run_engine(engine: str, spark: SparkSession, snap: Snapshot, window: int = 10, top_n: int = 20) -> MetricResults:
    tables = snapshot_tables(snap)
    if engine == "spark":
        return metrics.compute(spark, tables, window=window, top_n=top_n)
    return reference.compute(tables, window=window, top_n=top_n)


def partition_rows(
    engine: str, spark: SparkSession, snap: Snapshot, window: int = 10
) -> dict[tuple[str, int], dict[str, object]]:
    """Per-partition lag, basis, status, complete and traffic, keyed by (topic, partition)."""
    tables = snapshot_tables(snap)
    cols = ["topic", "partition", "lag", "basis", "status", "complete", "traffic", *RATE_COLUMNS]
    if engine == "spark":
        rows = [r.asDict() for r in metrics.partition_frame(spark, tables, window).select(*cols).collect()]
    else:
        frame = reference.partition_frame(tables, window)[cols]
        rows = [{k: v.item() if hasattr(v, "item") else v for k, v in r.items()} for r in frame.to_dict("records")]
    return {(str(r["topic"]), int(str(r["partition"]))): _normalise(r) for r in rows}


#: float columns: NaN (pandas) and null (Spark) both mean unknown; compared to 9 digits
RATE_COLUMNS = ["time_lag_s", "consume_rate", "produce_rate", "eta_s"]


def _normalise(row: dict[str, object]) -> dict[str, object]:
    out = dict(row)
    for key in RATE_COLUMNS:
        value = out[key]
        out[key] = None if value is None or math.isnan(float(str(value))) else round(float(str(value)), 9)
    return out
