"""Thresholds, assignment bounds and the verdict document."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession

from connectops_check.job import needs_spark, run_check
from connectops_check.results import MemberLoad
from connectops_check.snapshot import ConnectorKind, Snapshot, TaskInfo
from connectops_check.verdict import Settings, assignment_balance
from tests.spark.check_helpers import History, member, snapshot


def loads(*counts: int) -> list[MemberLoad]:
    return [MemberLoad(f"m{i}", f"c{i}", i, c) for i, c in enumerate(counts)]


class TestAssignmentBalance:
    def test_best_possible_split_is_balanced(self) -> None:
        # 10 over 3: mean 3.33; bounds [floor(3.33*0.9)=3, ceil(3.33*1.1)=4]; 4/3/3 fits
        a = assignment_balance(loads(4, 3, 3), 1.10)
        assert (a.lower_limit, a.upper_limit, a.balanced) == (3, 4, True)
        assert a.max_over_mean == pytest.approx(1.2)
        assert a.range_assignor_pattern is False

    def test_float_rounding_does_not_widen_the_bound(self) -> None:
        # mean 10: 10 * 1.1 is 11.000000000000002 in floating point; the bound must stay 11
        a = assignment_balance(loads(12, 10, 8, 10), 1.10)
        assert (a.upper_limit, a.lower_limit, a.balanced) == (11, 9, False)
        assert assignment_balance(loads(11, 10, 9, 10), 1.10).balanced is True

    def test_range_assignor_pattern(self) -> None:
        # 10 members, 30 partitions: two members hold 12 each, the rest 6 in total.
        # top ceil(20% of 10) = 2 members hold 24/30 = 80% > 50%, and 12 > ceil(3*1.1) = 4
        a = assignment_balance(loads(12, 12, 1, 1, 1, 1, 1, 1, 0, 0), 1.10)
        assert (a.top_members, a.top_members_share) == (2, pytest.approx(0.8))
        assert (a.balanced, a.range_assignor_pattern) == (False, True)

    def test_uneven_but_not_concentrated_is_not_range(self) -> None:
        # 5,5,0,0: top 1 of 4 holds exactly 50%, not more: unbalanced, not the pattern
        a = assignment_balance(loads(5, 5, 0, 0), 1.10)
        assert (a.balanced, a.range_assignor_pattern) == (False, False)

    def test_single_member_and_no_member(self) -> None:
        assert assignment_balance(loads(7), 1.10).balanced is True
        assert assignment_balance(loads(7), 1.10).range_assignor_pattern is False
        empty = assignment_balance([], 1.10)
        assert (empty.members, empty.max_over_mean, empty.balanced) == (0, None, True)


def test_source_connector_is_not_applicable_without_spark() -> None:
    snap = Snapshot(connector="files", kind=ConnectorKind.SOURCE, connector_class="FileStreamSource")
    assert not needs_spark(snap)
    doc = run_check(snap, Settings(), None)
    assert doc["verdict"] == "NOT_APPLICABLE"
    assert [r["code"] for r in doc["reasons"]] == ["SOURCE_CONNECTOR"]
    json.dumps(doc)


def test_settings_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="window"):
        Settings(window=0)
    with pytest.raises(ValueError, match="assignment_threshold"):
        Settings(assignment_threshold=0.9)


def codes(doc: dict[str, Any]) -> set[str]:
    return {r["code"] for r in doc["reasons"]}


def steady(topic: str, p: int, traffic: int, samples: int = 10) -> History:
    """Caught up at every sample, ``traffic`` records per partition over the window."""
    ends = [round(traffic * i / (samples - 1)) for i in range(samples)]
    return History(topic, p, ends, ends)


@pytest.mark.spark
class TestVerdict:
    def test_healthy(self, spark: SparkSession) -> None:
        hs = [steady("t", p, 200) for p in range(4)]
        snap = snapshot(
            hs,
            members=[member(0, ("t", 0), ("t", 1)), member(1, ("t", 2), ("t", 3))],
            tasks=[TaskInfo(0, "w", "RUNNING"), TaskInfo(1, "w", "RUNNING")],
        )
        doc = run_check(snap, Settings(), spark)
        assert doc["verdict"] == "HEALTHY", doc["reasons"]
        assert doc["headline"]["totalLag"] == 0
        assert doc["headline"]["burrowStatus"] == "OK"
        assert doc["headline"]["maxTrafficSkew"] == pytest.approx(1.0)
        assert doc["balance"]["assignment"]["balanced"] is True
        json.dumps(doc)

    def test_hot_partition_degrades(self, spark: SparkSession) -> None:
        # one key: all 300 records in partition 0 -> max/mean 4, Gini 0.75
        hs = [steady("t", 0, 300), *[steady("t", p, 0) for p in (1, 2, 3)]]
        snap = snapshot(hs, members=[member(0, ("t", 0), ("t", 1), ("t", 2), ("t", 3))])
        doc = run_check(snap, Settings(), spark)
        assert doc["verdict"] == "DEGRADED"
        assert codes(doc) == {"TRAFFIC_SKEW", "TRAFFIC_GINI"}
        assert doc["headline"]["maxTrafficSkew"] == pytest.approx(4.0)
        assert doc["headline"]["maxGini"] == pytest.approx(0.75)

    def test_low_traffic_is_not_judged(self, spark: SparkSession) -> None:
        hs = [steady("t", 0, 30), *[steady("t", p, 0) for p in (1, 2, 3)]]
        doc = run_check(snapshot(hs, members=[member(0, ("t", 0), ("t", 1), ("t", 2), ("t", 3))]), Settings(), spark)
        assert doc["verdict"] == "HEALTHY"
        assert "LOW_TRAFFIC" in codes(doc)
        assert run_check(snapshot(hs, members=[]), Settings(min_traffic=10), spark)["verdict"] == "DEGRADED"

    def test_paused_connector_with_lag_is_unhealthy(self, spark: SparkSession) -> None:
        ends = [100 + 10 * i for i in range(10)]
        snap = snapshot(
            [History("t", 0, ends, [50] * 10)],
            members=[member(0, ("t", 0))],
            tasks=[TaskInfo(0, "w", "PAUSED")],
            connector_state="PAUSED",
        )
        doc = run_check(snap, Settings(), spark)
        assert doc["verdict"] == "UNHEALTHY"
        assert {"BURROW_ERR", "CONNECTOR_NOT_RUNNING"} <= codes(doc)
        assert doc["lag"]["burrow"] | {"nonOkPartitions": None} == {
            "status": "ERR",
            "worstPartitionStatus": "STOP",
            "statusCounts": {"STOP": 1},
            "complete": 1.0,
            "nonOkPartitions": None,
            "nonOkTruncated": 0,
        }
        assert doc["lag"]["total"] == 140

    def paused_sink(self, connector_state: str = "PAUSED") -> Snapshot:
        # log-end 100..190 over 0..90 s (1 record/s), committed 50 throughout: lag 140. Time
        # lag: 50 lies before the first point, so Kafka Lag Exporter extrapolates along the
        # first and last points (1 record/s): offset 50 was written at 90 - (190-50)/1 = -50 s,
        # 140 s before now (90 s).
        ends = [100 + 10 * i for i in range(10)]
        return snapshot(
            [History("t", 0, ends, [50] * 10)],
            members=[member(0, ("t", 0))],
            tasks=[TaskInfo(0, "w", connector_state)],
            connector_state=connector_state,
        )

    def test_paused_by_spec_is_paused_with_its_lag(self, spark: SparkSession) -> None:
        doc = run_check(self.paused_sink(), Settings(desired_state="paused"), spark)
        assert doc["verdict"] == "PAUSED"
        severities = {r["code"]: r["severity"] for r in doc["reasons"]}
        assert severities["BURROW_ERR"] == "INFO"  # kept, but not held against it
        assert severities["CONNECTOR_PAUSED"] == "INFO"
        assert doc["headline"]["totalLag"] == 140
        assert doc["headline"]["timeLagSeconds"] == pytest.approx(140.0)
        assert "140s behind" in next(r["message"] for r in doc["reasons"] if r["code"] == "CONNECTOR_PAUSED")

    @pytest.mark.parametrize(
        ("records", "seconds", "verdict"),
        [(139, None, "UNHEALTHY"), (140, None, "PAUSED"), (None, 139.0, "UNHEALTHY"), (None, 141.0, "PAUSED")],
    )
    def test_paused_past_its_threshold_is_unhealthy(
        self, spark: SparkSession, records: int | None, seconds: float | None, verdict: str
    ) -> None:
        settings = Settings(desired_state="paused", max_lag_while_paused=records, max_time_lag_while_paused_s=seconds)
        doc = run_check(self.paused_sink(), settings, spark)
        assert doc["verdict"] == verdict
        assert ("LAG_WHILE_PAUSED_ABOVE_MAX" in codes(doc)) is (verdict == "UNHEALTHY")

    def test_stopped_by_spec_or_reset_and_a_failed_task(self, spark: SparkSession) -> None:
        assert run_check(self.paused_sink("STOPPED"), Settings(desired_state="stopped"), spark)["verdict"] == "STOPPED"
        assert run_check(self.paused_sink("STOPPED"), Settings(reset_in_progress=True), spark)["verdict"] == "STOPPED"
        failed = run_check(self.paused_sink("FAILED"), Settings(desired_state="paused"), spark)
        assert failed["verdict"] == "UNHEALTHY"
        assert "TASK_FAILED" in codes(failed)

    def test_catching_up_after_a_rewinding_reset(self, spark: SparkSession) -> None:
        # log-end 1000..1090 (1 record/s), committed 0,50,..,450 (5 records/s): lag 1000 down
        # to 640, Burrow OK (the lag decreases); 640 > maxLag 100 -> DEGRADED on its own.
        # After toEarliest that lag is the point: CATCHING_UP, ETA 640 / (5 - 1) = 160 s.
        snap = snapshot(
            [History("t", 0, [1000 + 10 * i for i in range(10)], [50 * i for i in range(10)])],
            members=[member(0, ("t", 0))],
        )
        plain = run_check(snap, Settings(max_lag=100), spark)
        assert plain["verdict"] == "DEGRADED"
        assert codes(plain) >= {"LAG_ABOVE_MAX"}
        doc = run_check(snap, Settings(max_lag=100, after_reset="toEarliest"), spark)
        assert doc["verdict"] == "CATCHING_UP"
        assert doc["headline"]["etaSeconds"] == pytest.approx(160.0)
        assert (doc["lag"]["consumeRate"], doc["lag"]["produceRate"]) == (pytest.approx(5.0), pytest.approx(1.0))
        assert doc["lag"]["etaReason"] is None
        # toLatest skips ahead: a large lag afterwards is not expected
        assert run_check(snap, Settings(max_lag=100, after_reset="toLatest"), spark)["verdict"] == "DEGRADED"

    def test_falling_behind_after_a_reset_has_no_eta(self, spark: SparkSession) -> None:
        # committed +5 per 10 s (0.5/s) while 1 record/s arrives: lag grows, Burrow WARN
        snap = snapshot(
            [History("t", 0, [1000 + 10 * i for i in range(10)], [5 * i for i in range(10)])],
            members=[member(0, ("t", 0))],
        )
        doc = run_check(snap, Settings(max_lag=100, after_reset="toEarliest"), spark)
        assert doc["verdict"] == "DEGRADED"
        assert {"NOT_CATCHING_UP", "BURROW_WARN", "LAG_ABOVE_MAX"} <= codes(doc)
        assert doc["headline"]["etaSeconds"] is None
        assert "consumes 0.50 records/s while 1.00 records/s are produced" in doc["lag"]["etaReason"]

    def test_warn_and_lag_threshold(self, spark: SparkSession) -> None:
        ends = [100 + 10 * i for i in range(10)]
        snap = snapshot([History("t", 0, ends, [5 * i for i in range(10)])], members=[member(0, ("t", 0))])
        doc = run_check(snap, Settings(max_lag=100), spark)
        assert doc["verdict"] == "DEGRADED"
        assert codes(doc) == {"BURROW_WARN", "LAG_ABOVE_MAX"}
        assert doc["headline"]["burrowStatus"] == "WARN"
        assert run_check(snap, Settings(max_lag=145), spark)["verdict"] == "DEGRADED"
        assert codes(run_check(snap, Settings(max_lag=145), spark)) == {"BURROW_WARN"}

    def test_failed_task_and_unbalanced_assignment(self, spark: SparkSession) -> None:
        hs = [steady("t", p, 200) for p in range(6)]
        snap = snapshot(
            hs,
            members=[member(0, *[("t", p) for p in range(5)]), member(1, ("t", 5)), member(2)],
            tasks=[TaskInfo(0, "w", "RUNNING"), TaskInfo(1, "w", "RUNNING"), TaskInfo(2, "w", "FAILED")],
        )
        doc = run_check(snap, Settings(), spark)
        assert doc["verdict"] == "UNHEALTHY"
        assert codes(doc) == {"TASK_FAILED", "ASSIGNMENT_UNBALANCED", "RANGE_ASSIGNOR_PATTERN"}
        assert doc["headline"]["assignmentMaxOverMean"] == pytest.approx(2.5)

    def test_equal_counts_hiding_the_hot_partitions_on_one_member(self, spark: SparkSession) -> None:
        """Every topic is even and every member holds 3 partitions, but one member holds all of
        the busy topic: 1200 of 1320 records, 1200 / (1320 / 3) = 2.727x the mean per member."""
        hs = [steady("hot", p, 400) for p in range(3)] + [steady("cold", p, 20) for p in range(6)]
        members = [
            member(0, *[("hot", p) for p in range(3)]),
            member(1, *[("cold", p) for p in range(3)]),
            member(2, *[("cold", p) for p in range(3, 6)]),
        ]
        tasks = [TaskInfo(i, "w", "RUNNING") for i in range(3)]
        doc = run_check(snapshot(hs, members=members, tasks=tasks), Settings(), spark)
        assert codes(doc) == {"MEMBER_TRAFFIC_SKEW"}, doc["reasons"]
        assignment = doc["balance"]["assignment"]
        assert assignment["balanced"] is True
        assert assignment["traffic"]["total"] == 1320
        assert assignment["traffic"]["maxOverMean"] == pytest.approx(1200 / 440)
        assert [m["traffic"] for m in assignment["perMember"]] == [1200, 60, 60]
        assert "2.73x the mean traffic per member" in doc["reasons"][0]["message"]
        assert doc["verdict"] == "DEGRADED"

    def test_unassigned_partitions_and_missing_ownership(self, spark: SparkSession) -> None:
        hs = [steady("t", p, 200) for p in range(2)]
        doc = run_check(snapshot(hs, members=[member(0, ("t", 0))]), Settings(), spark)
        assert "UNASSIGNED_PARTITIONS" in codes(doc)
        doc = run_check(snapshot(hs, members=None), Settings(), spark)
        assert doc["verdict"] == "HEALTHY"
        assert "OWNERSHIP_UNKNOWN" in codes(doc)
        assert doc["balance"]["assignment"] is None

    def test_not_measurable_snapshot(self, spark: SparkSession) -> None:
        snap = Snapshot(
            connector="s", kind=ConnectorKind.SINK, not_applicable_reason="log-end offsets could not be read"
        )
        doc = run_check(snap, Settings(), spark)
        assert (doc["verdict"], [r["code"] for r in doc["reasons"]]) == ("NOT_APPLICABLE", ["NOT_MEASURABLE"])
