"""Lag and Burrow status on hand-built partitions, each answer worked out in the test.

Every case runs on both engines (Spark and the pandas reference): the numbers below are the
specification, and either engine drifting from them fails.

Unless a test says otherwise: 10 samples 10 s apart (ts 0 .. 90 000 ms, so "now" is 90 000),
Burrow window 10, and the producer appends 10 records per sample (log-end 100, 110, .. 190).
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from connectops_check.snapshot import ConnectorKind, Member, TaskInfo
from tests.spark.check_helpers import History, member, partition_rows, run_engine, snapshot

pytestmark = pytest.mark.spark

ENGINES = ["spark", "pandas"]
LOG_END = [100 + 10 * i for i in range(10)]


#: partition t-0 held by task 0, which is RUNNING (the snapshot's default task list)
OWNED = [member(0, ("t", 0))]


def status_of(
    engine: str,
    spark: SparkSession,
    h: History,
    window: int = 10,
    *,
    members: list[Member] | None,
    tasks: list[TaskInfo] | None = None,
) -> dict[str, object]:
    snap = snapshot([h], members=members, tasks=tasks)
    return partition_rows(engine, spark, snap, window)[(h.topic, h.partition)]


@pytest.mark.parametrize("engine", ENGINES)
class TestStatus:
    def test_warn_when_lag_never_decreases(self, engine: str, spark: SparkSession) -> None:
        # committed 0,5,..,45 -> lag 100,105,..,145: moving, but the lag only grows
        h = History("t", 0, LOG_END, [5 * i for i in range(10)])
        row = status_of(engine, spark, h, members=OWNED)
        assert (row["status"], row["lag"], row["basis"], row["complete"]) == ("WARN", 145, "committed", 1.0)

    def test_stall_when_a_live_owner_does_not_move(self, engine: str, spark: SparkSession) -> None:
        # committed 50 throughout, lag 50..140; the owner's task is RUNNING: it "commits" the
        # same offset at every sample, Burrow's rule 4
        h = History("t", 0, LOG_END, [50] * 10)
        assert status_of(engine, spark, h, members=OWNED)["status"] == "STALL"

    def test_stop_when_the_owner_task_is_paused(self, engine: str, spark: SparkSession) -> None:
        # same history; the owner is PAUSED, so nobody commits: last commit at 0 (first seen),
        # now - 0 = 90 000 > 0 - 0
        h = History("t", 0, LOG_END, [50] * 10)
        paused = [TaskInfo(0, "w", "PAUSED")]
        assert status_of(engine, spark, h, members=OWNED, tasks=paused)["status"] == "STOP"

    def test_stop_when_nobody_holds_the_partition(self, engine: str, spark: SparkSession) -> None:
        h = History("t", 0, LOG_END, [50] * 10)
        assert status_of(engine, spark, h, members=[])["status"] == "STOP"
        # ownership not collected at all: evaluated as unowned (what Burrow sees for Connect)
        assert status_of(engine, spark, h, members=None)["status"] == "STOP"

    def test_stop_compares_silence_with_the_span_of_commits(self, engine: str, spark: SparkSession) -> None:
        # 9 samples (now = 80 000), unowned. Offsets move until sample 3 (30 000): silence
        # 50 000 > span 30 000 -> STOP. Moving until sample 4 (40 000): 40 000 > 40 000 is
        # false -> not STOP; the lag (90,90,90,90,90,100,..) never decreased -> WARN.
        log_end = LOG_END[:9]
        moved_to_3 = History("t", 0, log_end, [10, 20, 30, 40, 40, 40, 40, 40, 40])
        moved_to_4 = History("t", 0, log_end, [10, 20, 30, 40, 50, 50, 50, 50, 50])
        stop = status_of(engine, spark, moved_to_3, members=[])
        warn = status_of(engine, spark, moved_to_4, members=[])
        assert (stop["status"], stop["complete"]) == ("STOP", 0.9)
        assert warn["status"] == "WARN"

    def test_live_owner_that_stopped_moving_is_not_stop(self, engine: str, spark: SparkSession) -> None:
        # moved until sample 2, then still; the owner is alive, so its commit times are the
        # sample times and rule 3 cannot fire; lag 90,90,90,100,..,160 never decreased -> WARN
        h = History("t", 0, LOG_END, [10, 20, 30, 30, 30, 30, 30, 30, 30, 30])
        assert status_of(engine, spark, h, members=OWNED)["status"] == "WARN"
        assert status_of(engine, spark, h, members=[])["status"] == "STOP"

    def test_rewind_until_the_consumer_is_back_where_it_was(self, engine: str, spark: SparkSession) -> None:
        # 40 -> 25 between samples 3 and 4, then +2 per sample up to 35: never back at 40,
        # so Burrow's checkIfRewindRecovered is false -> REWIND. Moving +10 instead reaches 45
        # (>= 40) at sample 6: recovered, and the lag 90,90,90,90,115,.. never decreased -> WARN.
        stuck_behind = History("t", 0, LOG_END, [10, 20, 30, 40, 25, 27, 29, 31, 33, 35])
        recovered = History("t", 0, LOG_END, [10, 20, 30, 40, 25, 35, 45, 55, 65, 75])
        assert status_of(engine, spark, stuck_behind, members=OWNED)["status"] == "REWIND"
        assert status_of(engine, spark, recovered, members=OWNED)["status"] == "WARN"

    def test_rewind_recovery_edges(self, engine: str, spark: SparkSession) -> None:
        # Recovered means some entry from the first drop on is >= the offset before it (40):
        # - back at exactly 40 at sample 5: recovered; lag 90,90,90,90,125,110,.. decreased once
        #   (rule 6 does not fire) -> OK
        # - up to 39 and no further: REWIND
        # - 50 at sample 5, then a second drop to 45: only the first drop counts, and 50 >= 40
        #   recovered it; lag 125 -> 110 decreased -> OK
        # (the Spark plan reads recovery as "the last entry at or above all before it comes after
        # the first drop", the reference as "the highest entry from the drop on": equal here)
        equal = History("t", 0, LOG_END, [10, 20, 30, 40, 25, 40, 41, 42, 43, 44])
        short = History("t", 0, LOG_END, [10, 20, 30, 40, 25, 39, 39, 39, 39, 39])
        second = History("t", 0, LOG_END, [10, 20, 30, 40, 25, 50, 45, 46, 47, 48])
        assert status_of(engine, spark, equal, members=OWNED)["status"] == "OK"
        assert status_of(engine, spark, short, members=OWNED)["status"] == "REWIND"
        assert status_of(engine, spark, second, members=OWNED)["status"] == "OK"

    def test_stop_outranks_rewind(self, engine: str, spark: SparkSession) -> None:
        # went back at sample 3 and stayed. Unowned: commit times 0,10 000,20 000,30 000,30 000..
        # silence 60 000 > span 30 000 and no broker log-end (100..190) <= 20 -> STOP, which
        # Burrow checks first (#290). Owned by a live task: never STOP -> unrecovered REWIND.
        h = History("t", 0, LOG_END, [10, 20, 30, 20, 20, 20, 20, 20, 20, 20])
        assert status_of(engine, spark, h, members=[])["status"] == "STOP"
        assert status_of(engine, spark, h, members=OWNED)["status"] == "REWIND"

    def test_rewind_before_the_window_is_forgotten(self, engine: str, spark: SparkSession) -> None:
        # 12 samples; 50 -> 10 between samples 0 and 1, then +2 per sample (never back at 50).
        # Window 10 holds samples 2..11 (lag 100+8i, growing): WARN; window 12 sees the rewind.
        log_end = [100 + 10 * i for i in range(12)]
        h = History("t", 0, log_end, [50, 10, *[10 + 2 * i for i in range(1, 11)]])
        assert status_of(engine, spark, h, 10, members=OWNED)["status"] == "WARN"
        assert status_of(engine, spark, h, 12, members=OWNED)["status"] == "REWIND"

    def test_stop_waits_while_recent_broker_offsets_show_no_lag(self, engine: str, spark: SparkSession) -> None:
        # Burrow's checkIfRecentLagZero (#303): unowned, committed 100 throughout (first seen at
        # 0, so silence 90 000 > span 0). Log-end 100 at samples 0..4, then 110..150: a broker
        # log-end <= 100 is still in the window -> not STOP; lag 0 at sample 0 -> rule 1 -> OK.
        # Once those log-ends leave the window (window 5: samples 5..9) -> STOP.
        h = History("t", 0, [100] * 5 + [110, 120, 130, 140, 150], [100] * 10)
        assert status_of(engine, spark, h, members=[])["status"] == "OK"
        assert status_of(engine, spark, h, 5, members=[])["status"] == "STOP"

    def test_allowance_zero_lag_anywhere_in_the_window_is_ok(self, engine: str, spark: SparkSession) -> None:
        # committed 0,50,100,130,135,140.. -> lag 100,60,20,0,5,10,20,30,40,50. Lag hit 0 at
        # sample 3: OK although the consumer has been still since. Window 6 (samples 4..9)
        # misses that zero: offsets 135,140,140.. move once, lag 5..50 only grows -> WARN.
        h = History("t", 0, LOG_END, [0, 50, 100, 130, 135, 140, 140, 140, 140, 140])
        ok = status_of(engine, spark, h, members=OWNED)
        assert (ok["status"], ok["lag"]) == ("OK", 50)
        assert status_of(engine, spark, h, 6, members=OWNED)["status"] == "WARN"

    def test_ok_when_current_lag_is_zero(self, engine: str, spark: SparkSession) -> None:
        h = History("t", 0, LOG_END, [50] * 9 + [190])
        assert status_of(engine, spark, h, members=[])["status"] == "OK"

    def test_ok_when_lag_decreases_somewhere(self, engine: str, spark: SparkSession) -> None:
        # committed 0,20,..,80,95,..,155 -> lag 100,90,..,60,55,..,35: never 0, moving, and
        # decreasing, so no rule fires
        h = History("t", 0, LOG_END, [0, 20, 40, 60, 80, 95, 110, 125, 140, 155])
        row = status_of(engine, spark, h, members=OWNED)
        assert (row["status"], row["lag"]) == ("OK", 35)

    def test_leading_samples_without_commit_are_nil_entries(self, engine: str, spark: SparkSession) -> None:
        # first commit at sample 3: 7 entries of 10 -> complete 0.7; entries 10,15,..,40 with
        # lag 120,125,.. -> WARN
        h = History("t", 0, LOG_END, [None, None, None, 10, 15, 20, 25, 30, 35, 40])
        row = status_of(engine, spark, h, members=OWNED)
        assert (row["status"], row["complete"], row["lag"]) == ("WARN", 0.7, 150)


@pytest.mark.parametrize("engine", ENGINES)
class TestLag:
    def test_sink_lag_exact_per_partition_total_and_series(self, engine: str, spark: SparkSession) -> None:
        # three partitions, three samples
        hs = [
            History("t", 0, [100, 120, 150], [90, 100, 150]),  # lag 10, 20, 0
            History("t", 1, [50, 50, 80], [0, 25, 30]),  # lag 50, 25, 50
            History("u", 0, [7, 9, 12], [7, 7, 8]),  # lag 0, 2, 4
        ]
        snap = snapshot(hs, members=[member(0, ("t", 0), ("t", 1), ("u", 0))])
        rows = partition_rows(engine, spark, snap)
        assert {k: r["lag"] for k, r in rows.items()} == {("t", 0): 0, ("t", 1): 50, ("u", 0): 4}
        res = run_engine(engine, spark, snap)
        assert res.total_lag == 54
        assert res.max_partition_lag == 50
        assert res.lag_series == [(0, 60), (10_000, 47), (20_000, 54)]
        assert [(p.topic, p.partition, p.lag) for p in res.top_lag] == [
            ("t", 1, 50),
            ("u", 0, 4),
            ("t", 0, 0),
        ]

    def test_no_commit_measures_from_earliest_then_window_start_then_zero(
        self, engine: str, spark: SparkSession
    ) -> None:
        hs = [
            History("t", 0, [500, 520], [None, None], log_start=100),  # 520 - 100
            History("t", 1, [500, 520], [None, None], log_start=None),  # 520 - window start 450
            History("t", 2, [500, 520], [None, None], log_start=None),  # 520 - 0
        ]
        snap = snapshot(hs, window_start=[("t", 1, 450)])
        rows = partition_rows(engine, spark, snap)
        got = {k[1]: (r["lag"], r["basis"], r["status"], r["complete"]) for k, r in rows.items()}
        assert got == {
            0: (420, "earliest", "OK", 0.0),
            1: (70, "window_start", "OK", 0.0),
            2: (520, "offset_zero", "OK", 0.0),
        }
        res = run_engine(engine, spark, snap)
        assert res.basis_counts == {"earliest": 1, "window_start": 1, "offset_zero": 1}

    def test_mirror_lag_is_log_end_minus_stored_plus_one_floored(self, engine: str, spark: SparkSession) -> None:
        hs = [
            History("src", 0, [200, 200], [149, 149]),  # 200 - 150 = 50
            History("src", 1, [200, 200], [190, 199]),  # 200 - 200 = 0 (fully replicated)
            History("src", 2, [200, 200], [199, 205]),  # stored beyond the end -> floored to 0
        ]
        snap = snapshot(hs, kind=ConnectorKind.MIRROR_SOURCE)
        rows = partition_rows(engine, spark, snap)
        assert {k[1]: r["lag"] for k, r in rows.items()} == {0: 50, 1: 0, 2: 0}

    def test_sink_lag_floors_at_zero(self, engine: str, spark: SparkSession) -> None:
        snap = snapshot([History("t", 0, [10, 10], [10, 12])])
        assert partition_rows(engine, spark, snap)[("t", 0)]["lag"] == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_counts_and_non_ok_order(engine: str, spark: SparkSession) -> None:
    """Status counts, and non-OK partitions listed worst first (REWIND > STALL > STOP > WARN)."""
    hs = [
        History("t", 0, LOG_END, [5 * i for i in range(10)]),  # WARN, lag 145
        History("t", 1, LOG_END, [50] * 10),  # STALL (live), lag 140
        History("t", 2, LOG_END, [50] * 10),  # STOP (held by the paused task), lag 140
        History("t", 3, LOG_END, [10, 20, 30, 40, 25, 27, 29, 31, 33, 35]),  # REWIND, lag 155
        History("t", 4, LOG_END, LOG_END),  # OK, lag 0
    ]
    snap = snapshot(
        hs,
        members=[member(0, ("t", 0), ("t", 1), ("t", 3), ("t", 4)), member(1, ("t", 2))],
        tasks=[TaskInfo(0, "w", "RUNNING"), TaskInfo(1, "w", "PAUSED")],
    )
    res = run_engine(engine, spark, snap)
    assert res.status_counts == {"OK": 1, "WARN": 1, "STOP": 1, "STALL": 1, "REWIND": 1}
    assert [(p.partition, p.status) for p in res.non_ok] == [
        (3, "REWIND"),
        (1, "STALL"),
        (2, "STOP"),
        (0, "WARN"),
    ]
    assert res.worst_status.value == "REWIND"
    assert [p.partition for p in run_engine(engine, spark, snap, top_n=2).top_lag] == [3, 0]  # lag 155, 145
