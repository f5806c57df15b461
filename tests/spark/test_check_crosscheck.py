"""Spark and the pandas reference agree on generated snapshots of a few hundred partitions.

The generator scripts every behaviour (see ``connectops_check.synthetic``), and the test first
checks that each Burrow status and each lag basis really occurs, so agreement is not agreement
on a trivial input.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from pyspark.sql import SparkSession

from connectops_check import metrics
from connectops_check.frames import snapshot_tables
from connectops_check.results import MetricResults
from connectops_check.snapshot import ConnectorKind, Snapshot, TopicPartition
from connectops_check.synthetic import random_snapshot
from tests.spark.check_helpers import partition_rows, run_engine

pytestmark = pytest.mark.spark


def assert_same(spark_res: MetricResults, pandas_res: MetricResults) -> None:
    """Exact equality, except floats (sums are order-dependent): equal to 1e-9 relative."""
    _same(dataclasses.asdict(spark_res), dataclasses.asdict(pandas_res), "results")


def _same(x: object, y: object, where: str) -> None:
    if isinstance(x, dict) and isinstance(y, dict):
        assert x.keys() == y.keys(), where
        for key in x:
            _same(x[key], y[key], f"{where}.{key}")
    elif isinstance(x, list | tuple) and isinstance(y, list | tuple):
        assert len(x) == len(y), where
        for i, (a, b) in enumerate(zip(x, y, strict=True)):
            _same(a, b, f"{where}[{i}]")
    elif isinstance(x, float) or isinstance(y, float):
        assert x is not None, (where, y)
        assert y is not None, (where, x)
        assert x == pytest.approx(y, rel=1e-9, abs=1e-12), where
    else:
        assert x == y, (where, x, y)


@pytest.mark.parametrize(
    ("seed", "kind", "partitions", "window", "samples"),
    [
        (1, ConnectorKind.SINK, 300, 10, 12),
        (2, ConnectorKind.SINK, 400, 10, 12),
        (3, ConnectorKind.MIRROR_SOURCE, 300, 5, 12),
        # more samples than the per-partition table carries: the lag series is its own aggregation
        (6, ConnectorKind.SINK, 200, 10, metrics.SERIES_COLUMNS_MAX + 8),
    ],
)
def test_spark_matches_pandas(
    spark: SparkSession, seed: int, kind: ConnectorKind, partitions: int, window: int, samples: int
) -> None:
    snap = random_snapshot(partitions, samples=samples, seed=seed, kind=kind)

    spark_rows = partition_rows("spark", spark, snap, window)
    pandas_rows = partition_rows("pandas", spark, snap, window)
    assert len(spark_rows) == partitions
    statuses = {r["status"] for r in spark_rows.values()}
    bases = {r["basis"] for r in spark_rows.values()}
    assert statuses == {"OK", "WARN", "STOP", "STALL", "REWIND"}
    assert {"committed", "earliest"} <= bases
    assert spark_rows == pandas_rows

    spark_res = run_engine("spark", spark, snap, window, top_n=25)
    pandas_res = run_engine("pandas", spark, snap, window, top_n=25)
    assert spark_res.total_lag > 0
    assert spark_res.members
    assert spark_res.unassigned_partitions
    # the new columns are exercised, not all unknown
    assert any(r["time_lag_s"] for r in spark_rows.values())
    assert any(r["eta_s"] for r in spark_rows.values())
    assert any(r["eta_s"] is None for r in spark_rows.values())
    assert_same(spark_res, pandas_res)


@pytest.mark.parametrize("seed", [4, 5])
def test_spark_matches_pandas_with_partitions_missing_from_samples(spark: SparkSession, seed: int) -> None:
    """A partition can be missing from a sample (its log-end could not be read, or it appeared
    during the window): the long form has no row, the wide one a null; "the previous sample"
    is the previous one the partition is in. A third of the partitions miss random samples,
    the first and the last included, and a few are in one sample only."""
    snap = random_snapshot(300, samples=12, seed=seed)
    rng = random.Random(seed)
    holes = {(f"{tp.topic}", tp.partition) for tp in rng.sample(_partitions(snap), 100)}
    for i, sample in enumerate(snap.samples):
        sample.partitions = [
            p
            for p in sample.partitions
            if (p.topic, p.partition) not in holes or rng.random() < 0.5 or (i == 5 and p.partition % 7 == 0)
        ]
    missing = sum(300 - len(s.partitions) for s in snap.samples)
    assert missing > 300  # the holes are there
    spark_rows = partition_rows("spark", spark, snap, 10)
    assert spark_rows == partition_rows("pandas", spark, snap, 10)
    assert_same(run_engine("spark", spark, snap, 10, top_n=25), run_engine("pandas", spark, snap, 10, top_n=25))


def _partitions(snap: Snapshot) -> list[TopicPartition]:
    return sorted({TopicPartition(p.topic, p.partition) for s in snap.samples for p in s.partitions})


def test_the_samples_are_a_distributed_relation_and_the_session_is_left_as_found(spark: SparkSession) -> None:
    # Small Arrow data would be a local relation, which Spark's optimizer evaluates row by row on
    # the driver (ConvertToLocalRelation: 0.4-0.5 s of a 10,000-partition check); ``load`` keeps
    # the samples distributed at every size, without changing the session's settings.
    snap = random_snapshot(50, samples=3, seed=9)
    # half of the member's partitions to a member of a paused task, which keeps them, alive or not
    (member,) = snap.members or []
    half = len(member.assignment) // 2
    paused = dataclasses.replace(member, member_id="paused", task_id=0, assignment=member.assignment[:half])
    snap = dataclasses.replace(
        snap,
        members=[paused, dataclasses.replace(member, assignment=member.assignment[half:])],
        tasks=[dataclasses.replace(snap.tasks[0], state="PAUSED")],
    )
    tables = snapshot_tables(snap)
    before = {key: spark.conf.get(key, None) for key in (metrics.LOCAL_RELATION_CONF, metrics.BATCH_SIZE_CONF)}
    samples = metrics.load(spark, tables)["samples"]
    plan = samples._jdf.queryExecution().analyzed().toString()
    assert "LogicalRDD" in plan, plan
    assert "LocalRelation" not in plan, plan
    assert {key: spark.conf.get(key, None) for key in before} == before
    # each sample row carries its partition's window start and whether an alive member holds it
    # (null: no member holds it), computed here from the snapshot's own lists
    start = {(w.topic, w.partition): w.offset for w in snap.window_start_offsets}
    running = {t.task_id for t in snap.tasks if t.state == "RUNNING"}
    live: dict[tuple[str, int], bool] = {}
    for m in snap.members or []:
        for tp in m.assignment:
            key = (tp.topic, tp.partition)
            live[key] = live.get(key, False) or m.task_id is None or m.task_id in running
    rows = samples.collect()
    assert len(rows) == sum(len(s.partitions) for s in snap.samples)
    assert {r["live"] for r in rows} == {True, False, None}
    for row in rows:
        key = (row["topic"], row["partition"])
        assert (row["ws_offset"], row["live"]) == (start.get(key), live.get(key))
