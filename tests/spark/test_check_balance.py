"""Traffic balance and assignment balance against numbers worked out by hand, on both engines."""

from __future__ import annotations

import math

import pytest
from pyspark.sql import SparkSession

from connectops_check.results import TrafficStats
from tests.spark.check_helpers import History, member, partition_rows, run_engine, snapshot

pytestmark = pytest.mark.spark

ENGINES = ["spark", "pandas"]


def traffic_snapshot(per_topic: dict[str, list[int]]) -> list[History]:
    """Partitions whose log-end goes from 0 to the given traffic; window start is offset 0."""
    return [
        History(topic, p, [0, traffic], [0, traffic])
        for topic, values in per_topic.items()
        for p, traffic in enumerate(values)
    ]


def stats_for(engine: str, spark: SparkSession, per_topic: dict[str, list[int]]) -> dict[str, TrafficStats]:
    hs = traffic_snapshot(per_topic)
    snap = snapshot(hs, window_start=[(h.topic, h.partition, 0) for h in hs])
    res = run_engine(engine, spark, snap)
    out = {t.topic: t for t in res.traffic_topics}
    assert res.traffic_overall is not None
    out["*"] = res.traffic_overall
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_skewed_and_even_topics(engine: str, spark: SparkSession) -> None:
    stats = stats_for(engine, spark, {"hot": [10, 10, 10, 70], "even": [5, 5, 5, 5]})

    # hot: mean 100/4 = 25; max/mean 70/25 = 2.8; deviations -15,-15,-15,45 -> variance
    # (3*225 + 2025)/4 = 675 -> CV sqrt(675)/25 = 1.03923; Gini on sorted 10,10,10,70:
    # sum(i*x) = 10+20+30+280 = 340 -> 2*340/(4*100) - 5/4 = 0.45 (check: sum over ordered
    # pairs |xi-xj| = 6*60 = 360, / (2 * 4^2 * 25) = 0.45)
    hot = stats["hot"]
    assert (hot.partitions, hot.total, hot.max, hot.min, hot.mean) == (4, 100, 70, 10, 25.0)
    assert hot.max_over_mean == pytest.approx(2.8)
    assert hot.cv == pytest.approx(math.sqrt(675) / 25)
    assert hot.cv == pytest.approx(1.0392304845)
    assert hot.gini == pytest.approx(0.45)

    even = stats["even"]
    assert even.max_over_mean == pytest.approx(1.0)
    assert even.cv == pytest.approx(0.0)
    assert even.gini == pytest.approx(0.0)

    # all 8: 5,5,5,5,10,10,10,70, sum 120, mean 15 -> max/mean 70/15; squared deviations
    # 4*100 + 3*25 + 3025 = 3500, /8 = 437.5 -> CV sqrt(437.5)/15; Gini: sum(i*x) =
    # 5*(1+2+3+4) + 10*(5+6+7) + 70*8 = 790 -> 2*790/(8*120) - 9/8 = 0.5208333
    overall = stats["*"]
    assert (overall.partitions, overall.total) == (8, 120)
    assert overall.max_over_mean == pytest.approx(70 / 15)
    assert overall.cv == pytest.approx(math.sqrt(437.5) / 15)
    assert overall.gini == pytest.approx(0.5208333333)


@pytest.mark.parametrize("engine", ENGINES)
def test_one_partition_takes_everything(engine: str, spark: SparkSession) -> None:
    # 0,0,0,100: mean 25, max/mean 4; variance (3*625 + 5625)/4 = 1875 -> CV sqrt(1875)/25 =
    # sqrt(3); Gini 2*(4*100)/(4*100) - 5/4 = 0.75, the maximum (n-1)/n for n = 4
    t = stats_for(engine, spark, {"keyed": [0, 0, 0, 100]})["keyed"]
    assert t.max_over_mean == pytest.approx(4.0)
    assert t.cv == pytest.approx(math.sqrt(3))
    assert t.gini == pytest.approx(0.75)


@pytest.mark.parametrize("engine", ENGINES)
def test_no_traffic_has_no_ratios(engine: str, spark: SparkSession) -> None:
    t = stats_for(engine, spark, {"idle": [0, 0, 0]})["idle"]
    assert (t.total, t.mean, t.max_over_mean, t.cv, t.gini) == (0, 0.0, None, None, None)


@pytest.mark.parametrize("engine", ENGINES)
def test_window_start_offsets_and_fallback(engine: str, spark: SparkSession) -> None:
    hs = [
        History("t", 0, [100, 130, 160], [100, 130, 160]),  # window start 90 -> 70
        History("t", 1, [100, 130, 160], [100, 130, 160]),  # no window start: 160 - 100 = 60
        History("t", 2, [100, 130, 160], [100, 130, 160]),  # window start past the end -> 0
    ]
    snap = snapshot(hs, window_start=[("t", 0, 90), ("t", 2, 170)])
    rows = partition_rows(engine, spark, snap)
    assert {k[1]: r["traffic"] for k, r in rows.items()} == {0: 70, 1: 60, 2: 0}


@pytest.mark.parametrize("engine", ENGINES)
def test_member_lag_and_traffic(engine: str, spark: SparkSession) -> None:
    """Per member: lag and traffic summed over its partitions by hand; a partition it holds
    outside the measured topics counts as a partition but adds no lag or traffic."""
    hs = [
        History("t", 0, [0, 50], [0, 40]),  # traffic 50, lag 10
        History("t", 1, [0, 30], [0, 30]),  # traffic 30, lag 0
        History("t", 2, [0, 200], [0, 20]),  # traffic 200, lag 180
        History("u", 0, [5, 5], [5, 2]),  # traffic 0, lag 3
    ]
    members = [member(0, ("t", 0), ("t", 1), ("other", 7)), member(1, ("t", 2), ("u", 0)), member(2)]
    res = run_engine(
        engine, spark, snapshot(hs, members=members, window_start=[(h.topic, h.partition, h.log_end[0]) for h in hs])
    )
    assert [(m.member_id, m.partitions, m.lag, m.traffic) for m in res.members] == [
        ("m0", 3, 10 + 0, 50 + 30),
        ("m1", 2, 180 + 3, 200 + 0),
        ("m2", 0, 0, 0),
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_member_loads_and_unassigned(engine: str, spark: SparkSession) -> None:
    hs = [History("t", p, [10, 10], [10, 10]) for p in range(5)]
    members = [member(0, ("t", 0), ("t", 1), ("t", 2)), member(1, ("t", 3)), member(2)]
    res = run_engine(engine, spark, snapshot(hs, members=members))
    assert [(m.member_id, m.task_id, m.partitions) for m in res.members] == [
        ("m0", 0, 3),
        ("m1", 1, 1),
        ("m2", 2, 0),
    ]
    assert res.unassigned_partitions == 1  # t-4
    unknown = run_engine(engine, spark, snapshot(hs, members=None))
    assert (unknown.members, unknown.unassigned_partitions) == ([], None)
