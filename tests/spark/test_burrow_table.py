"""Burrow's own evaluator test table, run through both engines' ``burrow_status``.

The rows are transcribed from linkedin/Burrow ``core/internal/evaluator/caching_test.go``
(``var tests = []testset``) at ced55ba (v1.9.5; the rules are unchanged since v1.3.7): the
commit ring (offset, timestamp in ms, lag or nil), the broker offsets, the current lag,
``timeNow`` (seconds, as in Burrow), ``allowed-lag`` and the status Burrow's
``calculatePartitionStatus`` returns. Each row is one partition; every engine must return
Burrow's status for every row. ``minimum-complete`` is 0 and the ring is exactly the row's
commits, as in Burrow's test, so completeness never gates a row.

Also Burrow's ``evaluatePartitionStatus`` gates: a ring less complete than
``minimum-complete`` is OK and not judged; a partition with no commits is OK.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from connectops_check import metrics, reference
from tests.spark.check_helpers import History, member, partition_rows, snapshot

pytestmark = pytest.mark.spark

Commit = tuple[int, int, int | None]  # offset, timestamp (ms), lag (None = Burrow's nil lag)


@dataclass(frozen=True)
class Case:
    name: str
    commits: list[Commit]
    broker: list[int]
    current_lag: int
    time_now_s: int
    allowed_lag: int
    status: str


def _ring(offsets: list[int], lags: list[int | None], ts0: int = 100_000, step: int = 100_000) -> list[Commit]:
    return [(o, ts0 + i * step, lag) for i, (o, lag) in enumerate(zip(offsets, lags, strict=True))]


_STEADY = [1000, 2000, 3000, 4000, 5000]
_REC_TS = [
    1512224618356, 1512224619362, 1512224620366, 1512224621367, 1512224622370,
    1512224623373, 1512224624378, 1512224625379, 1512224626383, 1512224627383,
    1512224628383, 1512224629388, 1512224630391, 1512224631394, 1512224632397,
]  # fmt: skip
_REC = [(792748079 + i, ts, 0) for i, ts in enumerate(_REC_TS)]

CASES = [
    Case("0 zero lag somewhere", _ring(_STEADY, [0, 50, 100, 150, 200]), [5200], 200, 600, 0, "OK"),
    Case("1 silence equal to span", _ring(_STEADY, [0, 50, 100, 150, 200]), [5200], 200, 900, 0, "OK"),
    Case("2 stop despite zero lag", _ring(_STEADY, [0, 50, 100, 150, 200]), [5200], 200, 1000, 0, "STOP"),
    Case("3 stop, lag never zero", _ring(_STEADY, [50, 100, 150, 200, 250]), [5250], 250, 1000, 0, "STOP"),
    Case("4 stalled but lag was zero", _ring([1000] * 5, [0, 50, 100, 150, 200]), [1200], 200, 600, 0, "OK"),
    Case("5 stall", _ring([1000] * 5, [100, 150, 200, 250, 300]), [1300], 300, 600, 0, "STALL"),
    Case("6 stall, same lag", _ring([1000] * 5, [100] * 5), [1100], 100, 600, 0, "STALL"),
    Case(
        "7 rewind recovered",
        _ring([1000, 2000, 3000, 2000, 4000], [100, 150, 200, 1250, 300]),
        [4300],
        300,
        600,
        0,
        "OK",
    ),
    Case("8 current lag zero", _ring(_STEADY, [50, 100, 150, 200, 250]), [5250], 0, 1000, 0, "OK"),
    Case(
        "9 stop with new data (#290)",
        _REC,
        [792749024, 792749000, 792748800, 792748600, 792748500],
        931,
        1512224650,
        0,
        "STOP",
    ),
    Case(
        "10 recent broker offsets show no lag (#303)",
        _REC,
        [792748094, 792748093, 792748093, 792748093],
        1,
        1512224650,
        0,
        "OK",
    ),
    Case(
        "11 nil lags skipped",
        _ring(
            [1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000, 5500],
            [0, None, 50, None, 100, None, 150, None, 200, None],
            step=50_000,
        ),
        [5700],
        200,
        600,
        0,
        "OK",
    ),
    Case(
        "12 allowed lag",
        [(1000, 100000, 2), (2000, 200000, 1), (2000, 300000, 1)],
        [2001],
        1,
        550,
        1,
        "OK",
    ),
    Case("13 stall with allowed lag", _ring([1000] * 5, [100, 150, 200, 250, 300]), [1300], 300, 600, 99, "STALL"),
    Case(
        "14 rewind recovered with allowed lag",
        _ring([1000, 2000, 3000, 2000, 4000], [100, 150, 200, 1250, 300]),
        [4300],
        300,
        600,
        99,
        "OK",
    ),
    Case(
        "15 rewind not recovered",
        _ring([1000, 2000, 3000, 2000, 2500], [100, 150, 200, 1250, 300]),
        [4300],
        300,
        600,
        0,
        "REWIND",
    ),
]

ENTRY_COLUMNS = {"topic": "string", "partition": "int32", "slot": "int32", "offset": "Int64", "ts_ms": "Int64"}


def _frames(cases: list[Case]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    entries = pd.DataFrame(
        [
            {"topic": "burrow", "partition": i, "slot": slot, "offset": o, "ts_ms": ts, "lag": lag}
            for i, case in enumerate(cases)
            for slot, (o, ts, lag) in enumerate(case.commits)
        ]
    ).astype({**ENTRY_COLUMNS, "lag": "Int64"})
    broker = pd.DataFrame(
        [{"topic": "burrow", "partition": i, "log_end": b} for i, case in enumerate(cases) for b in case.broker]
    ).astype({"topic": "string", "partition": "int32", "log_end": "Int64"})
    current = pd.DataFrame(
        [{"topic": "burrow", "partition": i, "current_lag": case.current_lag} for i, case in enumerate(cases)]
    ).astype({"topic": "string", "partition": "int32", "current_lag": "Int64"})
    return entries, broker, current


def _spark_frames(spark: SparkSession, cases: list[Case]) -> tuple[object, object, object]:
    entries, broker, current = _frames(cases)
    tp = [StructField("topic", StringType(), False), StructField("partition", IntegerType(), False)]

    def rows(frame: pd.DataFrame) -> list[tuple[object, ...]]:
        # Spark's schema check takes Python ints, not numpy scalars
        return [
            tuple(None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for v in r)
            for r in frame.itertuples(index=False)
        ]

    e = spark.createDataFrame(
        rows(entries),
        StructType(
            [
                *tp,
                StructField("slot", IntegerType(), False),
                StructField("offset", LongType(), False),
                StructField("ts_ms", LongType(), False),
                StructField("lag", LongType(), True),
            ]
        ),
    )
    b = spark.createDataFrame(rows(broker), StructType([*tp, StructField("log_end", LongType(), False)]))
    c = spark.createDataFrame(rows(current), StructType([*tp, StructField("current_lag", LongType(), False)]))
    return e, b, c


def _evaluate(engine: str, spark: SparkSession, case: Case, window: int, minimum_complete: float = 0.0) -> str:
    args = (case.time_now_s * 1000, window, case.allowed_lag, minimum_complete)
    if engine == "spark":
        e, b, c = _spark_frames(spark, [case])
        row = metrics.burrow_status(e, b, c, *args).collect()  # type: ignore[arg-type]
        assert len(row) == 1
        return str(row[0]["status"])
    e, b, c = _frames([case])
    out = reference.burrow_status(e, b, c, *args)
    assert len(out) == 1
    return str(out["status"].iloc[0])


@pytest.mark.parametrize("engine", ["spark", "pandas"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_burrow_test_table(engine: str, spark: SparkSession, case: Case) -> None:
    assert _evaluate(engine, spark, case, window=len(case.commits)) == case.status


@pytest.mark.parametrize("engine", ["spark", "pandas"])
def test_all_rows_at_once_on_spark_and_pandas(engine: str, spark: SparkSession) -> None:
    """All sixteen rows as one 16-partition input: partitions must not leak into each other."""
    window = max(len(c.commits) for c in CASES)
    if engine == "spark":
        e, b, c = _spark_frames(spark, CASES)
        rows = metrics.burrow_status(e, b, c, 0, window).collect()  # type: ignore[arg-type]
        got = {int(r["partition"]): str(r["status"]) for r in rows}
    else:
        e, b, c = _frames(CASES)
        out = reference.burrow_status(e, b, c, 0, window)
        got = {int(p): str(s) for p, s in zip(out["partition"], out["status"], strict=True)}
    # one shared "now" cannot serve every row, so compare with each row evaluated alone at
    # the same now (0: nothing is STOP) through the other engine
    other = "pandas" if engine == "spark" else "spark"
    expected = {
        i: _evaluate(other, spark, Case(c.name, c.commits, c.broker, c.current_lag, 0, c.allowed_lag, c.status), window)
        for i, c in enumerate(CASES)
    }
    assert got == expected
    assert set(got.values()) >= {"OK", "STALL", "REWIND"}


@pytest.mark.parametrize("engine", ["spark", "pandas"])
def test_incomplete_ring_is_ok_below_minimum_complete(engine: str, spark: SparkSession) -> None:
    # case 5 (STALL) in a ring of 10: complete 0.5. Judged with minimum-complete 0.5, OK under 0.6.
    stall = CASES[5]
    assert _evaluate(engine, spark, stall, window=10, minimum_complete=0.5) == "STALL"
    assert _evaluate(engine, spark, stall, window=10, minimum_complete=0.6) == "OK"


# --- where the derived commit times differ from Burrow's real ones (``metrics`` docstring) ---


@pytest.mark.parametrize("engine", ["spark", "pandas"])
def test_silence_since_before_the_first_sample_is_stop_here_not_in_burrow(engine: str, spark: SparkSession) -> None:
    """(a) A sink committed every 60 s (offsets 1000..1900 at 0..540 s, lag falling 300..210)
    and was then paused; the check samples at 550..640 s while 300+ records arrive.

    Burrow, with the real commit times: silence 640-540 = 100 s < span 540 s -> not STOP; the
    lag decreased -> OK. Here the collection first sees offset 1900 at 550 s: commit span 0,
    silence 90 s -> STOP (unowned, no broker log-end <= 1900)."""
    commits = [(1000 + 100 * i, 60_000 * i, 300 - 10 * i) for i in range(10)]
    burrow_view = Case("real commit times", commits, [2200 + 10 * i for i in range(10)], 390, 640, 0, "OK")
    assert _evaluate(engine, spark, burrow_view, window=10) == "OK"

    log_end = [2200 + 10 * i for i in range(10)]
    sampled = History("t", 0, log_end, [1900] * 10)
    assert partition_rows(engine, spark, snapshot([sampled], members=None))[("t", 0)]["status"] == "STOP"


@pytest.mark.parametrize("engine", ["spark", "pandas"])
def test_live_member_that_stopped_committing_is_stall_or_warn_here_stop_in_burrow(
    engine: str, spark: SparkSession
) -> None:
    """(b) A consumer commits 10, 20, 30, 40 at 0..30 s, then hangs while still a member and
    still RUNNING; samples every 10 s to 90 s, log-end 100..190.

    Burrow's ring holds the four real commits: silence 60 s > span 30 s -> STOP. Here a live
    owner is taken to commit at every sample, so it is never STOP: offsets moved, lag
    90,90,90,90,100,..,150 never decreased -> WARN. The same samples unowned -> STOP."""
    commits = [(10 * (i + 1), 10_000 * i, 90) for i in range(4)]
    burrow_view = Case("real commit times", commits, [100 + 10 * i for i in range(10)], 150, 90, 0, "STOP")
    assert _evaluate(engine, spark, burrow_view, window=10) == "STOP"

    h = History("t", 0, [100 + 10 * i for i in range(10)], [10, 20, 30, 40, 40, 40, 40, 40, 40, 40])
    owned = snapshot([h], members=[member(0, ("t", 0))])
    assert partition_rows(engine, spark, owned)[("t", 0)]["status"] == "WARN"
    assert partition_rows(engine, spark, snapshot([h], members=[]))[("t", 0)]["status"] == "STOP"
