"""Time lag (Kafka Lag Exporter's lookup), consume and produce rates and the catch-up ETA,
each worked out by hand from the numbers in the test, on both engines.

Samples are 10 s apart (ts 0, 10 000, ..) unless a test says otherwise; "now" is the last
sample. Kafka Lag Exporter (seglo/kafka-lag-exporter ``LookupTable.lookup``): the committed
offset is looked up on the (log-end, time) points; interpolated on the newest segment that
holds it, else extrapolated along the first and last points; zero when it equals the last
log-end; unknown with fewer than two points.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from tests.spark.check_helpers import History, member, partition_rows, run_engine, snapshot

pytestmark = pytest.mark.spark

ENGINES = ["spark", "pandas"]


def row(engine: str, spark: SparkSession, h: History) -> dict[str, object]:
    return partition_rows(engine, spark, snapshot([h], members=[member(0, (h.topic, h.partition))]))[
        (h.topic, h.partition)
    ]


@pytest.mark.parametrize("engine", ENGINES)
class TestTimeLag:
    def test_interpolated_inside_the_table(self, engine: str, spark: SparkSession) -> None:
        # log-end 100, 200, 300, 400 at 0..30 s; committed 250 at the end. 250 lies on the
        # segment (200 @ 10 s, 300 @ 20 s): written at 15 s, now 30 s -> 15 s behind.
        r = row(engine, spark, History("t", 0, [100, 200, 300, 400], [100, 150, 200, 250]))
        assert r["time_lag_s"] == pytest.approx(15.0)

    def test_newest_segment_wins_on_a_flat_stretch(self, engine: str, spark: SparkSession) -> None:
        # log-end 100, 200, 200, 300 at 0..30 s; committed 200. Segments holding 200:
        # (100,200) @ 0-10 s, (200,200) @ 10-20 s, (200,300) @ 20-30 s; the newest is the last,
        # where 200 sits at its left end: 20 s -> 10 s behind (not 20 s, the first time seen).
        r = row(engine, spark, History("t", 0, [100, 200, 200, 300], [0, 0, 0, 200]))
        assert r["time_lag_s"] == pytest.approx(10.0)

    def test_extrapolated_before_the_table(self, engine: str, spark: SparkSession) -> None:
        # log-end 100..400 at 0..30 s (10/s); committed 50 is older than every point:
        # along (100 @ 0, 400 @ 30 s) it was written at 30 - (400-50)/10 = -5 s -> 35 s behind
        r = row(engine, spark, History("t", 0, [100, 200, 300, 400], [50] * 4))
        assert r["time_lag_s"] == pytest.approx(35.0)

    def test_zero_at_the_log_end_and_unknown_cases(self, engine: str, spark: SparkSession) -> None:
        assert row(engine, spark, History("t", 0, [100, 200], [100, 200]))["time_lag_s"] == 0.0
        # log-end never moved: nothing to extrapolate along
        assert row(engine, spark, History("t", 0, [100, 100, 100], [50] * 3))["time_lag_s"] is None
        # one point
        assert row(engine, spark, History("t", 0, [100], [50]))["time_lag_s"] is None
        # no committed offset at the last sample: from the log-start (0), as the lag is; along
        # (100 @ 0, 200 @ 10 s), offset 0 was written at 10 - 200/10 = -10 s -> 20 s behind
        no_commit = History("t", 0, [100, 200], [50, None], log_start=0)
        assert row(engine, spark, no_commit)["time_lag_s"] == pytest.approx(20.0)


@pytest.mark.parametrize("engine", ENGINES)
class TestRatesAndEta:
    def test_gaining_consumer_has_an_eta(self, engine: str, spark: SparkSession) -> None:
        # produce (400-100)/30 s = 10/s; consume (390-0)/30 s = 13/s; lag 10 -> 10/3 s
        r = row(engine, spark, History("t", 0, [100, 200, 300, 400], [0, 150, 300, 390]))
        assert (r["produce_rate"], r["consume_rate"]) == (pytest.approx(10.0), pytest.approx(13.0))
        assert r["eta_s"] == pytest.approx(10 / 3)

    def test_slower_consumer_has_none_and_no_lag_is_zero(self, engine: str, spark: SparkSession) -> None:
        slow = row(engine, spark, History("t", 0, [100, 200, 300, 400], [0, 100, 200, 250]))
        assert slow["consume_rate"] == pytest.approx(250 / 30)
        assert slow["eta_s"] is None
        assert row(engine, spark, History("t", 0, [100, 200], [100, 200]))["eta_s"] == 0.0

    def test_an_unknown_rate_leaves_the_topic_without_eta(self, engine: str, spark: SparkSession) -> None:
        # one sample: no rate at all; a partial sum would flatter the ETA, so none
        hs = [History("a", 0, [100], [50]), History("a", 1, [100], [60])]
        res = run_engine(engine, spark, snapshot(hs, members=[member(0, ("a", 0), ("a", 1))]))
        (a,) = res.topic_lags
        assert (a.lag, a.consume_rate, a.produce_rate, a.eta_s) == (90, None, None, None)

    def test_topic_and_connector_roll_up(self, engine: str, spark: SparkSession) -> None:
        # a-0: lag 10, produce 10/s, consume 13/s, time lag 1 s (390 on (300@20 s, 400@30 s))
        # a-1: lag 100, produce 0, consume (100-0)/30 s; log-end flat at 200 with committed 100:
        #      nothing to extrapolate along -> time lag unknown
        # b-0: no committed offset at all: read from log-start 0, which does not move -> consume 0
        hs = [
            History("a", 0, [100, 200, 300, 400], [0, 150, 300, 390]),
            History("a", 1, [200, 200, 200, 200], [0, 30, 60, 100]),
            History("b", 0, [10, 20, 30, 40], [None] * 4, log_start=0),
        ]
        res = run_engine(engine, spark, snapshot(hs, members=[member(0, ("a", 0), ("a", 1), ("b", 0))]))
        topics = {t.topic: t for t in res.topic_lags}
        a = topics["a"]
        assert (a.partitions, a.lag) == (2, 110)
        assert a.produce_rate == pytest.approx(10.0)
        assert a.consume_rate == pytest.approx(13.0 + 100 / 30)
        assert a.eta_s == pytest.approx(110 / (13.0 + 100 / 30 - 10.0))
        assert a.time_lag_s == pytest.approx(1.0)  # the largest known
        b = topics["b"]
        assert (b.lag, b.consume_rate, b.produce_rate, b.eta_s) == (40, 0.0, pytest.approx(1.0), None)
        overall = res.overall_lag
        assert overall is not None
        assert (overall.topic, overall.partitions, overall.lag) == ("*", 3, 150)
        consume, produce = 13.0 + 100 / 30, 10.0 + 1.0
        assert overall.eta_s == pytest.approx(150 / (consume - produce))
