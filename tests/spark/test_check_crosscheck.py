"""Spark and the pandas reference agree on generated snapshots of a few hundred partitions.

The generator scripts every behaviour (see ``connectops_check.synthetic``), and the test first
checks that each Burrow status and each lag basis really occurs, so agreement is not agreement
on a trivial input.
"""

from __future__ import annotations

import dataclasses

import pytest
from pyspark.sql import SparkSession

from connectops_check.results import MetricResults
from connectops_check.snapshot import ConnectorKind
from connectops_check.synthetic import random_snapshot
from tests.spark.check_helpers import partition_rows, run_engine

pytestmark = pytest.mark.spark


def assert_same(spark_res: MetricResults, pandas_res: MetricResults) -> None:
    """Exact equality, except the traffic statistics' floating-point sums (order-dependent)."""
    a, b = dataclasses.asdict(spark_res), dataclasses.asdict(pandas_res)
    a_stats = [a.pop("traffic_overall"), *a.pop("traffic_topics")]
    b_stats = [b.pop("traffic_overall"), *b.pop("traffic_topics")]
    assert a == b
    assert len(a_stats) == len(b_stats)
    for x, y in zip(a_stats, b_stats, strict=True):
        assert x.keys() == y.keys()
        for key in x:
            if isinstance(y[key], float):
                assert x[key] == pytest.approx(y[key], rel=1e-9, abs=1e-12), (x["topic"], key)
            else:
                assert x[key] == y[key], (x["topic"], key)


@pytest.mark.parametrize(
    ("seed", "kind", "partitions", "window"),
    [
        (1, ConnectorKind.SINK, 300, 10),
        (2, ConnectorKind.SINK, 400, 10),
        (3, ConnectorKind.MIRROR_SOURCE, 300, 5),
    ],
)
def test_spark_matches_pandas(
    spark: SparkSession, seed: int, kind: ConnectorKind, partitions: int, window: int
) -> None:
    snap = random_snapshot(partitions, samples=12, seed=seed, kind=kind)

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
    assert_same(spark_res, pandas_res)
