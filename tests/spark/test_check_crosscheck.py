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
